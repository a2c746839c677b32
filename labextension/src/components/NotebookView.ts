/**
 * A job's executed notebook, read-only, in a main-area tab: rendered with Lab's rendermime
 * (markdown cells rendered, code cells' source highlighted, outputs through OutputArea).
 * No kernel and no file: the notebook stays in memory; "Download" saves it in the browser.
 */
import { IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import * as nbformat from '@jupyterlab/nbformat';
import { OutputArea, OutputAreaModel } from '@jupyterlab/outputarea';
import { IRenderMimeRegistry, MimeModel } from '@jupyterlab/rendermime';
import { Panel, Widget } from '@lumino/widgets';

export interface INotebookViewOptions {
  notebook: nbformat.INotebookContent;
  rendermime: IRenderMimeRegistry;
  /** Highlights code cells' source; without it the source is plain text. */
  languages?: IEditorLanguageRegistry | null;
  /** What a screen reader calls the view. */
  label?: string;
}

/** A cell's source as one string (nbformat allows a list of lines). */
export function joinSource(
  source: nbformat.MultilineString | undefined
): string {
  return Array.isArray(source) ? source.join('') : (source ?? '');
}

/** The language to highlight code cells in, from the notebook's metadata (default python). */
export function notebookLanguage(notebook: nbformat.INotebookContent): string {
  const info = notebook.metadata?.language_info;
  const mode = info?.codemirror_mode;
  if (typeof mode === 'string' && mode) {
    return mode;
  }
  if (mode && typeof mode === 'object' && typeof mode.name === 'string') {
    return mode.name;
  }
  const name = info?.name ?? notebook.metadata?.kernelspec?.language;
  return typeof name === 'string' && name ? name : 'python';
}

export class NotebookView extends Panel {
  constructor(options: INotebookViewOptions) {
    super();
    this.addClass('jp-GPUSched-notebookView');
    this.node.tabIndex = 0; // scrollable with the keyboard
    this.node.setAttribute('role', 'document');
    this.node.setAttribute(
      'aria-label',
      options.label ?? 'Executed notebook (read-only)'
    );
    this._rendermime = options.rendermime;
    this._languages = options.languages ?? null;
    this._language = notebookLanguage(options.notebook);
    const cells = options.notebook.cells ?? [];
    for (const cell of cells) {
      this.addWidget(this._cell(cell));
    }
    this.ready = Promise.all(this._pending).then(() => undefined);
  }

  /** Resolves once every markdown cell and code cell's source has rendered. */
  readonly ready: Promise<void>;

  private _cell(cell: nbformat.ICell): Widget {
    if (nbformat.isMarkdown(cell)) {
      return this._markdownCell(cell);
    }
    if (nbformat.isCode(cell)) {
      return this._codeCell(cell);
    }
    const raw = new Widget({ node: document.createElement('pre') });
    raw.addClass('jp-GPUSched-cell');
    raw.addClass('jp-GPUSched-rawCell');
    raw.node.textContent = joinSource(cell.source);
    return raw;
  }

  private _markdownCell(cell: nbformat.IMarkdownCell): Widget {
    const panel = new Panel();
    panel.addClass('jp-GPUSched-cell');
    panel.addClass('jp-GPUSched-markdownCell');
    const renderer = this._rendermime.createRenderer('text/markdown');
    panel.addWidget(renderer);
    const model = new MimeModel({
      data: { 'text/markdown': joinSource(cell.source) },
      trusted: false // the job's notebook is not signed: sanitize its HTML
    });
    this._pending.push(
      renderer.renderModel(model).catch(err => {
        renderer.node.textContent = joinSource(cell.source);
        renderer.node.title = `Could not render this markdown: ${err}`;
      })
    );
    return panel;
  }

  private _codeCell(cell: nbformat.ICodeCell): Widget {
    const panel = new Panel();
    panel.addClass('jp-GPUSched-cell');
    panel.addClass('jp-GPUSched-codeCell');
    const input = new Widget();
    input.addClass('jp-GPUSched-input');
    const prompt = document.createElement('div');
    prompt.className = 'jp-InputPrompt jp-GPUSched-prompt';
    prompt.textContent = `[${cell.execution_count ?? ' '}]:`;
    const pre = document.createElement('pre');
    pre.className = 'jp-GPUSched-source';
    input.node.append(prompt, pre);
    panel.addWidget(input);
    this._pending.push(this._highlight(joinSource(cell.source), pre));

    if (cell.outputs?.length) {
      const model = new OutputAreaModel({
        values: cell.outputs,
        trusted: false // no script from the job's outputs runs in this page
      });
      const outputs = new OutputArea({
        model,
        rendermime: this._rendermime
      });
      outputs.addClass('jp-GPUSched-outputs');
      panel.addWidget(outputs);
    }
    return panel;
  }

  private async _highlight(code: string, into: HTMLElement): Promise<void> {
    const languages = this._languages;
    const language = languages?.findBest(this._language) ?? null;
    if (!languages || !language) {
      into.textContent = code;
      return;
    }
    try {
      await languages.highlight(code, language, into);
    } catch {
      into.textContent = code; // an unknown grammar: plain text beats nothing
    }
  }

  private readonly _rendermime: IRenderMimeRegistry;
  private readonly _languages: IEditorLanguageRegistry | null;
  private readonly _language: string;
  private readonly _pending: Promise<void>[] = [];
}

/** Save `text` as a file through the browser (a download; nothing is written on the server). */
export function downloadText(
  fileName: string,
  text: string,
  type = 'application/x-ipynb+json'
): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = document.createElement('a');
  link.href = url;
  link.download = fileName;
  link.style.display = 'none';
  document.body.appendChild(link);
  link.click();
  link.remove();
  // later, once the browser has read the blob (revoking at once can cancel the download)
  setTimeout(() => URL.revokeObjectURL(url), 30_000);
}
