/** Small display helpers: durations, times, job names, the status bar's words. */
import { IJob, IRuntimeEstimate, TERMINAL_STATES } from './tokens';

/** `1h 02m`, `3m 05s`, `42s`. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const r = s % 60;
  if (h > 0) {
    return `${h}h ${String(m).padStart(2, '0')}m`;
  }
  if (m > 0) {
    return `${m}m ${String(r).padStart(2, '0')}s`;
  }
  return `${r}s`;
}

const BASIS_WORDS: Record<string, string> = {
  'owner+notebook+gpus': 'this notebook',
  'owner+notebook': 'this notebook on other GPU counts',
  'tenant+gpus': "this tenant's jobs of as many GPUs",
  tenant: "this tenant's jobs"
};

/**
 * A learned runtime estimate in words: `expected run ~12 min (learned)`, with where it was learned
 * from as the detail (`from 5 runs of this notebook`); null when the estimate is not learned.
 */
export function expectedRun(
  estimate: IRuntimeEstimate | null | undefined
): { text: string; detail: string } | null {
  if (
    !estimate ||
    estimate.source !== 'learned' ||
    estimate.seconds === null ||
    estimate.seconds === undefined
  ) {
    return null;
  }
  const s = estimate.seconds;
  const span =
    s >= 5400
      ? `~${(s / 3600).toFixed(1)} h`
      : `~${Math.max(1, Math.round(s / 60))} min`;
  const runs = estimate.samples ? `${estimate.samples} runs` : 'earlier runs';
  const what = BASIS_WORDS[estimate.basis ?? ''] ?? 'jobs like it';
  return {
    text: `expected run ${span} (learned)`,
    detail: `from ${runs} of ${what}`
  };
}

/** Seconds the job has run (to its end, or to `now` while it runs); null before it started. */
export function elapsedSeconds(
  job: IJob,
  now: number = Date.now()
): number | null {
  if (!job.started) {
    return null;
  }
  const start = Date.parse(job.started);
  const end = job.finished ? Date.parse(job.finished) : now;
  return Number.isFinite(start) && Number.isFinite(end)
    ? (end - start) / 1000
    : null;
}

/** `in 3m 05s (14:05)` / `now` for an ISO time, relative to `now`. */
export function formatStart(
  iso: string | null,
  now: number = Date.now()
): string {
  if (!iso) {
    return 'unknown';
  }
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) {
    return 'unknown';
  }
  const clock = new Date(t).toLocaleTimeString([], {
    hour: '2-digit',
    minute: '2-digit'
  });
  const wait = (t - now) / 1000;
  return wait <= 1 ? `now (${clock})` : `in ${formatDuration(wait)} (${clock})`;
}

/** The notebook's file name without folders. */
export function notebookName(job: Pick<IJob, 'notebook'>): string {
  const parts = job.notebook.split('/');
  return parts[parts.length - 1] || job.notebook;
}

/** A mark next to a job's state: `stalled` (running, nothing moving) or `data` (its GPUs wait on data). */
export interface IBadge {
  kind: 'stalled' | 'data';
  label: string;
  title: string;
}

/** The badges a job shows next to its state, with what each means as a tooltip. */
export function jobBadges(
  job: Pick<IJob, 'state' | 'stalled_since' | 'waiting_on_data'>,
  now: number = Date.now()
): IBadge[] {
  const badges: IBadge[] = [];
  if (job.state !== 'RUNNING') {
    return badges;
  }
  if (job.stalled_since) {
    const since = (now - Date.parse(job.stalled_since)) / 1000;
    const ago = Number.isFinite(since) ? formatDuration(since) : 'a while';
    badges.push({
      kind: 'stalled',
      label: 'stalled',
      title: `No progress (no cell, output, CPU, I/O or GPU work) for its stall timeout; marked ${ago} ago`
    });
  }
  const wait = job.waiting_on_data;
  if (wait) {
    badges.push({
      kind: 'data',
      label: 'waiting on data',
      title: `GPU ${wait.gpu_util}% busy, CPU ${wait.cpu_cores} cores, I/O ${wait.io_mib_s} MiB/s: ${wait.hint}`
    });
  }
  return badges;
}

/** A short, readable form of a job id. */
export function shortId(id: string): string {
  return id.length > 8 ? id.slice(0, 8) : id;
}

/**
 * The file name of a job's executed notebook: `<notebook name>.<job id>.ipynb`
 * (`train.ipynb`, job `3f2a…` → `train.3f2a….ipynb`), the same rule as the CLI's `output`.
 */
export function outputFileName(job: Pick<IJob, 'id' | 'notebook'>): string {
  const name = notebookName(job).replace(/\.ipynb$/i, '');
  return `${name}.${job.id}.ipynb`;
}

/**
 * Whether a job has an executed notebook to show: one that succeeded or failed (the failing
 * cell's error is in it), and any other that ended after running some cells (the runner
 * saves the partial notebook when it is stopped).
 */
export function hasOutput(job: Pick<IJob, 'state' | 'progress'>): boolean {
  if (job.state === 'SUCCEEDED' || job.state === 'FAILED') {
    return true;
  }
  return (
    TERMINAL_STATES.has(job.state) && !!job.progress && job.progress[0] > 0
  );
}

/** The caller's own jobs by what they are doing (the status bar's counts). */
export interface IMyCounts {
  /** Waiting for GPUs. */
  queued: number;
  /** Given GPUs, their kernel starting (ADMITTED). */
  starting: number;
  /** Running. */
  running: number;
  /** WAITING for their dependencies (pipelines); not yet in the queue. */
  waiting?: number;
  /** GPU kernels holding GPUs (their reservations are not counted as jobs above). */
  kernels?: number;
  /** GPU kernels waiting for GPUs. */
  kernelsQueued?: number;
}

/**
 * The status bar's text: `GPU jobs: 1 running, 1 starting, 2 queued · 1 GPU kernel · 3/4 GPUs free`
 * ("starting" only while some job is ADMITTED, kernels only while some are held or wait, so the usual
 * text stays short).
 */
export function statusText(
  mine: IMyCounts | null,
  cluster: { free_gpus: number; total_gpus: number } | null
): string {
  if (!mine) {
    return 'GPU jobs: …';
  }
  const counts = [`${mine.running} running`];
  if (mine.starting > 0) {
    counts.push(`${mine.starting} starting`);
  }
  counts.push(`${mine.queued} queued`);
  if (mine.waiting) {
    counts.push(`${mine.waiting} waiting`);
  }
  const kernels = kernelText(mine.kernels ?? 0, mine.kernelsQueued ?? 0);
  const gpus = cluster
    ? ` · ${cluster.free_gpus}/${cluster.total_gpus} GPUs free`
    : '';
  return `GPU jobs: ${counts.join(', ')}${kernels}${gpus}`;
}

/** ` · 1 GPU kernel`, ` · 2 GPU kernels, 1 waiting`, ` · 1 GPU kernel waiting`; empty with none. */
function kernelText(held: number, queued: number): string {
  if (held === 0 && queued === 0) {
    return '';
  }
  const noun = (n: number) => `GPU kernel${n === 1 ? '' : 's'}`;
  if (held === 0) {
    return ` · ${queued} ${noun(queued)} waiting`;
  }
  return ` · ${held} ${noun(held)}${queued ? `, ${queued} waiting` : ''}`;
}
