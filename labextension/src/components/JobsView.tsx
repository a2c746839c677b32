/**
 * The main-area Jobs view: a sortable, filterable, paged table of jobs. Each refresh asks the
 * server for the visible page only (`GET jobs?sort&order&state&tenant&mine&q&limit&offset`) and
 * the place in line of its queued jobs; unchanged rows keep their objects, so they are not redrawn.
 */
import { ReactWidget, UseSignal } from '@jupyterlab/ui-components';
import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';
import * as React from 'react';

import { GPUSchedAPI } from '../api';
import {
  ariaSort,
  cellText,
  DEFAULT_QUERY,
  goToPage,
  ITableQuery,
  mergePage,
  pageInfo,
  setFilter,
  STATE_CHOICES,
  toggleSort,
  toJobFilter,
  visibleColumns
} from '../jobsTable';
import { JobsModel } from '../model';
import { IJob, IJobDetail } from '../tokens';
import { gpuIcon } from './icons';

/** Queued jobs on the page whose place in line is asked for per refresh. */
const DETAIL_LIMIT = 10;

export interface IJobsViewOptions {
  api: GPUSchedAPI;
  /** The sidebar's model: who we are (admin?), the tenants, the refresh interval. */
  model: JobsModel;
  onOpenJob: (job: IJob) => void;
  pageSize?: number;
}

/** The table's data, refreshed by its own poll (only the visible page). */
export class JobsTable {
  constructor(api: GPUSchedAPI, interval: number, pageSize: number) {
    this._api = api;
    this.query = { ...DEFAULT_QUERY, limit: pageSize };
    this._poll = new Poll({
      auto: false,
      factory: () => this._fetch(),
      frequency: { interval: interval * 1000, backoff: true, max: 60_000 },
      name: 'jupyter-gpusched:jobs-view',
      standby: 'when-hidden'
    });
  }

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  query: ITableQuery;
  rows: IJob[] = [];
  /** The offset the rows shown were fetched at (the query may already ask for another page). */
  rowsOffset = 0;
  total = 0;
  loaded = false;
  error: string | null = null;
  /** Jobs new or changed in the last refresh. */
  changedIds: string[] = [];

  detail(id: string): IJobDetail | undefined {
    return this._details.get(id);
  }

  start(): void {
    this._polling = true;
    void this._poll.start();
  }

  /** A new query (sort, filter, page): fetch now. */
  setQuery(query: ITableQuery): void {
    this.query = query;
    this._changed.emit();
    void this.refresh();
  }

  /** Fetch the visible page now (through the poll once it runs). */
  async refresh(): Promise<void> {
    if (this._polling) {
      await this._poll.refresh();
      await this._poll.tick;
      return;
    }
    try {
      await this._fetch();
    } catch {
      // already recorded in `error`
    }
  }

  dispose(): void {
    this._poll.dispose();
    Signal.clearData(this);
  }

  private async _fetch(): Promise<void> {
    const asked = this.query;
    try {
      const page = await this._api.listJobs(toJobFilter(asked));
      if (asked !== this.query) {
        return; // the user moved on while this was in flight
      }
      const queued = page.jobs
        .filter(j => j.state === 'QUEUED')
        .slice(0, DETAIL_LIMIT);
      const details = await Promise.all(
        queued.map(j => this._api.getJob(j.id).catch(() => undefined))
      );
      this._details = new Map(
        details.filter((d): d is IJobDetail => !!d).map(d => [d.id, d])
      );
      const merged = mergePage(this.rows, page.jobs);
      this.rows = merged.rows;
      this.rowsOffset = asked.offset;
      this.changedIds = this.loaded ? merged.changed : [];
      this.total = page.total;
      this.error = null;
      if (asked.offset > 0 && page.jobs.length === 0 && page.total > 0) {
        this.setQuery(goToPage(asked, Infinity, page.total)); // the page emptied: go to the last
      }
    } catch (err) {
      this.error = err instanceof Error ? err.message : String(err);
      throw err; // the poll backs off
    } finally {
      this.loaded = true;
      this._changed.emit();
    }
  }

  private readonly _api: GPUSchedAPI;
  private _poll: Poll;
  private _polling = false;
  private _details = new Map<string, IJobDetail>();
  private _changed = new Signal<this, void>(this);
}

/** The Jobs view (one per Lab window). */
export class JobsView extends ReactWidget {
  constructor(options: IJobsViewOptions) {
    super();
    this._options = options;
    this.table = new JobsTable(
      options.api,
      options.model.refreshInterval,
      options.pageSize ?? 50
    );
    this.id = 'gpusched-jobs-view';
    this.addClass('jp-GPUSched-jobsView');
    this.title.label = 'GPU Jobs';
    this.title.caption = 'All GPU jobs: sort, filter, page, open one';
    this.title.icon = gpuIcon;
    this.title.closable = true;
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', 'GPU jobs table');
    this.table.start();
  }

  readonly table: JobsTable;

  dispose(): void {
    this.table.dispose();
    super.dispose();
  }

  protected render(): JSX.Element {
    const { model, onOpenJob } = this._options;
    return (
      <UseSignal signal={model.changed}>
        {() => (
          <UseSignal signal={this.table.changed}>
            {() => (
              <JobsTableView
                table={this.table}
                admin={!!model.me?.admin}
                tenants={tenantChoices(
                  Object.keys(model.queues?.queues ?? {}),
                  this.table
                )}
                onOpenJob={onOpenJob}
              />
            )}
          </UseSignal>
        )}
      </UseSignal>
    );
  }

  private _options: IJobsViewOptions;
}

/** The configured tenants, those on the page and the one chosen (a job may outlive its tenant). */
function tenantChoices(configured: string[], table: JobsTable): string[] {
  const all = new Set(configured);
  table.rows.forEach(j => all.add(j.tenant));
  if (table.query.tenant) {
    all.add(table.query.tenant);
  }
  return [...all].sort();
}

interface IJobsTableViewProps {
  table: JobsTable;
  admin: boolean;
  tenants: string[];
  onOpenJob: (job: IJob) => void;
}

function JobsTableView(props: IJobsTableViewProps): JSX.Element {
  const { table, admin, tenants, onOpenJob } = props;
  const q = table.query;
  const columns = visibleColumns(admin);
  const info = pageInfo(q, table.total);
  const [text, setText] = React.useState(q.text);
  // Free text is sent once typing pauses, not on every key.
  React.useEffect(() => {
    if (text === table.query.text) {
      return;
    }
    const timer = setTimeout(
      () => table.setQuery(setFilter(table.query, { text })),
      300
    );
    return () => clearTimeout(timer);
  }, [text]);
  const now = Date.now();
  const changed = new Set(table.changedIds);

  return (
    <div className="jp-GPUSched-jobsViewBody">
      <div
        className="jp-GPUSched-jobsFilters"
        role="search"
        aria-label="Filter jobs"
      >
        <label>
          State{' '}
          <select
            className="jp-mod-styled"
            aria-label="Filter by state"
            value={q.state}
            onChange={e =>
              table.setQuery(
                setFilter(q, { state: e.target.value as ITableQuery['state'] })
              )
            }
          >
            {STATE_CHOICES.map(s => (
              <option key={s} value={s}>
                {s || 'all'}
              </option>
            ))}
          </select>
        </label>
        <label>
          Tenant{' '}
          <select
            className="jp-mod-styled"
            aria-label="Filter by tenant"
            value={q.tenant}
            onChange={e =>
              table.setQuery(setFilter(q, { tenant: e.target.value }))
            }
          >
            <option value="">all</option>
            {tenants.map(t => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </label>
        {admin && (
          <label>
            <input
              type="checkbox"
              checked={q.mine}
              onChange={e =>
                table.setQuery(setFilter(q, { mine: e.target.checked }))
              }
            />{' '}
            Mine only
          </label>
        )}
        <input
          type="search"
          className="jp-GPUSched-jobsSearch"
          placeholder="Search name, id, owner, tenant…"
          aria-label="Search jobs by name, id, owner, tenant or reason"
          value={text}
          onChange={e => setText(e.target.value)}
        />
      </div>
      <div className="jp-GPUSched-jobsTableWrap">
        <table className="jp-GPUSched-jobsTable" aria-rowcount={info.total + 1}>
          <caption className="jp-GPUSched-visuallyHidden">
            GPU jobs, {info.total} in all; press Enter on a row to open the job
          </caption>
          <thead>
            <tr>
              {columns.map(c => (
                <th
                  key={c.id}
                  scope="col"
                  aria-sort={c.sort ? ariaSort(q, c) : undefined}
                  data-column={c.id}
                >
                  {c.sort ? (
                    <button
                      type="button"
                      className="jp-GPUSched-sortButton"
                      onClick={() => table.setQuery(toggleSort(q, c.sort!))}
                    >
                      {c.label}
                      <span aria-hidden="true" className="jp-GPUSched-sortMark">
                        {ariaSort(q, c) === 'ascending'
                          ? ' ▲'
                          : ariaSort(q, c) === 'descending'
                            ? ' ▼'
                            : ''}
                      </span>
                    </button>
                  ) : (
                    c.label
                  )}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {table.rows.map((job, i) => (
              <tr
                key={job.id}
                tabIndex={0}
                data-job-id={job.id}
                data-state={job.state}
                aria-rowindex={
                  table.rowsOffset + i + 2 /* the header is row 1 */
                }
                className={
                  changed.has(job.id) ? 'jp-GPUSched-rowChanged' : undefined
                }
                aria-label={`${cellText(columns[0], job, undefined)}, ${job.state}. Enter opens the job.`}
                onClick={() => onOpenJob(job)}
                onKeyDown={e => {
                  if (e.key === 'Enter') {
                    e.preventDefault();
                    onOpenJob(job);
                  }
                }}
              >
                {columns.map(c => (
                  <td key={c.id} data-column={c.id}>
                    {c.id === 'state' ? (
                      <span
                        className={`jp-GPUSched-state jp-GPUSched-state-${job.state}`}
                      >
                        {job.state}
                      </span>
                    ) : (
                      cellText(c, job, table.detail(job.id), now)
                    )}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
        {table.loaded && table.rows.length === 0 && !table.error && (
          <p className="jp-GPUSched-empty">No jobs match.</p>
        )}
      </div>
      <nav className="jp-GPUSched-pager" aria-label="Pages of jobs">
        <button
          type="button"
          className="jp-Button jp-mod-minimal jp-mod-styled"
          disabled={info.page <= 1}
          onClick={() => table.setQuery(goToPage(q, info.page - 1, info.total))}
        >
          ‹ Previous
        </button>
        <span className="jp-GPUSched-pageInfo" role="status" aria-live="polite">
          {info.total === 0
            ? 'No jobs'
            : `${info.first}–${info.last} of ${info.total} · page ${info.page} of ${info.pages}`}
        </span>
        <button
          type="button"
          className="jp-Button jp-mod-minimal jp-mod-styled"
          disabled={info.page >= info.pages}
          onClick={() => table.setQuery(goToPage(q, info.page + 1, info.total))}
        >
          Next ›
        </button>
        {table.error && (
          <span className="jp-GPUSched-error" role="alert">
            Refresh failed: {table.error}
          </span>
        )}
      </nav>
    </div>
  );
}
