/**
 * One job's page (a main-area tab opened from the Jobs view): its state and place in line / ETA,
 * parameters and settings, history (`GET jobs/{id}/events`), the actions, and its log followed
 * live (LogView) below. The output opens in the read-only viewer (NotebookView).
 */
import { ReactWidget, UseSignal } from '@jupyterlab/ui-components';
import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';
import { Panel } from '@lumino/widgets';
import * as React from 'react';

import { GPUSchedAPI } from '../api';
import {
  elapsedSeconds,
  expectedRun,
  formatDuration,
  hasOutput,
  notebookName
} from '../format';
import { etaText, formatWhen } from '../jobsTable';
import { formatValue } from '../params';
import { IJob, IJobDetail, IJobEvent, TERMINAL_STATES } from '../tokens';
import { gpuIcon } from './icons';
import { LogView } from './LogView';

/** What the detail page's buttons do; each may reject with a message shown on the page. */
export interface IJobDetailActions {
  cancel(job: IJob): Promise<void>;
  resubmit(job: IJob): Promise<void>;
  /** Fill the sidebar form with the job's settings and parameters, to edit and submit. */
  editAndResubmit(job: IJobDetail): Promise<void>;
  openOutput(job: IJob): Promise<void>;
  downloadOutput(job: IJob): Promise<void>;
}

/** The job and its history, refreshed while the job has not ended. */
class JobDetailModel {
  constructor(api: GPUSchedAPI, id: string, interval: number) {
    this._api = api;
    this.id = id;
    this._poll = new Poll({
      auto: true,
      factory: () => this._fetch(),
      frequency: { interval: interval * 1000, backoff: true, max: 60_000 },
      name: `jupyter-gpusched:job:${id}`,
      standby: 'when-hidden'
    });
  }

  readonly id: string;
  job: IJobDetail | null = null;
  events: IJobEvent[] = [];
  error: string | null = null;

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  refresh(): Promise<void> {
    return this._poll.refresh();
  }

  dispose(): void {
    this._poll.dispose();
    Signal.clearData(this);
  }

  private async _fetch(): Promise<void> {
    try {
      const [job, events] = await Promise.all([
        this._api.getJob(this.id),
        this._api.events(this.id)
      ]);
      this.job = job;
      this.events = events;
      this.error = null;
      if (TERMINAL_STATES.has(job.state)) {
        this._poll.stop(); // nothing more will happen to it
      }
    } catch (err) {
      this.error = err instanceof Error ? err.message : String(err);
      throw err;
    } finally {
      this._changed.emit();
    }
  }

  private readonly _api: GPUSchedAPI;
  private readonly _poll: Poll;
  private _changed = new Signal<this, void>(this);
}

/** The job's tab: the summary above, its log below. */
export class JobDetailView extends Panel {
  constructor(options: {
    api: GPUSchedAPI;
    job: IJob;
    actions: IJobDetailActions;
    interval: number;
  }) {
    super();
    const { api, job, actions, interval } = options;
    this.model = new JobDetailModel(api, job.id, interval);
    this.id = `gpusched-job-${job.id}`;
    this.addClass('jp-GPUSched-jobDetail');
    this.title.label = `Job: ${notebookName(job)} (${job.id.slice(0, 8)})`;
    this.title.caption = `GPU job ${job.id} (${job.notebook})`;
    this.title.icon = gpuIcon;
    this.title.closable = true;
    const model = this.model;
    const summary = ReactWidget.create(
      <UseSignal signal={model.changed}>
        {() => <JobSummary model={model} actions={actions} />}
      </UseSignal>
    );
    summary.addClass('jp-GPUSched-jobSummary');
    this.log = new LogView(api, job.id);
    this.addWidget(summary);
    this.addWidget(this.log);
  }

  readonly model: JobDetailModel;
  readonly log: LogView;

  dispose(): void {
    this.model.dispose();
    super.dispose();
  }
}

function JobSummary(props: {
  model: JobDetailModel;
  actions: IJobDetailActions;
}): JSX.Element {
  const { model, actions } = props;
  const [error, setError] = React.useState<string | null>(null);
  const [busy, setBusy] = React.useState(false);
  const job = model.job;
  if (!job) {
    return (
      <p className="jp-GPUSched-empty" role="status">
        {model.error ? `Could not load the job: ${model.error}` : 'Loading…'}
      </p>
    );
  }
  const run = (what: () => Promise<void>) => async () => {
    setBusy(true);
    setError(null);
    try {
      await what();
      await model.refresh();
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };
  const ended = TERMINAL_STATES.has(job.state);
  const ran = elapsedSeconds(job);
  const eta = etaText(job, job);
  const settings: [string, string][] = [
    ['Notebook', job.notebook],
    ['Id', job.id],
    ['Owner', job.owner],
    ['Tenant', job.tenant],
    ['Priority', job.priority],
    ['GPUs', `${job.gpus}${job.gpu_type ? ` × ${job.gpu_type}` : ''}`],
    ['Submitted', formatWhen(job.created)],
    ['Started', formatWhen(job.started)],
    ['Finished', formatWhen(job.finished)],
    ['Ran', ran === null ? '—' : formatDuration(ran)],
    [
      'Max runtime',
      job.max_runtime ? formatDuration(job.max_runtime) : 'no limit'
    ],
    ['Spot / preemptible', job.preemptible ? 'yes' : 'no']
  ];
  const expected = expectedRun(job.runtime_estimate);
  if (expected) {
    settings.splice(settings.length - 1, 0, [
      'Expected run',
      `${expected.text.replace(/^expected run /, '')}, ${expected.detail}`
    ]);
  }
  const params = Object.entries(job.parameters ?? {});
  return (
    <div className="jp-GPUSched-jobSummaryBody">
      <div className="jp-GPUSched-jobTitle">
        <h2>{notebookName(job)}</h2>
        <span
          className={`jp-GPUSched-state jp-GPUSched-state-${job.state}`}
          data-state={job.state}
        >
          {job.state}
        </span>
        {eta && <span className="jp-GPUSched-eta">{eta}</span>}
        {expected && !ended && (
          <span className="jp-GPUSched-expectedRun" title={expected.detail}>
            {expected.text}
          </span>
        )}
      </div>
      {job.message && <p className="jp-GPUSched-jobMessage">{job.message}</p>}
      <div
        className="jp-GPUSched-actions"
        role="toolbar"
        aria-label="Job actions"
      >
        {!ended && (
          <button
            type="button"
            className="jp-Button jp-mod-styled jp-mod-warn"
            disabled={busy}
            onClick={run(() => actions.cancel(job))}
          >
            Cancel
          </button>
        )}
        <button
          type="button"
          className="jp-Button jp-mod-styled jp-mod-minimal"
          disabled={busy}
          onClick={run(() => actions.resubmit(job))}
        >
          Resubmit
        </button>
        <button
          type="button"
          className="jp-Button jp-mod-styled jp-mod-minimal"
          disabled={busy}
          onClick={run(() => actions.editAndResubmit(job))}
        >
          Resubmit with edits…
        </button>
        {hasOutput(job) && (
          <>
            <button
              type="button"
              className="jp-Button jp-mod-styled jp-mod-minimal"
              disabled={busy}
              onClick={run(() => actions.openOutput(job))}
            >
              Output
            </button>
            <button
              type="button"
              className="jp-Button jp-mod-styled jp-mod-minimal"
              disabled={busy}
              onClick={run(() => actions.downloadOutput(job))}
            >
              Download output
            </button>
          </>
        )}
      </div>
      {error && (
        <p className="jp-GPUSched-error" role="alert">
          {error}
        </p>
      )}
      <div className="jp-GPUSched-jobColumns">
        <section aria-label="Settings">
          <h3>Settings</h3>
          <dl className="jp-GPUSched-jobFields">
            {settings.map(([k, v]) => (
              <React.Fragment key={k}>
                <dt>{k}</dt>
                <dd>{v}</dd>
              </React.Fragment>
            ))}
          </dl>
          <h3>Parameters</h3>
          {params.length ? (
            <dl className="jp-GPUSched-jobFields">
              {params.map(([k, v]) => (
                <React.Fragment key={k}>
                  <dt>{k}</dt>
                  <dd>
                    <code>{formatValue(v)}</code>
                  </dd>
                </React.Fragment>
              ))}
            </dl>
          ) : (
            <p>None.</p>
          )}
        </section>
        <section aria-label="History">
          <h3>History</h3>
          <ol className="jp-GPUSched-history">
            {model.events.map((e, i) => (
              <li key={i}>
                <span className="jp-GPUSched-historyTime">
                  {formatWhen(e.time)}
                </span>{' '}
                <span className={`jp-GPUSched-state jp-GPUSched-state-${e.to}`}>
                  {e.to}
                </span>
                {e.reason ? ` ${e.reason}` : ''}
                {e.actor ? ` (${e.actor})` : ''}
              </li>
            ))}
          </ol>
        </section>
      </div>
    </div>
  );
}
