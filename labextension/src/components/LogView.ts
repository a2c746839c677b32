import { Poll } from '@lumino/polling';
import { Widget } from '@lumino/widgets';

import { GPUSchedAPI } from '../api';
import { JobState, TERMINAL_STATES } from '../tokens';

/**
 * A job's log, followed while the job runs: asks `log?offset=N` for what was written since
 * the last read, appends it, and stops once the job has ended and nothing more comes.
 */
export class LogView extends Widget {
  constructor(api: GPUSchedAPI, jobId: string, interval = 1) {
    super();
    this._api = api;
    this._jobId = jobId;
    this.addClass('jp-GPUSched-log');
    this._status = document.createElement('div');
    this._status.className = 'jp-GPUSched-logStatus';
    this._status.setAttribute('role', 'status');
    this._pre = document.createElement('pre');
    this._pre.className = 'jp-GPUSched-logText';
    this._pre.tabIndex = 0;
    this._pre.setAttribute('aria-label', `Log of job ${jobId}`);
    this.node.append(this._status, this._pre);
    this._poll = new Poll({
      auto: true,
      factory: () => this._tick(),
      frequency: { interval: interval * 1000, backoff: true, max: 30_000 },
      name: `jupyter-gpusched:log:${jobId}`,
      standby: 'when-hidden'
    });
  }

  get jobId(): string {
    return this._jobId;
  }

  /** The text shown so far. */
  get text(): string {
    return this._pre.textContent ?? '';
  }

  /** Resolves once the job has ended and its whole log is shown. */
  get done(): boolean {
    return this._done;
  }

  dispose(): void {
    this._poll.dispose();
    super.dispose();
  }

  private async _tick(): Promise<void> {
    if (this._done || this.isDisposed) {
      return;
    }
    try {
      const chunk = await this._api.log(this._jobId, this._offset);
      if (chunk.text) {
        const atBottom =
          this._pre.scrollHeight -
            this._pre.scrollTop -
            this._pre.clientHeight <
          8;
        this._pre.append(document.createTextNode(chunk.text));
        if (atBottom) {
          this._pre.scrollTop = this._pre.scrollHeight;
        }
      }
      this._offset = chunk.offset;
      if (!chunk.text) {
        // nothing new: has the job ended? (one cheap request only when the log is quiet)
        const job = await this._api.getJob(this._jobId);
        this._setState(job.state);
        if (TERMINAL_STATES.has(job.state)) {
          const last = await this._api.log(this._jobId, this._offset);
          if (last.text) {
            this._pre.append(document.createTextNode(last.text));
          }
          this._done = true;
          this._setState(job.state, true);
          void this._poll.stop();
        }
      }
    } catch (err) {
      this._status.textContent =
        err instanceof Error ? err.message : String(err);
      throw err; // the poll backs off
    }
  }

  private _setState(state: JobState, ended = false): void {
    this._status.dataset.state = state;
    this._status.textContent = ended
      ? `Job ${state.toLowerCase()}; log complete.`
      : `Job ${state.toLowerCase()}; following the log…`;
  }

  private _api: GPUSchedAPI;
  private _jobId: string;
  private _offset = 0;
  private _done = false;
  private _poll: Poll;
  private _pre: HTMLPreElement;
  private _status: HTMLDivElement;
}
