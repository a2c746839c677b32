import { hasOutput, outputFileName, statusText } from '../format';

describe('statusText', () => {
  const cluster = { free_gpus: 3, total_gpus: 4 };

  it('counts an ADMITTED job as starting', () => {
    expect(statusText({ running: 0, starting: 1, queued: 0 }, cluster)).toBe(
      'GPU jobs: 0 running, 1 starting, 0 queued · 3/4 GPUs free'
    );
  });

  it('leaves "starting" out while nothing starts', () => {
    expect(statusText({ running: 2, starting: 0, queued: 1 }, cluster)).toBe(
      'GPU jobs: 2 running, 1 queued · 3/4 GPUs free'
    );
  });

  it('says it is loading before the first refresh, and leaves out unknown GPUs', () => {
    expect(statusText(null, cluster)).toBe('GPU jobs: …');
    expect(statusText({ running: 0, starting: 0, queued: 0 }, null)).toBe(
      'GPU jobs: 0 running, 0 queued'
    );
  });

  it('shows GPU kernels apart from jobs, only when there are some', () => {
    const none = { running: 1, starting: 0, queued: 0 };
    expect(statusText({ ...none, kernels: 1 }, cluster)).toBe(
      'GPU jobs: 1 running, 0 queued · 1 GPU kernel · 3/4 GPUs free'
    );
    expect(statusText({ ...none, kernels: 2, kernelsQueued: 1 }, null)).toBe(
      'GPU jobs: 1 running, 0 queued · 2 GPU kernels, 1 waiting'
    );
    expect(statusText({ ...none, kernelsQueued: 1 }, null)).toBe(
      'GPU jobs: 1 running, 0 queued · 1 GPU kernel waiting'
    );
  });
});

describe('outputFileName', () => {
  it('is <notebook name>.<job id>.ipynb, without the folders', () => {
    expect(
      outputFileName({ id: '8bd21dc53ab9', notebook: 'work/train.ipynb' })
    ).toBe('train.8bd21dc53ab9.ipynb');
    expect(outputFileName({ id: 'j1', notebook: 'Notes.IPYNB' })).toBe(
      'Notes.j1.ipynb'
    );
  });
});

describe('hasOutput', () => {
  it('is true for succeeded and failed jobs', () => {
    expect(hasOutput({ state: 'SUCCEEDED', progress: [2, 2] })).toBe(true);
    expect(hasOutput({ state: 'FAILED', progress: [0, 2] })).toBe(true);
  });

  it('is true for a cancelled job only once it ran a cell', () => {
    expect(hasOutput({ state: 'CANCELLED', progress: [1, 3] })).toBe(true);
    expect(hasOutput({ state: 'CANCELLED', progress: [0, 3] })).toBe(false);
    expect(hasOutput({ state: 'CANCELLED', progress: null })).toBe(false);
  });

  it('is false while the job has not ended', () => {
    expect(hasOutput({ state: 'RUNNING', progress: [1, 3] })).toBe(false);
    expect(hasOutput({ state: 'QUEUED', progress: null })).toBe(false);
  });
});

describe('pipelines in the status bar', () => {
  it('counts my jobs waiting for their dependencies apart from the queued ones', () => {
    expect(
      statusText({ running: 1, starting: 0, queued: 2, waiting: 3 }, null)
    ).toBe('GPU jobs: 1 running, 2 queued, 3 waiting');
    expect(statusText({ running: 0, starting: 0, queued: 0 }, null)).toBe(
      'GPU jobs: 0 running, 0 queued'
    );
  });
});
