/**
 * What the panel's buttons and the commands do: fill the form from a notebook, submit, and the
 * job list's cancel / log / output / resubmit. The plugin (index.ts) builds one `JobActions`.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { Dialog, MainAreaWidget, showDialog } from '@jupyterlab/apputils';
import { IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import { INotebookContent } from '@jupyterlab/nbformat';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import {
  IRenderMimeRegistry,
  RenderMimeRegistry,
  standardRendererFactories
} from '@jupyterlab/rendermime';
import { downloadIcon } from '@jupyterlab/ui-components';

import { GPUSchedAPI } from './api';
import { gpuIcon } from './components/icons';
import { IJobActions } from './components/JobList';
import { LogView } from './components/LogView';
import { downloadText, NotebookView } from './components/NotebookView';
import { notebookName, outputFileName, shortId } from './format';
import { buildSubmit, resubmitBody, SubmitFormModel } from './form';
import { JobsModel } from './model';
import { openPipelineView } from './pipelines';
import { actionButton } from './toolbar';
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
  /** Lab's renderers (the output viewer's); a standard set without it. */
  rendermime: IRenderMimeRegistry | null;
  /** Highlights code in the output viewer. */
  languages: IEditorLanguageRegistry | null;
}

export class JobActions implements IJobActions {
  constructor(options: IJobActionsOptions) {
    this._app = options.app;
    this._api = options.api;
    this._model = options.model;
    this._form = options.form;
    this._tracker = options.tracker;
    this._rendermime =
      options.rendermime ??
      new RenderMimeRegistry({ initialFactories: standardRendererFactories });
    this._languages = options.languages;
  }

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

  /** Show the steps of the pipeline the job belongs to (pipelines.ts). */
  async openPipeline(job: IJob): Promise<void> {
    if (job.pipeline_id) {
      openPipelineView(this._app, this._api, job.pipeline_id);
    }
  }

  /**
   * Show the executed notebook read-only in a main-area tab, with a Download button
   * (`<name>.<job id>.ipynb`). Nothing is written into the user's folder, no kernel starts.
   */
  async openOutput(job: IJob): Promise<void> {
    const shell = this._app.shell;
    const open = this._outputs.get(job.id);
    if (open && !open.isDisposed) {
      shell.activateById(open.id);
      return;
    }
    const { text, notebook } = await this._api.output(job.id); // rejects: shown on the job
    const fileName = outputFileName(job);
    const content = new NotebookView({
      notebook: notebook as unknown as INotebookContent,
      rendermime: this._rendermime,
      languages: this._languages,
      label: `Executed notebook ${fileName} (read-only)`
    });
    const widget = new MainAreaWidget({ content, reveal: content.ready });
    widget.id = `gpusched-output-${job.id}`;
    widget.addClass('jp-GPUSched-output');
    widget.title.label = fileName;
    widget.title.caption = `Executed notebook of GPU job ${job.id} (${job.notebook}), read-only`;
    widget.title.icon = gpuIcon;
    widget.title.closable = true;
    widget.toolbar.addItem(
      'download',
      actionButton({
        icon: downloadIcon,
        label: 'Download',
        tooltip: `Download ${fileName}`,
        onClick: () => downloadText(fileName, text)
      })
    );
    this._outputs.set(job.id, widget);
    widget.disposed.connect(() => this._outputs.delete(job.id));
    shell.add(widget, 'main');
    shell.activateById(widget.id);
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

  private readonly _app: JupyterFrontEnd;
  private readonly _api: GPUSchedAPI;
  private readonly _model: JobsModel;
  private readonly _form: SubmitFormModel;
  private readonly _tracker: INotebookTracker | null;
  private readonly _rendermime: IRenderMimeRegistry;
  private readonly _languages: IEditorLanguageRegistry | null;
  private readonly _logs = new Map<string, MainAreaWidget<LogView>>();
  private readonly _outputs = new Map<string, MainAreaWidget<NotebookView>>();
}
