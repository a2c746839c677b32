/**
 * GPU kernels (docs/interactive.md): while one of the user's kernels waits for GPUs, a notification
 * says where it stands ("waiting for a GPU: #2 in line, about 6 min") with a Cancel action; it goes
 * away once the kernel has its GPUs. An idle kernel's warning ("this kernel's GPU will be given back in
 * 10 minutes unless you run something") shows with a Keep action. Kernel starts block until then, so the kernel's own id is not
 * known here yet: the user's queued interactive requests are the ones to show (each names its kernel).
 */
import { Notification } from '@jupyterlab/apputils';

import { GPUSchedAPI } from './api';
import { IJob, IJobDetail } from './tokens';

/** `GET gpusched/api/interactive/{kernel_id}`. */
export interface IKernelRequest {
  job: IJobDetail;
  message: string;
  position: number | null;
  eta_seconds: number | null;
}

export const KERNEL_PREFIX = 'kernel:';

/** Poll the user's waiting GPU-kernel requests and keep one notification per request. */
export class GPUKernelWatch {
  constructor(
    private api: GPUSchedAPI,
    private interval = 2000
  ) {}

  start(): void {
    if (this.timer === undefined) {
      this.timer = window.setInterval(() => void this.refresh(), this.interval);
      void this.refresh();
    }
  }

  dispose(): void {
    window.clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One look: notify new waiting requests and idle warnings, update changed ones, dismiss the rest. */
  async refresh(): Promise<void> {
    let notes: {
      jobId: string;
      kernel: string;
      message: string;
      idle: boolean;
    }[];
    try {
      const [queued, running] = await Promise.all([
        this.api.listJobs({ mine: true, state: 'QUEUED' }),
        this.api.listJobs({ mine: true, state: 'RUNNING' })
      ]);
      const kernels = (jobs: IJob[]) =>
        jobs.filter(j => j.interactive && j.notebook.startsWith(KERNEL_PREFIX));
      const waiting = await Promise.all(
        kernels(queued.jobs).map(j =>
          this.api.requestJSON<IKernelRequest>([
            'interactive',
            j.notebook.slice(KERNEL_PREFIX.length)
          ])
        )
      );
      notes = waiting.map(r => ({
        jobId: r.job.id,
        kernel: r.job.notebook.slice(KERNEL_PREFIX.length),
        message: r.message,
        idle: false
      }));
      for (const j of kernels(running.jobs)) {
        if (j.message) {
          // the idle warning: "this kernel's GPU will be given back in 10 minutes unless you run something"
          notes.push({
            jobId: j.id,
            kernel: j.notebook.slice(KERNEL_PREFIX.length),
            message: j.message,
            idle: true
          });
        }
      }
    } catch {
      return; // no scheduler here, or a blip: try again next time
    }
    const seen = new Set<string>();
    for (const note of notes) {
      const key = `${note.jobId}:${note.idle}`;
      seen.add(key);
      const shown = this.shown.get(key);
      if (shown === undefined) {
        const id = note.idle
          ? Notification.warning(note.message, {
              autoClose: false,
              actions: [
                {
                  label: 'Keep',
                  caption: "Keep this kernel's GPUs (restarts its idle clock)",
                  callback: () =>
                    void this.api
                      .request(['interactive', note.kernel, 'keep'], {
                        method: 'POST'
                      })
                      .catch(() => undefined)
                }
              ]
            })
          : Notification.emit(note.message, 'in-progress', {
              autoClose: false,
              actions: [
                {
                  label: 'Cancel',
                  caption: 'Stop waiting: the kernel does not start',
                  callback: () =>
                    void this.api.cancel(note.jobId).catch(() => undefined)
                }
              ]
            });
        this.shown.set(key, { id, message: note.message });
      } else if (shown.message !== note.message) {
        Notification.update({ id: shown.id, message: note.message });
        shown.message = note.message;
      }
    }
    for (const [key, shown] of this.shown) {
      if (!seen.has(key)) {
        Notification.dismiss(shown.id);
        this.shown.delete(key);
      }
    }
  }

  private shown = new Map<string, { id: string; message: string }>();
  private timer: number | undefined;
}
