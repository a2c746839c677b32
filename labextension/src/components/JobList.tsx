import { Button, UseSignal } from '@jupyterlab/ui-components';
import * as React from 'react';

import {
  elapsedSeconds,
  formatDuration,
  formatStart,
  hasOutput,
  jobBadges,
  notebookName,
  shortId
} from '../format';
import { JobsModel } from '../model';
import { IJob, TERMINAL_STATES } from '../tokens';

/** What the list's buttons do; each may reject with a message shown on the job. */
export interface IJobActions {
  cancel(job: IJob): Promise<void>;
  openLog(job: IJob): Promise<void>;
  openOutput(job: IJob): Promise<void>;
  resubmit(job: IJob): Promise<void>;
  /** Show the pipeline the job belongs to (docs/pipelines.md). */
  openPipeline?(job: IJob): Promise<void>;
}

export interface IJobListProps {
  model: JobsModel;
  actions: IJobActions;
}

export function JobList(props: IJobListProps): JSX.Element {
  const [errors, setErrors] = React.useState<Record<string, string>>({});
  const [busy, setBusy] = React.useState<Record<string, boolean>>({});

  const run = (job: IJob, what: keyof IJobActions) => async () => {
    setBusy(b => ({ ...b, [job.id]: true }));
    setErrors(e => {
      const next = { ...e };
      delete next[job.id];
      return next;
    });
    try {
      await props.actions[what]?.(job);
    } catch (err) {
      setErrors(e => ({
        ...e,
        [job.id]: err instanceof Error ? err.message : String(err)
      }));
    } finally {
      setBusy(b => ({ ...b, [job.id]: false }));
    }
  };

  return (
    <UseSignal signal={props.model.changed}>
      {() => {
        const { model } = props;
        const jobs = model.jobs;
        return (
          <section className="jp-GPUSched-jobs" aria-label="GPU jobs">
            <div className="jp-GPUSched-sectionHeader">
              <h3>
                {model.me ? (model.me.admin ? 'All jobs' : 'My jobs') : 'Jobs'}
              </h3>
              <span className="jp-GPUSched-hint">
                {model.loaded
                  ? model.total > jobs.length
                    ? `newest ${jobs.length} of ${model.total}`
                    : `${model.total} job${model.total === 1 ? '' : 's'}`
                  : 'loading…'}
              </span>
            </div>
            {model.error && (
              <div className="jp-GPUSched-formError" role="alert">
                {model.error}
              </div>
            )}
            {model.loaded && jobs.length === 0 && (
              <div className="jp-GPUSched-hint">No jobs yet.</div>
            )}
            <ul className="jp-GPUSched-jobList">
              {jobs.map(job => (
                <JobItem
                  key={job.id}
                  job={job}
                  model={model}
                  busy={!!busy[job.id]}
                  error={errors[job.id]}
                  onCancel={run(job, 'cancel')}
                  onLog={run(job, 'openLog')}
                  onOutput={run(job, 'openOutput')}
                  onResubmit={run(job, 'resubmit')}
                  onPipeline={
                    job.pipeline_id && props.actions.openPipeline
                      ? run(job, 'openPipeline')
                      : undefined
                  }
                />
              ))}
            </ul>
          </section>
        );
      }}
    </UseSignal>
  );
}

interface IJobItemProps {
  job: IJob;
  model: JobsModel;
  busy: boolean;
  error?: string;
  onCancel: () => void;
  onLog: () => void;
  onOutput: () => void;
  onResubmit: () => void;
  /** Shown for a job in a pipeline. */
  onPipeline?: () => void;
}

function JobItem(props: IJobItemProps): JSX.Element {
  const { job } = props;
  const name = notebookName(job);
  const ended = TERMINAL_STATES.has(job.state);
  const detail = props.model.detail(job.id);
  const elapsed = elapsedSeconds(job);
  const progress = job.progress;
  const label = `${name} (${shortId(job.id)})`;
  const lines: string[] = [];
  if (job.state === 'WAITING' && job.after?.length) {
    lines.push(`waits for ${job.after.map(shortId).join(', ')}`);
  }
  if (job.state === 'QUEUED' && detail) {
    if (detail.position !== null && detail.position !== undefined) {
      lines.push(`#${detail.position + 1} in line`);
    }
    lines.push(`starts ${formatStart(detail.estimated_start)}`);
  }
  if (elapsed !== null) {
    lines.push(`${ended ? 'ran' : 'elapsed'} ${formatDuration(elapsed)}`);
  }
  if (progress) {
    lines.push(`cells ${progress[0]}/${progress[1]}`);
  }
  return (
    <li
      className="jp-GPUSched-job"
      data-job-id={job.id}
      data-state={job.state}
      aria-label={`${label}: ${job.state}`}
    >
      <div className="jp-GPUSched-jobHead">
        <span className="jp-GPUSched-jobName" title={job.notebook}>
          {name}
        </span>
        <span className={`jp-GPUSched-state jp-GPUSched-state-${job.state}`}>
          {job.state}
        </span>
        {jobBadges(job).map(badge => (
          <span
            key={badge.kind}
            className={`jp-GPUSched-state jp-GPUSched-badge-${badge.kind}`}
            title={badge.title}
          >
            {badge.label}
          </span>
        ))}
      </div>
      <div className="jp-GPUSched-jobMeta">
        {job.gpus} GPU{job.gpus === 1 ? '' : 's'} · {job.priority} ·{' '}
        {job.tenant}
        {job.preemptible ? ' · spot' : ''} ·{' '}
        <span title={job.id}>{shortId(job.id)}</span>
      </div>
      {lines.length > 0 && (
        <div className="jp-GPUSched-jobDetail">{lines.join(' · ')}</div>
      )}
      {progress && progress[1] > 0 && (
        <progress
          className={`jp-GPUSched-progress${
            job.state === 'FAILED' || job.state === 'LOST'
              ? ' jp-mod-failed'
              : ''
          }`}
          max={progress[1]}
          value={progress[0]}
          aria-label={`${label}: ${progress[0]} of ${progress[1]} cells done`}
        />
      )}
      {job.message && (
        <div className="jp-GPUSched-jobMessage">{job.message}</div>
      )}
      <div className="jp-GPUSched-actions">
        {!ended && (
          <button
            type="button"
            className="jp-Button jp-mod-styled jp-mod-warn"
            disabled={props.busy}
            onClick={props.onCancel}
            aria-label={`Cancel ${label}`}
          >
            Cancel
          </button>
        )}
        <Button
          type="button"
          minimal
          small
          className="jp-GPUSched-secondary"
          disabled={props.busy}
          onClick={props.onLog}
          aria-label={`Log of ${label}`}
        >
          Log
        </Button>
        {hasOutput(job) && (
          <Button
            type="button"
            minimal
            small
            className="jp-GPUSched-secondary"
            disabled={props.busy}
            onClick={props.onOutput}
            aria-label={`Output (executed notebook) of ${label}`}
          >
            Output
          </Button>
        )}
        {props.onPipeline && (
          <Button
            type="button"
            minimal
            small
            className="jp-GPUSched-secondary"
            disabled={props.busy}
            onClick={props.onPipeline}
            aria-label={`Pipeline of ${label}`}
          >
            Pipeline
          </Button>
        )}
        {ended && (
          <Button
            type="button"
            minimal
            small
            className="jp-GPUSched-secondary"
            disabled={props.busy}
            onClick={props.onResubmit}
            aria-label={`Resubmit ${label}`}
          >
            Resubmit
          </Button>
        )}
      </div>
      {props.error && (
        <div className="jp-GPUSched-fieldError" role="alert">
          {props.error}
        </div>
      )}
    </li>
  );
}
