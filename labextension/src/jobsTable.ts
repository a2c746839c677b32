/**
 * The Jobs view's table, as plain data: its columns, the query (sort, filters, page) that
 * becomes one `GET jobs` request for the visible page, paging arithmetic, merging a refreshed
 * page into the rows shown, and the queued jobs' place in line / ETA text. No DOM, no requests.
 */
import { elapsedSeconds, formatDuration, notebookName } from './format';
import {
  IJob,
  IJobDetail,
  IJobFilter,
  JOB_STATES,
  JobSortKey,
  JobState
} from './tokens';

export type SortOrder = 'asc' | 'desc';

export interface IColumn {
  id: string;
  label: string;
  /** The server's sort key; null: not sortable (computed on the page). */
  sort: JobSortKey | null;
  /** Shown to admins only (they see everyone's jobs). */
  adminOnly?: boolean;
}

export const COLUMNS: ReadonlyArray<IColumn> = [
  { id: 'name', label: 'Name', sort: 'notebook' },
  { id: 'state', label: 'State', sort: 'state' },
  { id: 'tenant', label: 'Tenant', sort: 'tenant' },
  { id: 'priority', label: 'Priority', sort: 'priority' },
  { id: 'gpus', label: 'GPUs', sort: 'gpus' },
  { id: 'submitted', label: 'Submitted', sort: 'created' },
  { id: 'started', label: 'Started', sort: 'started' },
  { id: 'ran', label: 'Ran', sort: null },
  { id: 'eta', label: 'Place in line / ETA', sort: null },
  { id: 'owner', label: 'Owner', sort: 'owner', adminOnly: true }
];

/** The columns a caller sees. */
export function visibleColumns(admin: boolean): IColumn[] {
  return COLUMNS.filter(c => admin || !c.adminOnly);
}

/** The state filter's choices: '' (all) then every state (tokens.ts's one list). */
export const STATE_CHOICES: ReadonlyArray<JobState | ''> = ['', ...JOB_STATES];

export interface ITableQuery {
  sort: JobSortKey;
  order: SortOrder;
  state: JobState | '';
  tenant: string;
  mine: boolean;
  text: string;
  offset: number;
  limit: number;
}

export const DEFAULT_QUERY: ITableQuery = {
  sort: 'created',
  order: 'desc',
  state: '',
  tenant: '',
  mine: false,
  text: '',
  offset: 0,
  limit: 50
};

/** Text columns start A→Z; times and numbers start with the largest (newest, most urgent). */
const TEXT_SORTS = new Set<JobSortKey>([
  'notebook',
  'state',
  'tenant',
  'owner'
]);

/** Click on a column header: the same column flips its order, another starts at its natural one. */
export function toggleSort(q: ITableQuery, key: JobSortKey): ITableQuery {
  const order: SortOrder =
    q.sort === key
      ? q.order === 'asc'
        ? 'desc'
        : 'asc'
      : TEXT_SORTS.has(key)
        ? 'asc'
        : 'desc';
  return { ...q, sort: key, order, offset: 0 };
}

/** A changed filter starts again on the first page. */
export function setFilter(
  q: ITableQuery,
  patch: Partial<Pick<ITableQuery, 'state' | 'tenant' | 'mine' | 'text'>>
): ITableQuery {
  return { ...q, ...patch, offset: 0 };
}

/** `aria-sort` of a column's header. */
export function ariaSort(
  q: ITableQuery,
  column: IColumn
): 'ascending' | 'descending' | 'none' {
  if (!column.sort || column.sort !== q.sort) {
    return 'none';
  }
  return q.order === 'asc' ? 'ascending' : 'descending';
}

/** The request for the visible page. */
export function toJobFilter(q: ITableQuery): IJobFilter {
  const filter: IJobFilter = {
    limit: q.limit,
    offset: q.offset,
    sort: q.sort,
    order: q.order
  };
  if (q.state) {
    filter.state = q.state;
  }
  if (q.tenant) {
    filter.tenant = q.tenant;
  }
  if (q.mine) {
    filter.mine = true;
  }
  if (q.text.trim()) {
    filter.q = q.text.trim();
  }
  return filter;
}

export interface IPageInfo {
  /** 1-based. */
  page: number;
  pages: number;
  /** 1-based index of the first row shown, 0 when none. */
  first: number;
  last: number;
  total: number;
}

export function pageInfo(q: ITableQuery, total: number): IPageInfo {
  const pages = Math.max(1, Math.ceil(total / q.limit));
  const page = Math.min(pages, Math.floor(q.offset / q.limit) + 1);
  const first = total === 0 ? 0 : (page - 1) * q.limit + 1;
  const last = Math.min(total, page * q.limit);
  return { page, pages, first, last, total };
}

/** The query for a 1-based page, clamped to the pages there are. */
export function goToPage(
  q: ITableQuery,
  page: number,
  total: number
): ITableQuery {
  const pages = Math.max(1, Math.ceil(total / q.limit));
  const p = Math.min(pages, Math.max(1, Math.round(page)));
  return { ...q, offset: (p - 1) * q.limit };
}

/**
 * A refreshed page merged into the rows shown: the server's rows in its order, but a job that
 * did not change keeps its old object, so its row is not redrawn. `changed` names the jobs that
 * are new or changed (for the live region and a brief highlight).
 */
export function mergePage(
  shown: ReadonlyArray<IJob>,
  fresh: ReadonlyArray<IJob>
): { rows: IJob[]; changed: string[] } {
  const old = new Map(shown.map(j => [j.id, j]));
  const changed: string[] = [];
  const rows = fresh.map(job => {
    const before = old.get(job.id);
    if (before && JSON.stringify(before) === JSON.stringify(job)) {
      return before;
    }
    changed.push(job.id);
    return job;
  });
  return { rows, changed };
}

/** Minutes, rounded, in words: "about 12 min", "about 2 h 05 min", "under a minute". */
export function aboutMinutes(seconds: number): string {
  if (seconds < 60) {
    return 'under a minute';
  }
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) {
    return `about ${minutes} min`;
  }
  const h = Math.floor(minutes / 60);
  return `about ${h} h ${String(minutes % 60).padStart(2, '0')} min`;
}

/** Why a queued job has no estimate (the CLI's words: `estimated_start` is null then). */
export const NO_ETA_REASON = 'no runtime limits on the running jobs';

/**
 * A queued job's place in line and estimated start, from `GET jobs/{id}` (`position`,
 * `estimated_start`): "#3 in line · starts in about 12 min", or why there is no estimate.
 * '' for a job that is not queued; '…' before its detail is known.
 */
export function etaText(
  job: Pick<IJob, 'state'>,
  detail: Pick<IJobDetail, 'position' | 'estimated_start'> | undefined,
  now: number = Date.now()
): string {
  if (job.state !== 'QUEUED') {
    return '';
  }
  if (!detail) {
    return '…';
  }
  const place =
    detail.position !== null && detail.position !== undefined
      ? `#${detail.position + 1} in line · `
      : '';
  const start = detail.estimated_start
    ? Date.parse(detail.estimated_start)
    : NaN;
  if (!Number.isFinite(start)) {
    return `${place}no estimate: ${NO_ETA_REASON}`;
  }
  const wait = (start - now) / 1000;
  return wait <= 30
    ? `${place}starts any moment`
    : `${place}starts in ${aboutMinutes(wait)}`;
}

/** A date-time as the table shows it (the browser's locale, minutes). */
export function formatWhen(iso: string | null): string {
  if (!iso) {
    return '—';
  }
  const t = Date.parse(iso);
  return Number.isFinite(t)
    ? new Date(t).toLocaleString([], {
        month: 'short',
        day: 'numeric',
        hour: '2-digit',
        minute: '2-digit'
      })
    : '—';
}

/** The text of one cell. */
export function cellText(
  column: IColumn,
  job: IJob,
  detail: IJobDetail | undefined,
  now: number = Date.now()
): string {
  switch (column.id) {
    case 'name': // a GPU kernel's reservation is named `kernel:<id>`: say what it is
      return job.interactive
        ? `${notebookName(job)} (interactive)`
        : notebookName(job);
    case 'state':
      return job.state;
    case 'tenant':
      return job.tenant;
    case 'priority':
      return job.priority;
    case 'gpus':
      return String(job.gpus);
    case 'submitted':
      return formatWhen(job.created);
    case 'started':
      return formatWhen(job.started);
    case 'ran': {
      const s = elapsedSeconds(job, now);
      return s === null ? '—' : formatDuration(s);
    }
    case 'eta':
      return etaText(job, detail, now);
    case 'owner':
      return job.owner;
    default:
      return '';
  }
}
