import { EditorLanguageRegistry } from '@jupyterlab/codemirror';
import { INotebookContent } from '@jupyterlab/nbformat';
import {
  IMarkdownParser,
  RenderMimeRegistry,
  standardRendererFactories
} from '@jupyterlab/rendermime';
import { Widget } from '@lumino/widgets';

import {
  joinSource,
  notebookLanguage,
  NotebookView
} from '../components/NotebookView';

/** Enough markdown for the test: `# Title` → <h1>; the app supplies the real parser (marked). */
const parser: IMarkdownParser = {
  render: async (source: string) => source.replace(/^# (.*)$/m, '<h1>$1</h1>')
};

const notebook: INotebookContent = {
  nbformat: 4,
  nbformat_minor: 5,
  metadata: { language_info: { name: 'python' } },
  cells: [
    { cell_type: 'markdown', metadata: {}, source: ['# Training\n'] },
    {
      cell_type: 'code',
      metadata: {},
      execution_count: 1,
      source: ['for i in range(2):\n', "    print('step', i)"],
      outputs: [
        { output_type: 'stream', name: 'stdout', text: 'step 0\nstep 1\n' }
      ]
    },
    {
      cell_type: 'code',
      metadata: {},
      execution_count: 2,
      source: '1 + 1',
      outputs: [
        {
          output_type: 'execute_result',
          execution_count: 2,
          metadata: {},
          data: { 'text/plain': '2' }
        }
      ]
    },
    {
      cell_type: 'code',
      metadata: {},
      execution_count: 3,
      source: "raise ValueError('boom')",
      outputs: [
        {
          output_type: 'error',
          ename: 'ValueError',
          evalue: 'boom',
          traceback: ['ValueError: boom']
        }
      ]
    },
    {
      cell_type: 'markdown',
      metadata: {},
      source: '<img src=x onerror="window.__gpuschedPwned = 1">'
    },
    { cell_type: 'raw', metadata: {}, source: 'raw text' }
  ]
};

function languages(): EditorLanguageRegistry {
  const registry = new EditorLanguageRegistry();
  for (const lang of EditorLanguageRegistry.getDefaultLanguages()) {
    registry.addLanguage(lang);
  }
  return registry;
}

describe('NotebookView', () => {
  let view: NotebookView;

  beforeEach(async () => {
    const rendermime = new RenderMimeRegistry({
      initialFactories: standardRendererFactories,
      markdownParser: parser
    });
    view = new NotebookView({
      notebook,
      rendermime,
      languages: languages(),
      label: 'train.j1.ipynb'
    });
    Widget.attach(view, document.body);
    await view.ready;
  });

  afterEach(() => view.dispose());

  it('renders markdown cells through rendermime', () => {
    const heading = view.node.querySelector(
      '.jp-GPUSched-markdownCell .jp-RenderedMarkdown h1'
    );
    expect(heading?.textContent).toMatch(/^Training/); // then Lab's ¶ anchor
  });

  it('shows code cells with their prompt and highlighted source', () => {
    const cells = view.node.querySelectorAll('.jp-GPUSched-codeCell');
    expect(cells).toHaveLength(3);
    expect(cells[0].querySelector('.jp-InputPrompt')?.textContent).toBe('[1]:');
    const source = cells[0].querySelector('.jp-GPUSched-source');
    expect(source?.textContent).toBe(
      "for i in range(2):\n    print('step', i)"
    );
    // the highlighter wrapped tokens (keywords, strings) in classed spans
    expect(source?.querySelectorAll('span[class]').length).toBeGreaterThan(0);
  });

  it('shows outputs through OutputArea: streams, results and errors', () => {
    const outputs = view.node.querySelectorAll(
      '.jp-GPUSched-codeCell .jp-OutputArea'
    );
    expect(outputs).toHaveLength(3);
    expect(outputs[0].textContent).toContain('step 0\nstep 1');
    expect(outputs[1].textContent).toContain('2');
    expect(
      outputs[2].querySelector(
        '[data-mime-type="application/vnd.jupyter.stderr"]'
      )
    ).not.toBeNull();
    expect(outputs[2].textContent).toContain('ValueError: boom');
  });

  it("sanitizes the notebook's HTML (it is not trusted)", () => {
    const img = view.node.querySelectorAll('.jp-GPUSched-markdownCell')[1];
    expect(img.innerHTML).not.toContain('onerror');
  });

  it('shows raw cells as text, and is labelled for screen readers', () => {
    expect(view.node.querySelector('.jp-GPUSched-rawCell')?.textContent).toBe(
      'raw text'
    );
    expect(view.node.getAttribute('aria-label')).toBe('train.j1.ipynb');
  });
});

describe('notebook helpers', () => {
  it('joins multiline sources', () => {
    expect(joinSource(['a\n', 'b'])).toBe('a\nb');
    expect(joinSource('c')).toBe('c');
    expect(joinSource(undefined)).toBe('');
  });

  it("finds the notebook's language, python by default", () => {
    const nb = (metadata: Record<string, unknown>) =>
      ({ ...notebook, metadata }) as INotebookContent;
    expect(
      notebookLanguage(
        nb({ language_info: { name: 'python', codemirror_mode: 'ipython' } })
      )
    ).toBe('ipython');
    expect(
      notebookLanguage(
        nb({
          language_info: {
            name: 'python',
            codemirror_mode: { name: 'ipython', version: 3 }
          }
        })
      )
    ).toBe('ipython');
    expect(
      notebookLanguage(
        nb({ kernelspec: { name: 'ir', display_name: 'R', language: 'R' } })
      )
    ).toBe('R');
    expect(notebookLanguage(nb({}))).toBe('python');
  });
});
