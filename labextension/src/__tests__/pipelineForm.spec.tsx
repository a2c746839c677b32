import { Widget } from '@lumino/widgets';

import { GPUSchedError } from '../api';
import { PipelineDialogBody } from '../components/PipelineDialog';
import {
  buildPipeline,
  IPipelineValues,
  pipelineErrors
} from '../pipelineForm';

function values(patch: Partial<IPipelineValues> = {}): IPipelineValues {
  return {
    notebooks: ['prep.ipynb', 'train.ipynb', 'eval.ipynb'],
    gpus: '2',
    priority: 'high',
    chain: true,
    ...patch
  };
}

describe('buildPipeline', () => {
  it('chains the rows in order, each step with the shared GPUs and priority', () => {
    const { body, errors } = buildPipeline(values());
    expect(errors).toEqual({});
    expect(body).toEqual({
      steps: [
        { notebook: 'prep.ipynb', gpus: 2, priority: 'high' },
        { notebook: 'train.ipynb', gpus: 2, priority: 'high' },
        { notebook: 'eval.ipynb', gpus: 2, priority: 'high' }
      ],
      edges: [
        [0, 1],
        [1, 2]
      ]
    });
  });

  it('sends no edges when the steps are not chained', () => {
    const { body } = buildPipeline(values({ chain: false }));
    expect(body?.edges).toEqual([]);
    expect(body?.steps).toHaveLength(3);
  });

  it('skips empty rows and trims paths, remembering which row each step came from', () => {
    const { body, rowOfStep } = buildPipeline(
      values({ notebooks: [' a.ipynb ', '', '  ', 'b.ipynb'] })
    );
    expect(body?.steps.map(s => s.notebook)).toEqual(['a.ipynb', 'b.ipynb']);
    expect(body?.edges).toEqual([[0, 1]]);
    expect(rowOfStep).toEqual([0, 3]);
  });

  it('sends nothing without a notebook or with GPUs that are not a whole number', () => {
    const empty = buildPipeline(values({ notebooks: ['', ' '] }));
    expect(empty.body).toBeUndefined();
    expect(empty.errors.steps).toMatch(/at least one notebook/);
    const gpus = buildPipeline(values({ gpus: '1.5' }));
    expect(gpus.body).toBeUndefined();
    expect(gpus.errors).toEqual({ gpus: 'GPUs must be a whole number.' });
  });
});

describe('pipelineErrors', () => {
  const refusal = (field: string | null, message = 'no'): GPUSchedError =>
    new GPUSchedError(message, 400, 'invalid_value', field);

  it("shows a step's notebook message at the row that step came from", () => {
    // rows 0 and 3 held notebooks: step 1 is row 3
    expect(
      pipelineErrors(
        refusal('steps[1].notebook', 'step 1: no notebook x.ipynb'),
        [0, 3]
      )
    ).toEqual({ 'step.3': 'step 1: no notebook x.ipynb' });
    expect(pipelineErrors(refusal('steps[0].notify'), [0, 3])).toEqual({
      'step.0': 'no'
    });
  });

  it('shows a shared field at its own input, and edges / steps at the list', () => {
    expect(pipelineErrors(refusal('steps[2].gpus'), [0, 1, 2])).toEqual({
      gpus: 'no'
    });
    expect(pipelineErrors(refusal('steps[0].priority'), [0])).toEqual({
      priority: 'no'
    });
    expect(pipelineErrors(refusal('edges'), [0, 1])).toEqual({ steps: 'no' });
    expect(pipelineErrors(refusal('steps[5].notebook'), [0])).toEqual({
      steps: 'no'
    });
  });

  it('shows anything else for the dialog as a whole', () => {
    expect(pipelineErrors(refusal(null, 'over budget'), [0])).toEqual({
      form: 'over budget'
    });
    expect(pipelineErrors(new Error('offline'), [0])).toEqual({
      form: 'offline'
    });
  });
});

describe('PipelineDialogBody', () => {
  let body: PipelineDialogBody | null = null;
  afterEach(() => {
    body?.dispose();
    body = null;
  });

  it('shows a message at its row, marked invalid and described by it', async () => {
    body = new PipelineDialogBody(values(), { 'step.1': 'step 1: no file' });
    Widget.attach(body, document.body);
    await body.renderPromise;
    const input = body.node.querySelector<HTMLInputElement>(
      '#gpusched-pipeline-step-1'
    )!;
    expect(input.value).toBe('train.ipynb');
    expect(input.getAttribute('aria-invalid')).toBe('true');
    const message = body.node.querySelector(
      `#${input.getAttribute('aria-describedby')}`
    );
    expect(message?.textContent).toBe('step 1: no file');
    expect(message?.getAttribute('role')).toBe('alert');
    expect(
      body.node
        .querySelector('#gpusched-pipeline-step-0')!
        .getAttribute('aria-invalid')
    ).toBeNull();
    // each row is labelled and has a named remove button
    expect(
      body.node.querySelector('label[for="gpusched-pipeline-step-2"]')
        ?.textContent
    ).toBe('Step 2');
    expect(
      body.node.querySelector('[aria-label="Remove step 2"]')
    ).not.toBeNull();
    expect(body.getValue()).toEqual(values());
  });

  it('puts the keyboard focus on the first notebook, or on the row a refusal names', async () => {
    body = new PipelineDialogBody(values(), {});
    Widget.attach(body, document.body);
    await body.renderPromise;
    expect(document.activeElement?.id).toBe('gpusched-pipeline-step-0');
    body.dispose();
    body = new PipelineDialogBody(values(), { 'step.2': 'step 2: no file' });
    Widget.attach(body, document.body);
    await body.renderPromise;
    expect(document.activeElement?.id).toBe('gpusched-pipeline-step-2');
  });
});
