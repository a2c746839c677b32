/**
 * Shapes of the jupyter-gpusched REST API (see jupyter_gpusched/server/openapi.yaml)
 * and the names shared across the extension.
 */

/** Every state a job can be in. */
export type JobState =
  | 'WAITING'
  | 'QUEUED'
  | 'ADMITTED'
  | 'RUNNING'
  | 'SUCCEEDED'
  | 'FAILED'
  | 'CANCELLED'
  | 'PREEMPTED'
  | 'LOST';

/**
 * Every state in the order the Jobs view's state filter lists them. A `Record` over `JobState`,
 * so a state added to the type fails to compile until it is given its place here (one edit).
 */
const STATE_ORDER: Record<JobState, number> = {
  WAITING: 0,
  QUEUED: 1,
  ADMITTED: 2,
  RUNNING: 3,
  SUCCEEDED: 4,
  FAILED: 5,
  CANCELLED: 6,
  PREEMPTED: 7,
  LOST: 8
};
export const JOB_STATES: ReadonlyArray<JobState> = (
  Object.keys(STATE_ORDER) as JobState[]
).sort((a, b) => STATE_ORDER[a] - STATE_ORDER[b]);

/** States a job never leaves. */
export const TERMINAL_STATES: ReadonlySet<JobState> = new Set<JobState>([
  'SUCCEEDED',
  'FAILED',
  'CANCELLED'
]);

/** States that wait for GPUs (shown as "queued" in the status bar). */
export const WAITING_STATES: ReadonlySet<JobState> = new Set<JobState>([
  'QUEUED',
  'PREEMPTED',
  'LOST'
]);

/** Waiting for its dependencies (`after`), outside the queue (docs/pipelines.md). */
export const DEPENDENCY_STATE: JobState = 'WAITING';

/** States that hold GPUs (shown as "running" in the status bar). */
export const RUNNING_STATES: ReadonlySet<JobState> = new Set<JobState>([
  'ADMITTED',
  'RUNNING'
]);

/** Job priorities, most urgent first (the server's `Priority`; checked against openapi.yaml). */
export type Priority = 'high' | 'normal' | 'low';
export const PRIORITIES: ReadonlyArray<Priority> = ['high', 'normal', 'low'];

/** A job as listed by `GET gpusched/api/jobs`. */
export interface IJob {
  id: string;
  state: JobState;
  notebook: string;
  gpus: number;
  priority: Priority;
  tenant: string;
  owner: string;
  created: string;
  started: string | null;
  finished: string | null;
  reason: string;
  preemptible: boolean;
  max_runtime: number | null;
  /** How long it is expected to run (docs/scheduling.md#runtime-estimates). */
  runtime_estimate: IRuntimeEstimate;
  allocation: { node: string; gpus: number[] }[];
  borrowed: boolean;
  attempts: number;
  preemptions: number;
  /** [cells done, cells total] while (or after) the notebook runs. */
  progress: [number, number] | null;
  message: string;
  /** Running, but nothing has moved since its stall_timeout before this (docs/stalls.md). */
  stalled_since: string | null;
  /** Its GPUs nearly idle while its processes were busy on CPU or storage I/O, with the figures. */
  waiting_on_data: IDataWait | null;
  /** A GPU kernel's reservation, not a notebook run (docs/interactive.md). */
  interactive?: boolean;
  /** Ids of the jobs it waits for (docs/pipelines.md). */
  after: string[];
  when: 'succeeded' | 'ended';
  /** The pipeline it was submitted in, if any. */
  pipeline_id: string | null;
  /** The recurring schedule it is a run of, if any (docs/schedules.md). */
  schedule_id: string | null;
}

/** `IJob.runtime_estimate`: learned from earlier runs like it, else its max_runtime, else unknown. */
export interface IRuntimeEstimate {
  seconds: number | null;
  source: 'learned' | 'max_runtime' | null;
  /** Which earlier runs a learned estimate comes from (most specific first). */
  basis:
    'owner+notebook+gpus' | 'owner+notebook' | 'tenant+gpus' | 'tenant' | null;
  /** How many runs a learned estimate comes from. */
  samples: number | null;
}

/** `GET gpusched/api/pipelines/{id}`: the steps (jobs, in step order) and the edges [from, to]. */
export interface IPipeline {
  id: string;
  state: 'WAITING' | 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'CANCELLED';
  steps: IJob[];
  edges: number[][];
}

/** `IJob.waiting_on_data`: GPU utilisation (%), CPU cores, storage MiB/s, and what may help. */
export interface IDataWait {
  gpu_util: number;
  cpu_cores: number;
  io_mib_s: number;
  hint: string;
}

/** `GET gpusched/api/me`: who the scheduler takes the caller for. */
export interface IMe {
  name: string;
  /** Sees every job, the metrics and the admin dashboard. */
  admin: boolean;
  /** Tenants the caller may submit to (under JupyterHub, those of their groups). */
  tenants: string[];
  default_tenant: string;
}

/** One job as returned by `GET gpusched/api/jobs/{id}` and `POST jobs`. */
export interface IJobDetail extends IJob {
  parameters: Record<string, unknown>;
  max_retries: number;
  gpu_type: string | null;
  /** CPUs and MiB of memory reserved on each node it runs on (0: not counted). */
  cpus: number;
  memory: number;
  /** 0-based place in line while queued. */
  position: number | null;
  estimated_start: string | null;
  /** The job's own stall timeout in seconds; null: the server's. */
  stall_timeout: number | null;
  /** Seconds between checkpoints it was submitted with; null: none asked. */
  checkpoint_interval?: number | null;
  /** The last progress report (source, time, cell, CPU, I/O, GPU figures). */
  activity: Record<string, unknown> | null;
  /** GPU-hours reported on, of which idle, of which waiting on data. */
  gpu_hours: { allocated: number; idle: number; waiting_on_data: number };
  /** Notification targets (an apprise URL only by its scheme), and the deliveries done. */
  notify?: Record<string, unknown>[];
  notified?: string[];
}

export type NotifyEvent = 'started' | 'succeeded' | 'failed' | 'cancelled';

/** One notification channel (openapi.yaml's NotifyTarget in its object form). */
export interface INotifyTarget {
  webhook?: string;
  email?: string;
  apprise?: string;
  events?: NotifyEvent[];
}

/** The body of `POST gpusched/api/jobs`. */
export interface IJobSubmit {
  notebook: string;
  gpus?: number;
  priority?: Priority;
  tenant?: string;
  parameters?: Record<string, unknown>;
  max_runtime?: number | null;
  /** Seconds between checkpoints ($GPUSCHED_CHECKPOINT_INTERVAL); a spot pool may hand a shorter one. */
  checkpoint_interval?: number | null;
  preemptible?: boolean;
  /** A GPU kernel's reservation (hub mode: the user's server asks for its kernels' GPUs so). */
  interactive?: boolean;
  max_retries?: number;
  gpu_type?: string | null;
  stall_timeout?: number | null;
  cpus?: number;
  memory?: number;
  /** Notification targets (docs/notifications.md); absent: the caller's defaults. */
  notify?: (string | INotifyTarget)[];
  after?: string[];
  when?: 'succeeded' | 'ended';
}

/** The fields of `IJobSubmit`, in the API's order (held equal to openapi.yaml by a test). */
export const SUBMIT_FIELDS: ReadonlyArray<keyof IJobSubmit> = [
  'notebook',
  'gpus',
  'priority',
  'tenant',
  'parameters',
  'max_runtime',
  'checkpoint_interval',
  'preemptible',
  'interactive',
  'max_retries',
  'gpu_type',
  'stall_timeout',
  'cpus',
  'memory',
  'notify',
  'after',
  'when'
];

export interface IJobList {
  jobs: IJob[];
  total: number;
  next_offset: number | null;
}

/** Columns `GET jobs?sort=` orders by (openapi.yaml's enum). */
export type JobSortKey =
  | 'created'
  | 'started'
  | 'finished'
  | 'notebook'
  | 'state'
  | 'tenant'
  | 'priority'
  | 'gpus'
  | 'owner';

export interface IJobFilter {
  state?: JobState;
  tenant?: string;
  mine?: boolean;
  limit?: number;
  offset?: number;
  sort?: JobSortKey;
  order?: 'asc' | 'desc';
  /** Free text: id, notebook, owner, tenant or reason contains it. */
  q?: string;
  /** true: only GPU kernels' reservations; false: only jobs without a kernel; absent: both. */
  interactive?: boolean;
}

export interface IJobEvent {
  time: string;
  from: JobState | null;
  to: JobState;
  reason: string;
  actor: string;
}

export interface IQueue {
  quota: number;
  burst: number | null;
  used: number;
  borrowed: number;
  queued: number;
  queued_gpus: number;
  running: number;
  /** GPUs its interactive kernels hold, the most they may hold, kernels waiting, kernels holding GPUs. */
  interactive?: number;
  interactive_cap?: number;
  interactive_queued?: number;
  interactive_running?: number;
  /** The tenant's budget this period (docs/budgets.md); null: it has none. */
  budget?: IBudgetBar | null;
}

/** `IQueue.budget`: what the tenant spent this period against its budget. */
export interface IBudgetBar {
  used: number;
  budget: number;
  unit: 'gpu_hours' | 'money';
  /** The period's label: `2026-12`, `week of 2026-11-30`, `2026-12-03`, `month from 2026-11-15`. */
  period: string;
  /** When the period ends (the budget resets), epoch seconds. */
  period_end: number;
  state: 'ok' | 'warning' | 'over';
  /** soft: over budget, jobs drop to the lowest class; hard: new jobs wait. */
  enforce: 'soft' | 'hard';
}

export interface IQueues {
  policy: string;
  queues: Record<string, IQueue>;
}

export interface IClusterNode {
  name: string;
  pool: string;
  gpus: number;
  free: number;
  fenced: number[];
  jobs: string[];
}

export interface IClusterPool {
  name: string;
  spot: boolean;
  price_per_gpu_hour: number;
  /** The pool's GPU model, where it has one; the form offers a choice when pools differ. */
  gpu_type?: string | null;
  /** Memory of one GPU (or MIG slice) in MiB, where the nodes' labels say it. */
  gpu_memory_mib?: number | null;
}

export interface ICluster {
  backend: string;
  policy: string;
  total_gpus: number;
  free_gpus: number;
  allocated_gpus: number;
  utilization: number;
  nodes: IClusterNode[];
  pools: IClusterPool[];
}

/** The body of every refused request. */
export interface IApiErrorBody {
  error: string;
  message: string;
  field: string | null;
}

/** A chunk of a job's log and the offset to ask for next. */
export interface ILogChunk {
  text: string;
  offset: number;
}

/** The extension's user settings (schema/plugin.json). */
export interface IGPUSchedSettings {
  defaultGpus: number;
  defaultPriority: Priority;
  /** Seconds between refreshes of the job list. */
  refreshInterval: number;
}

export const DEFAULT_SETTINGS: IGPUSchedSettings = {
  defaultGpus: 1,
  defaultPriority: 'normal',
  refreshInterval: 5
};

export const PLUGIN_ID = 'jupyter-gpusched:plugin';
export const PANEL_ID = 'gpusched-panel';

export namespace CommandIDs {
  export const openPanel = 'gpusched:open-panel';
  /** Fill the form with a notebook (args.path, or the current notebook) and show it. */
  export const submitNotebook = 'gpusched:submit-notebook';
  /** The same for the file selected in the file browser (context menu). */
  export const submitFile = 'gpusched:submit-file';
  export const refresh = 'gpusched:refresh';
  /** Post the pipeline file (JSON: steps and edges) selected in the file browser. */
  export const runPipelineFile = 'gpusched:run-pipeline-file';
  /** "Run a pipeline…": a dialog of notebooks in order, posted as a pipeline. */
  export const runPipeline = 'gpusched:run-pipeline';
  /** The main-area Jobs view (table of jobs; args.job opens that job's detail tab). */
  export const openJobsView = 'gpusched:open-jobs-view';
  export const openJobDetail = 'gpusched:open-job-detail';
}
