/**
 * What the panel's buttons and the commands do: fill the form from a notebook, submit, and the
 * job list's cancel / log / output / resubmit. The plugin (index.ts) builds one `JobActions`.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { Dialog, MainAreaWidget, showDialog } from '@jupyterlab/apputils';
import { PathExt } from '@jupyterlab/coreutils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { GPUSchedAPI } from './api';
import { gpuIcon } from './components/icons';
import { IJobActions } from './components/JobList';
import { LogView } from './components/LogView';
import { notebookName, shortId } from './format';
import { buildSubmit, resubmitBody, SubmitFormModel } from './form';
import { JobsModel } from './model';
import {
  ICellLike,
  IParameterRow,
  parametersSource,
  parseParametersCell
} from './params';
import { IJob } from './tokens';

export interface IJobActionsOptions {
  app: JupyterFrontEnd;
  api: GPUSchedAPI;
  model: JobsModel;
  form: SubmitFormModel;
  tracker: INotebookTracker | null;
  docManager: IDocumentManager | null;
}

export class JobActions implements IJobActions {
  constructor(options: IJobActionsOptions) {
    this._app = options.app;
    this._api = options.api;
    this._model = options.model;
    this._form = options.form;
    this._tracker = options.tracker;
    this._docManager = options.docManager;
  }

  /** Executed notebooks this session opened: the form does not follow them. */
  readonly outputs = new Set<string>();

  /** Fill the form with a notebook and the rows of its `parameters` cell. */
  async fillForm(path: string): Promise<void> {
    let rows: IParameterRow[] = [];
    try {
      rows = await this._readParameters(path);
    } catch (err) {
      this._form.setNotebook(path, []);
      this._form.setErrors({
        notebook: `Could not read ${path}: ${err instanceof Error ? err.message : err}`
      });
      return;
    }
    this._form.setNotebook(path, rows);
  }

  /** Submit what the form holds (saving the notebook first if it is open and dirty). */
  async submit(): Promise<void> {
    const form = this._form;
    const { spec, errors } = buildSubmit(form.values);
    if (!spec) {
      form.setErrors(errors);
      return;
    }
    form.busy = true;
    try {
      let saved = false;
      const open = this._openNotebookWidget(spec.notebook);
      if (open?.context.model.dirty) {
        await open.context.save(); // the job runs the file on disk: run what the user sees
        saved = true;
      }
      const job = await this._api.submit(spec);
      this._model.add(job);
      const place =
        job.position !== null && job.position !== undefined
          ? `, #${job.position + 1} in line`
          : '';
      form.setNotice(
        `Submitted ${notebookName(job)} as job ${shortId(job.id)} (${job.state.toLowerCase()}${place}).` +
          (saved ? ' Unsaved changes were saved first.' : '')
      );
      void this._model.refresh();
    } catch (err) {
      form.setError(err);
    } finally {
      form.busy = false;
    }
  }

  async openLog(job: IJob): Promise<void> {
    const shell = this._app.shell;
    let widget = this._logs.get(job.id);
    if (!widget || widget.isDisposed) {
      const content = new LogView(this._api, job.id);
      widget = new MainAreaWidget({ content });
      widget.id = `gpusched-log-${job.id}`;
      widget.title.label = `Log: ${notebookName(job)} (${shortId(job.id)})`;
      widget.title.caption = `Log of GPU job ${job.id} (${job.notebook})`;
      widget.title.icon = gpuIcon;
      widget.title.closable = true;
      this._logs.set(job.id, widget);
      widget.disposed.connect(() => this._logs.delete(job.id));
      shell.add(widget, 'main', { mode: 'split-bottom' });
    }
    shell.activateById(widget.id);
  }

  /** Save the executed notebook next to the original as `<name>.<job id>.ipynb` and open it. */
  async openOutput(job: IJob): Promise<void> {
    const contents = this._app.serviceManager.contents;
    const dir = PathExt.dirname(job.notebook);
    const base = PathExt.basename(job.notebook, '.ipynb');
    let path = PathExt.join(dir, `${base}.${job.id}.ipynb`);
    const exists = await contents.get(path, { content: false }).then(
      () => true,
      () => false
    );
    if (!exists) {
      const nb = await this._api.output(job.id);
      try {
        await contents.save(path, {
          type: 'notebook',
          format: 'json',
          content: nb
        });
      } catch {
        // the original's folder is not writable: a new untitled notebook instead
        const untitled = await contents.newUntitled({
          type: 'notebook',
          path: ''
        });
        path = untitled.path;
        await contents.save(path, {
          type: 'notebook',
          format: 'json',
          content: nb
        });
      }
    }
    this.outputs.add(path);
    await this._openFile(path);
  }

  async cancel(job: IJob): Promise<void> {
    if (job.state === 'RUNNING' || job.state === 'ADMITTED') {
      const answer = await showDialog({
        title: 'Cancel running job?',
        body: `${notebookName(job)} (${shortId(job.id)}) is running; its work since the last checkpoint is lost.`,
        buttons: [
          Dialog.cancelButton({ label: 'Keep running' }),
          Dialog.warnButton({ label: 'Cancel job' })
        ]
      });
      if (!answer.button.accept) {
        return;
      }
    }
    await this._api.cancel(job.id);
    await this._model.refresh();
  }

  async resubmit(job: IJob): Promise<void> {
    const detail = await this._api.getJob(job.id);
    const again = await this._api.submit(resubmitBody(detail));
    this._model.add(again);
    void this._model.refresh();
  }

  private _openNotebookWidget(path: string): NotebookPanel | undefined {
    return this._tracker?.find(w => w.context.path === path) ?? undefined;
  }

  /** Rows of the notebook's `parameters` cell: from the open notebook, else from disk. */
  private async _readParameters(path: string): Promise<IParameterRow[]> {
    let cells: ICellLike[] = [];
    const open = this._openNotebookWidget(path);
    if (open?.context.model) {
      cells =
        (open.context.model.toJSON() as { cells?: ICellLike[] }).cells ?? [];
    } else {
      const file = await this._app.serviceManager.contents.get(path, {
        type: 'notebook',
        content: true
      });
      cells = (file.content?.cells as ICellLike[]) ?? [];
    }
    const source = parametersSource(cells);
    return source === null ? [] : parseParametersCell(source);
  }

  private async _openFile(path: string): Promise<void> {
    if (this._docManager) {
      this._docManager.openOrReveal(path);
    } else {
      await this._app.commands.execute('docmanager:open', { path });
    }
  }

  private readonly _app: JupyterFrontEnd;
  private readonly _api: GPUSchedAPI;
  private readonly _model: JobsModel;
  private readonly _form: SubmitFormModel;
  private readonly _tracker: INotebookTracker | null;
  private readonly _docManager: IDocumentManager | null;
  private readonly _logs = new Map<string, MainAreaWidget<LogView>>();
}
