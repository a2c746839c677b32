import { expectedRun, hasOutput, outputFileName, statusText } from '../format';

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

describe('expectedRun', () => {
  const learned = {
    seconds: 720,
    source: 'learned' as const,
    basis: 'owner+notebook+gpus' as const,
    samples: 5
  };

  it('says a learned estimate in minutes, and what it was learned from', () => {
    expect(expectedRun(learned)).toEqual({
      text: 'expected run ~12 min (learned)',
      detail: 'from 5 runs of this notebook'
    });
    expect(
      expectedRun({ ...learned, seconds: 7200, basis: 'tenant', samples: 3 })
    ).toEqual({
      text: 'expected run ~2.0 h (learned)',
      detail: "from 3 runs of this tenant's jobs"
    });
    expect(expectedRun({ ...learned, seconds: 10 })?.text).toBe(
      'expected run ~1 min (learned)'
    );
  });

  it('says nothing for a max_runtime or an unknown estimate', () => {
    expect(
      expectedRun({
        seconds: 600,
        source: 'max_runtime',
        basis: null,
        samples: null
      })
    ).toBeNull();
    expect(
      expectedRun({ seconds: null, source: null, basis: null, samples: null })
    ).toBeNull();
    expect(expectedRun(undefined)).toBeNull();
  });
});
