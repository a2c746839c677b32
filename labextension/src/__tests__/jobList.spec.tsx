import { ReactWidget } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';
import * as React from 'react';

import { GPUSchedAPI } from '../api';
import { IJobActions, JobList } from '../components/JobList';
import { JobsModel } from '../model';
import { IJob, JobState } from '../tokens';
import { FakeServer, json, makeJob } from './fakeServer';

function job(
  id: string,
  state: JobState,
  progress: [number, number] | null
): IJob {
  return makeJob(id, state, {
    started: '2026-01-01T00:00:01.000+00:00',
    finished: TERMINAL.has(state) ? '2026-01-01T00:00:09.000+00:00' : null,
    attempts: 1,
    progress
  });
}

const TERMINAL = new Set<JobState>(['SUCCEEDED', 'FAILED', 'CANCELLED']);

const actions: IJobActions = {
  cancel: async () => undefined,
  openLog: async () => undefined,
  openOutput: async () => undefined,
  resubmit: async () => undefined
};

describe('JobList', () => {
  let model: JobsModel;
  let widget: ReactWidget;

  beforeEach(async () => {
    const server = new FakeServer();
    const jobs = [
      job('failed', 'FAILED', [1, 2]),
      job('cancelled', 'CANCELLED', [1, 3]),
      job('cancelledearly', 'CANCELLED', [0, 3]),
      job('running', 'RUNNING', [1, 3])
    ];
    server.routes['GET jobs'] = () =>
      json({ jobs, total: jobs.length, next_offset: null });
    server.routes['GET cluster'] = () =>
      json({ total_gpus: 4, free_gpus: 3, nodes: [], pools: [] });
    server.routes['GET queues'] = () => json({ policy: 'dynamic', queues: {} });
    model = new JobsModel({ api: new GPUSchedAPI(server.settings) });
    await model.refresh();
    widget = ReactWidget.create(<JobList model={model} actions={actions} />);
    Widget.attach(widget, document.body);
    await widget.renderPromise;
  });

  afterEach(() => {
    widget.dispose();
    model.dispose();
  });

  const item = (id: string) =>
    widget.node.querySelector(`li[data-job-id="${id}"]`) as HTMLElement;
  const buttons = (id: string) =>
    Array.from(item(id).querySelectorAll('button')).map(b => b.textContent);

  it("draws a failed job's progress in the error style, a running one's not", () => {
    const failed = item('failed').querySelector('progress');
    expect(failed?.classList.contains('jp-mod-failed')).toBe(true);
    expect(failed?.value).toBe(1);
    const running = item('running').querySelector('progress');
    expect(running?.classList.contains('jp-mod-failed')).toBe(false);
  });

  it('offers Output for a cancelled job only once it ran a cell', () => {
    expect(buttons('cancelled')).toContain('Output');
    expect(buttons('cancelledearly')).not.toContain('Output');
    expect(buttons('failed')).toContain('Output');
    expect(buttons('running')).not.toContain('Output');
  });

  it("styles buttons by meaning: Cancel warns, the rest are Lab's minimal buttons", () => {
    const all = Array.from(widget.node.querySelectorAll('button'));
    const cancel = all.filter(b => b.textContent === 'Cancel');
    expect(cancel).toHaveLength(1);
    expect(cancel[0].classList.contains('jp-mod-warn')).toBe(true);
    for (const b of all.filter(b => b.textContent !== 'Cancel')) {
      expect(b.classList.contains('jp-mod-minimal')).toBe(true);
      expect(b.classList.contains('jp-mod-reject')).toBe(false);
    }
  });
});
