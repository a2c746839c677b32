/**
 * The job list model: what the panel and the status bar show, refreshed by a modest poll
 * (interval from the settings) that backs off on errors and stands by while the page is hidden.
 */
import { IDisposable } from '@lumino/disposable';
import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import { GPUSchedAPI } from './api';
import { IMyCounts } from './format';
import { ICluster, IJob, IJobDetail, IMe, IQueues, JobState } from './tokens';

/** Tenants change rarely: refetch `queues` at most once a minute. */
const QUEUES_MAX_AGE_MS = 60_000;

/** Seconds; the settings ask for at least 1, tests go faster. */
const MIN_INTERVAL = 0.05;

/** One job moving from one state to another between two refreshes. */
export interface IJobTransition {
  job: IJob;
  /** null: first time this model sees the job. */
  from: JobState | null;
  to: JobState;
}

export interface IJobsModelOptions {
  api: GPUSchedAPI;
  /** Seconds between refreshes (default 5). */
  refreshInterval?: number;
  /** Jobs per list request (newest first; default 50). */
  pageSize?: number;
  /** Queued jobs whose position and estimated start are fetched per refresh (default 10). */
  detailLimit?: number;
}

export class JobsModel implements IDisposable {
  constructor(options: IJobsModelOptions) {
    this.api = options.api;
    this._interval = Math.max(MIN_INTERVAL, options.refreshInterval ?? 5);
    this._pageSize = options.pageSize ?? 50;
    this._detailLimit = options.detailLimit ?? 10;
    this._poll = this._makePoll();
  }

  readonly api: GPUSchedAPI;

  /** Emitted after every refresh (successful or not). */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Emitted with the jobs whose state changed since the last refresh. */
  get transitions(): ISignal<this, IJobTransition[]> {
    return this._transitions;
  }

  /** The newest jobs the caller may see (all jobs for admins), newest first. */
  get jobs(): ReadonlyArray<IJob> {
    return this._jobs;
  }

  /** How many jobs match in all (the list holds at most `pageSize`). */
  get total(): number {
    return this._total;
  }

  get cluster(): ICluster | null {
    return this._cluster;
  }

  get queues(): IQueues | null {
    return this._queues;
  }

  /** Who the server takes us for (null until known, or from a server without `GET me`). */
  get me(): IMe | null {
    return this._me;
  }

  /** Position and estimated start of queued jobs, by id. */
  detail(id: string): IJobDetail | undefined {
    return this._details.get(id);
  }

  /** The caller's own jobs running, starting (ADMITTED) and waiting for GPUs. */
  get mine(): IMyCounts {
    return { ...this._mine };
  }

  /** The last refresh's error message, or null when it went through. */
  get error(): string | null {
    return this._error;
  }

  /** True once a refresh has completed. */
  get loaded(): boolean {
    return this._loaded;
  }

  get isPolling(): boolean {
    return this._polling;
  }

  /** Seconds between refreshes. */
  get refreshInterval(): number {
    return this._interval;
  }
  set refreshInterval(seconds: number) {
    seconds = Math.max(MIN_INTERVAL, seconds);
    if (seconds === this._interval) {
      return;
    }
    this._interval = seconds;
    const wasPolling = this._polling;
    this._poll.dispose();
    this._poll = this._makePoll();
    if (wasPolling) {
      void this._poll.start();
    }
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /** Start the periodic refresh (the first one runs at once). */
  start(): void {
    if (this._polling || this._isDisposed) {
      return;
    }
    this._polling = true;
    void this._poll.start();
  }

  /** Stop the periodic refresh. */
  stop(): void {
    if (!this._polling) {
      return;
    }
    this._polling = false;
    void this._poll.stop();
  }

  /** Refresh now (e.g. after a submit), whether or not polling is on. */
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

  /** Tell the model about a job it should show before the next refresh (after a submit). */
  add(job: IJobDetail): void {
    if (!this._jobs.some(j => j.id === job.id)) {
      this._jobs = [job, ...this._jobs];
      this._total += 1;
    }
    this._details.set(job.id, job);
    this._states.set(job.id, job.state);
    this._changed.emit();
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._polling = false;
    this._poll.dispose();
    Signal.clearData(this);
  }

  private _makePoll(): Poll {
    const ms = this._interval * 1000;
    return new Poll({
      auto: false,
      factory: () => this._fetch(),
      frequency: {
        interval: ms,
        backoff: true,
        max: Math.max(ms * 12, 60_000)
      },
      name: 'jupyter-gpusched:jobs',
      standby: 'when-hidden'
    });
  }

  /** One refresh: the job list, the cluster, the queues, and my counts. Rejects on error (the poll backs off). */
  private async _fetch(): Promise<void> {
    if (this._isDisposed) {
      return;
    }
    try {
      const queuesDue = Date.now() - this._queuesAt > QUEUES_MAX_AGE_MS;
      const [
        list,
        cluster,
        queues,
        me,
        running,
        starting,
        queued,
        kernels,
        kernelsQueued
      ] = await Promise.all([
        this.api.listJobs({ limit: this._pageSize }),
        this.api.cluster(),
        queuesDue ? this.api.queues() : Promise.resolve(this._queues),
        // rarely changes: with the queues; an older server without it is not an error
        queuesDue ? this.api.me().catch(() => null) : Promise.resolve(this._me),
        this._countMine('RUNNING'),
        this._countMine('ADMITTED'),
        this._countMine('QUEUED'),
        // a kernel's reservation goes from QUEUED straight to RUNNING
        this._countMine('RUNNING', true),
        this._countMine('QUEUED', true)
      ]);
      if (queuesDue) {
        this._queuesAt = Date.now();
      }
      const details = new Map<string, IJobDetail>();
      const waiting = list.jobs
        .filter(j => j.state === 'QUEUED')
        .slice(0, this._detailLimit);
      const fetched = await Promise.all(
        waiting.map(j => this.api.getJob(j.id).catch(() => undefined))
      );
      for (const d of fetched) {
        if (d) {
          details.set(d.id, d);
        }
      }
      if (this._isDisposed) {
        return;
      }
      const moves: IJobTransition[] = [];
      const states = new Map<string, JobState>();
      for (const job of list.jobs) {
        const before = this._states.get(job.id) ?? null;
        states.set(job.id, job.state);
        if (before !== job.state && (before !== null || this._loaded)) {
          moves.push({ job, from: before, to: job.state });
        }
      }
      this._jobs = list.jobs;
      this._total = list.total;
      this._cluster = cluster;
      this._queues = queues;
      this._me = me;
      this._details = details;
      this._states = states;
      // Mine waiting for dependencies, from the loaded page (they hold no place in any queue).
      const waitingDeps = list.jobs.filter(
        j => j.state === 'WAITING' && (!me || j.owner === me.name)
      ).length;
      this._mine = {
        running,
        starting,
        queued,
        ...(waitingDeps ? { waiting: waitingDeps } : {}),
        ...(kernels ? { kernels } : {}),
        ...(kernelsQueued ? { kernelsQueued } : {})
      };
      this._error = null;
      this._loaded = true;
      if (moves.length) {
        this._transitions.emit(moves);
      }
      this._changed.emit();
    } catch (err) {
      if (this._isDisposed) {
        return;
      }
      this._error = err instanceof Error ? err.message : String(err);
      this._changed.emit();
      throw err;
    }
  }

  /**
   * How many of the caller's jobs are in `state` (one request, one job long: the total is what counts).
   * ADMITTED lasts while the job's kernel starts (seconds), so it is counted as "starting";
   * PREEMPTED and LOST last about one scheduling pass. Jobs and GPU kernels' reservations
   * (`interactive`) are counted apart.
   */
  private async _countMine(
    state: JobState,
    interactive = false
  ): Promise<number> {
    const page = await this.api.listJobs({
      state,
      mine: true,
      interactive,
      limit: 1
    });
    return page.total;
  }

  private _poll: Poll;
  private _interval: number;
  private _pageSize: number;
  private _detailLimit: number;
  private _polling = false;
  private _isDisposed = false;
  private _loaded = false;
  private _jobs: IJob[] = [];
  private _total = 0;
  private _cluster: ICluster | null = null;
  private _queues: IQueues | null = null;
  private _me: IMe | null = null;
  private _details = new Map<string, IJobDetail>();
  private _states = new Map<string, JobState>();
  private _mine: IMyCounts = { running: 0, starting: 0, queued: 0 };
  private _error: string | null = null;
  private _queuesAt = 0;
  private _changed = new Signal<this, void>(this);
  private _transitions = new Signal<this, IJobTransition[]>(this);
}
