import { Widget } from '@lumino/widgets';

import { statusText } from '../format';
import { JobsModel } from '../model';

/** Status bar text: my running / starting / queued jobs and the free GPUs; click or Enter opens the Jobs view. */
export class GPUSchedStatus extends Widget {
  constructor(model: JobsModel, onOpen: () => void) {
    super();
    this._model = model;
    this.addClass('jp-GPUSched-status');
    this.node.setAttribute('role', 'button');
    this.node.tabIndex = 0;
    this.node.addEventListener('click', onOpen);
    this.node.addEventListener('keydown', (e: KeyboardEvent) => {
      if (e.key === 'Enter' || e.key === ' ') {
        e.preventDefault();
        onOpen();
      }
    });
    model.changed.connect(this._update, this);
    this._update();
  }

  dispose(): void {
    this._model.changed.disconnect(this._update, this);
    super.dispose();
  }

  private _update(): void {
    const m = this._model;
    const text = statusText(m.loaded ? m.mine : null, m.cluster);
    this.node.textContent = text;
    const more = m.error ? ` (last refresh failed: ${m.error})` : '';
    this.node.title = `${text}${more}. Click to open the Jobs view.`;
    this.node.setAttribute('aria-label', `${text}. Open the GPU Jobs view.`);
  }

  private _model: JobsModel;
}
