/**
 * Recurring schedules in the panel (docs/schedules.md): "Schedule…" beside the submit button (a cron
 * expression and time zone, with the server's preview in words and the next run), and the list of
 * schedules with pause / resume / delete, the next run and the last run's state.
 */
import { UseSignal } from '@jupyterlab/ui-components';
import { ISignal, Signal } from '@lumino/signaling';
import * as React from 'react';

import { GPUSchedAPI, GPUSchedError } from '../api';
import { buildSubmit, formField, SubmitFormModel } from '../form';
import { toJSONText } from '../params';
import { IJobSubmit, JobState } from '../tokens';

/** A schedule as `GET gpusched/api/schedules` lists it (openapi.yaml: Schedule). */
export interface ISchedule {
  id: string;
  owner: string;
  tenant: string;
  notebook: string;
  cron: string;
  timezone: string;
  paused: boolean;
  overlap: 'skip' | 'queue';
  catch_up: 'once' | 'skip';
  job: Record<string, unknown>;
  created: string;
  next_run: string | null;
  last_run: string | null;
  last_job: string | null;
  last_state: JobState | null;
  note: string;
}

/** `GET schedules/preview`: the expression in words and its next run times. */
export interface ISchedulePreview {
  cron: string;
  timezone: string;
  description: string;
  next_runs: string[];
}

const REFRESH_MS = 10000;

/** The schedules list's state, refreshed every 10 s and after each change. */
export class SchedulesModel {
  constructor(api: GPUSchedAPI) {
    this._api = api;
    void this.refresh();
    this._timer = window.setInterval(() => void this.refresh(), REFRESH_MS);
  }

  get changed(): ISignal<this, void> {
    return this._changed;
  }
  get schedules(): ISchedule[] {
    return this._schedules;
  }
  get error(): string | null {
    return this._error;
  }

  async refresh(): Promise<void> {
    try {
      const body = await this._api.requestJSON<{ schedules: ISchedule[] }>([
        'schedules'
      ]);
      this._schedules = body.schedules;
      this._error = null;
    } catch (err) {
      this._error = (err as Error).message;
    }
    this._changed.emit();
  }

  async create(
    spec: IJobSubmit,
    cron: string,
    timezone: string
  ): Promise<ISchedule> {
    const made = await this._api.requestJSON<ISchedule>(['schedules'], {
      method: 'POST',
      body: toJSONText({ ...spec, cron, timezone }), // as submit sends it: `3.0` stays a float
      headers: { 'Content-Type': 'application/json' }
    });
    await this.refresh();
    return made;
  }

  async setPaused(id: string, paused: boolean): Promise<void> {
    await this._api.requestJSON<ISchedule>(['schedules', id], {
      method: 'PATCH',
      body: JSON.stringify({ paused }),
      headers: { 'Content-Type': 'application/json' }
    });
    await this.refresh();
  }

  async remove(id: string): Promise<void> {
    await this._api.requestJSON<ISchedule>(['schedules', id], {
      method: 'DELETE'
    });
    await this.refresh();
  }

  preview(cron: string, timezone: string): Promise<ISchedulePreview> {
    return this._api.requestJSON<ISchedulePreview>(
      ['schedules', 'preview'],
      {},
      { cron, timezone }
    );
  }

  dispose(): void {
    window.clearInterval(this._timer);
  }

  private _api: GPUSchedAPI;
  private _timer: number;
  private _schedules: ISchedule[] = [];
  private _error: string | null = null;
  private _changed = new Signal<this, void>(this);
}

function localTime(iso: string | null): string {
  // with the zone's name: the preview's cron is in the schedule's zone, this in the browser's
  return iso
    ? new Date(iso).toLocaleString(undefined, { timeZoneName: 'short' })
    : '—';
}

function browserZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
}

/** "Schedule…": the form's job as a recurring schedule. */
export function ScheduleBox(props: {
  form: SubmitFormModel;
  model: SchedulesModel;
}): JSX.Element {
  const { form, model } = props;
  const [open, setOpen] = React.useState(false);
  const [cron, setCron] = React.useState('0 2 * * *');
  const [zone, setZone] = React.useState(browserZone());
  const [preview, setPreview] = React.useState<string>('');
  const [message, setMessage] = React.useState<string | null>(null);
  const [busy, setBusy] = React.useState(false);

  React.useEffect(() => {
    if (!open) {
      return;
    }
    const timer = window.setTimeout(() => {
      model.preview(cron, zone).then(
        p => {
          setPreview(
            `${p.description}, next: ${localTime(p.next_runs[0] ?? null)}`
          );
        },
        (err: GPUSchedError) => setPreview(err.message)
      );
    }, 300);
    return () => window.clearTimeout(timer);
  }, [open, cron, zone]);

  const create = async (): Promise<void> => {
    const { spec, errors } = buildSubmit(form.values);
    if (!spec) {
      setMessage(Object.values(errors)[0] ?? 'Check the form above.');
      return;
    }
    setBusy(true);
    try {
      const made = await model.create(spec, cron, zone);
      setMessage(
        `Schedule ${made.id} created; next run ${localTime(made.next_run)}`
      );
    } catch (err) {
      if (err instanceof GPUSchedError && formField(err.field)) {
        form.setError(err); // at its field in the form above (Notify me, GPUs, ...)
      }
      setMessage((err as Error).message);
    } finally {
      setBusy(false);
    }
  };

  if (!open) {
    return (
      <button
        type="button"
        className="jp-Button jp-mod-styled jp-GPUSched-secondary jp-GPUSched-scheduleOpen"
        onClick={() => setOpen(true)}
      >
        Schedule…
      </button>
    );
  }
  return (
    <fieldset className="jp-GPUSched-schedule" aria-label="Schedule">
      <legend>Run the notebook above on a schedule</legend>
      <label htmlFor="gpusched-schedule-cron">
        Cron (min hour day month weekday)
      </label>
      <input
        id="gpusched-schedule-cron"
        className="jp-mod-styled"
        value={cron}
        onChange={e => setCron(e.target.value)}
      />
      <label htmlFor="gpusched-schedule-tz">Time zone</label>
      <input
        id="gpusched-schedule-tz"
        className="jp-mod-styled"
        value={zone}
        onChange={e => setZone(e.target.value)}
      />
      <div className="jp-GPUSched-schedulePreview" role="status">
        {preview}
      </div>
      {message && <div className="jp-GPUSched-notice">{message}</div>}
      <button
        type="button"
        className="jp-Button jp-mod-styled jp-mod-accept jp-GPUSched-scheduleCreate"
        disabled={busy}
        onClick={() => void create()}
      >
        Create schedule
      </button>
      <button
        type="button"
        className="jp-Button jp-mod-styled jp-GPUSched-secondary"
        onClick={() => setOpen(false)}
      >
        Close
      </button>
    </fieldset>
  );
}

/** The schedules: next run, last result, pause / resume / delete. */
export function ScheduleList(props: { model: SchedulesModel }): JSX.Element {
  const { model } = props;
  const act = (work: Promise<void>): void => {
    work.catch(err => window.alert((err as Error).message));
  };
  return (
    <UseSignal signal={model.changed}>
      {() => (
        <section className="jp-GPUSched-schedules" aria-label="Schedules">
          <h3>Schedules</h3>
          {model.error && (
            <div className="jp-GPUSched-formError">{model.error}</div>
          )}
          {model.schedules.length === 0 && !model.error && (
            <div className="jp-GPUSched-empty">No schedules.</div>
          )}
          <ul>
            {model.schedules.map(s => (
              <li
                key={s.id}
                className="jp-GPUSched-scheduleRow"
                data-schedule-id={s.id}
              >
                <div className="jp-GPUSched-scheduleTitle">
                  {s.notebook.split('/').pop()} · <code>{s.cron}</code>{' '}
                  {s.timezone}
                </div>
                <div className="jp-GPUSched-scheduleInfo">
                  {s.paused ? 'Paused' : `Next: ${localTime(s.next_run)}`} ·
                  Last:{' '}
                  {s.last_job
                    ? `${s.last_state ?? ''} (${s.last_job})`
                    : 'none yet'}
                  {s.note ? ` · ${s.note}` : ''}
                </div>
                <button
                  type="button"
                  className="jp-Button jp-mod-minimal jp-GPUSched-schedulePause"
                  onClick={() => act(model.setPaused(s.id, !s.paused))}
                >
                  {s.paused ? 'Resume' : 'Pause'}
                </button>
                <button
                  type="button"
                  className="jp-Button jp-mod-minimal jp-GPUSched-scheduleDelete"
                  onClick={() => act(model.remove(s.id))}
                >
                  Delete
                </button>
              </li>
            ))}
          </ul>
        </section>
      )}
    </UseSignal>
  );
}
