import { Poll } from '@lumino/polling';
import { Widget } from '@lumino/widgets';

import { GPUSchedAPI } from '../api';
import { notebookName, shortId } from '../format';
import { IPipeline, TERMINAL_STATES } from '../tokens';

/** The steps of a pipeline, each with its state and what it waits for; refreshed until every step ended. */
export class PipelineView extends Widget {
  constructor(api: GPUSchedAPI, pipelineId: string, interval = 2) {
    super();
    this._api = api;
    this._id = pipelineId;
    this.addClass('jp-GPUSched-pipeline');
    this._poll = new Poll({
      auto: true,
      factory: () => this._tick(),
      frequency: { interval: interval * 1000, backoff: true, max: 30_000 },
      name: `jupyter-gpusched:pipeline:${pipelineId}`,
      standby: 'when-hidden'
    });
  }

  get pipeline(): IPipeline | null {
    return this._pipeline;
  }

  dispose(): void {
    this._poll.dispose();
    super.dispose();
  }

  private async _tick(): Promise<void> {
    if (this.isDisposed) {
      return;
    }
    try {
      this._pipeline = await this._api.getPipeline(this._id);
      this._render(this._pipeline);
    } catch (err) {
      this._renderError(err instanceof Error ? err.message : String(err));
    }
    if (this._pipeline?.steps.every(s => TERMINAL_STATES.has(s.state))) {
      void this._poll.stop();
    }
  }

  private _render(p: IPipeline): void {
    const head = document.createElement('h3');
    head.textContent = `Pipeline ${shortId(p.id)}: `;
    const overall = document.createElement('span');
    overall.className = `jp-GPUSched-state jp-GPUSched-state-${p.state}`;
    overall.textContent = p.state;
    head.append(overall);
    const list = document.createElement('ol');
    list.className = 'jp-GPUSched-pipelineSteps';
    list.start = 0;
    p.steps.forEach((step, i) => {
      const item = document.createElement('li');
      item.className = 'jp-GPUSched-pipelineStep';
      item.dataset.state = step.state;
      const name = document.createElement('span');
      name.className = 'jp-GPUSched-jobName';
      name.textContent = `${notebookName(step)} (${shortId(step.id)})`;
      const state = document.createElement('span');
      state.className = `jp-GPUSched-state jp-GPUSched-state-${step.state}`;
      state.textContent = step.state;
      const parents = p.edges
        .filter(([, to]) => to === i)
        .map(([from]) => from);
      const after = document.createElement('span');
      after.className = 'jp-GPUSched-hint';
      after.textContent = parents.length
        ? ` after step ${parents.join(', ')}${step.when === 'ended' ? ' (ended)' : ''}`
        : '';
      item.append(name, ' ', state, after);
      if (step.reason && TERMINAL_STATES.has(step.state)) {
        const reason = document.createElement('div');
        reason.className = 'jp-GPUSched-jobMessage';
        reason.textContent = step.reason;
        item.append(reason);
      }
      list.append(item);
    });
    this.node.replaceChildren(head, list);
  }

  private _renderError(message: string): void {
    const error = document.createElement('div');
    error.className = 'jp-GPUSched-formError';
    error.setAttribute('role', 'alert');
    error.textContent = `Could not load the pipeline: ${message}`;
    this.node.replaceChildren(error);
  }

  private _api: GPUSchedAPI;
  private _id: string;
  private _pipeline: IPipeline | null = null;
  private _poll: Poll;
}
