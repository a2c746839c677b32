/**
 * jupyter-gpusched's JupyterLab plugin: the GPU Jobs sidebar panel, the "Submit as GPU job…"
 * commands (file browser context menu, notebook toolbar), the status bar item, log and output views.
 */
import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { Dialog, ICommandPalette, MainAreaWidget, Notification, showDialog } from '@jupyterlab/apputils';
import { PathExt } from '@jupyterlab/coreutils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { DocumentRegistry } from '@jupyterlab/docregistry';
import { IFileBrowserFactory } from '@jupyterlab/filebrowser';
import { INotebookModel, INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { ToolbarButton } from '@jupyterlab/ui-components';
import { DisposableDelegate, IDisposable } from '@lumino/disposable';

import { GPUSchedAPI } from './api';
import { gpuIcon } from './components/icons';
import { IJobActions } from './components/JobList';
import { LogView } from './components/LogView';
import { GPUSchedPanel } from './components/Panel';
import { GPUSchedStatus } from './components/StatusItem';
import { notebookName, shortId } from './format';
import { buildSubmit, SubmitFormModel } from './form';
import { JobsModel } from './model';
import { ICellLike, IParameterRow, parametersSource, parseParametersCell } from './params';
import { CommandIDs, DEFAULT_SETTINGS, IGPUSchedSettings, IJob, IJobSubmit, PLUGIN_ID } from './tokens';

export * from './tokens';
export { GPUSchedAPI, GPUSchedError } from './api';
export { JobsModel } from './model';

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Submit notebooks as GPU jobs, follow the queue, logs and executed notebooks.',
  autoStart: true,
  optional: [
    ISettingRegistry,
    ILayoutRestorer,
    INotebookTracker,
    IFileBrowserFactory,
    IStatusBar,
    IDocumentManager,
    ICommandPalette
  ],
  activate: (
    app: JupyterFrontEnd,
    settingRegistry: ISettingRegistry | null,
    restorer: ILayoutRestorer | null,
    tracker: INotebookTracker | null,
    browserFactory: IFileBrowserFactory | null,
    statusBar: IStatusBar | null,
    docManager: IDocumentManager | null,
    palette: ICommandPalette | null
  ) => {
    const { commands, shell } = app;
    const contents = app.serviceManager.contents;
    const api = new GPUSchedAPI(app.serviceManager.serverSettings);
    let settings: IGPUSchedSettings = { ...DEFAULT_SETTINGS };
    const model = new JobsModel({ api, refreshInterval: settings.refreshInterval });
    const form = new SubmitFormModel({ gpus: settings.defaultGpus, priority: settings.defaultPriority });
    /** Executed notebooks this session opened: the form does not follow them. */
    const outputs = new Set<string>();
    const logs = new Map<string, MainAreaWidget<LogView>>();

    const openNotebookWidget = (path: string): NotebookPanel | undefined =>
      tracker?.find(w => w.context.path === path) ?? undefined;

    /** Rows of the notebook's `parameters` cell: from the open notebook, else from disk. */
    const readParameters = async (path: string): Promise<IParameterRow[]> => {
      let cells: ICellLike[] = [];
      const open = openNotebookWidget(path);
      if (open?.context.model) {
        cells = (open.context.model.toJSON() as { cells?: ICellLike[] }).cells ?? [];
      } else {
        const file = await contents.get(path, { type: 'notebook', content: true });
        cells = (file.content?.cells as ICellLike[]) ?? [];
      }
      const source = parametersSource(cells);
      return source === null ? [] : parseParametersCell(source);
    };

    const fillForm = async (path: string): Promise<void> => {
      let rows: IParameterRow[] = [];
      try {
        rows = await readParameters(path);
      } catch (err) {
        form.setNotebook(path, []);
        form.setErrors({ notebook: `Could not read ${path}: ${err instanceof Error ? err.message : err}` });
        return;
      }
      form.setNotebook(path, rows);
    };

    const submit = async (): Promise<void> => {
      const { spec, errors } = buildSubmit(form.values);
      if (!spec) {
        form.setErrors(errors);
        return;
      }
      form.busy = true;
      try {
        let saved = false;
        const open = openNotebookWidget(spec.notebook);
        if (open?.context.model.dirty) {
          await open.context.save(); // the job runs the file on disk: run what the user sees
          saved = true;
        }
        const job = await api.submit(spec);
        model.add(job);
        const place = job.position !== null && job.position !== undefined ? `, #${job.position + 1} in line` : '';
        form.setNotice(
          `Submitted ${notebookName(job)} as job ${shortId(job.id)} (${job.state.toLowerCase()}${place}).` +
            (saved ? ' Unsaved changes were saved first.' : '')
        );
        void model.refresh();
      } catch (err) {
        form.setError(err);
      } finally {
        form.busy = false;
      }
    };

    const openLog = async (job: IJob): Promise<void> => {
      let widget = logs.get(job.id);
      if (!widget || widget.isDisposed) {
        const content = new LogView(api, job.id);
        widget = new MainAreaWidget({ content });
        widget.id = `gpusched-log-${job.id}`;
        widget.title.label = `Log: ${notebookName(job)} (${shortId(job.id)})`;
        widget.title.caption = `Log of GPU job ${job.id} (${job.notebook})`;
        widget.title.icon = gpuIcon;
        widget.title.closable = true;
        logs.set(job.id, widget);
        widget.disposed.connect(() => logs.delete(job.id));
        shell.add(widget, 'main', { mode: 'split-bottom' });
      }
      shell.activateById(widget.id);
    };

    const openFile = async (path: string): Promise<void> => {
      if (docManager) {
        docManager.openOrReveal(path);
      } else {
        await commands.execute('docmanager:open', { path });
      }
    };

    /** Save the executed notebook next to the original as `<name>.<job id>.ipynb` and open it. */
    const openOutput = async (job: IJob): Promise<void> => {
      const dir = PathExt.dirname(job.notebook);
      const base = PathExt.basename(job.notebook, '.ipynb');
      let path = PathExt.join(dir, `${base}.${job.id}.ipynb`);
      const exists = await contents.get(path, { content: false }).then(
        () => true,
        () => false
      );
      if (!exists) {
        const nb = await api.output(job.id);
        try {
          await contents.save(path, { type: 'notebook', format: 'json', content: nb });
        } catch {
          // the original's folder is not writable: a new untitled notebook instead
          const untitled = await contents.newUntitled({ type: 'notebook', path: '' });
          path = untitled.path;
          await contents.save(path, { type: 'notebook', format: 'json', content: nb });
        }
      }
      outputs.add(path);
      await openFile(path);
    };

    const cancel = async (job: IJob): Promise<void> => {
      if (job.state === 'RUNNING' || job.state === 'ADMITTED') {
        const answer = await showDialog({
          title: 'Cancel running job?',
          body: `${notebookName(job)} (${shortId(job.id)}) is running; its work since the last checkpoint is lost.`,
          buttons: [Dialog.cancelButton({ label: 'Keep running' }), Dialog.warnButton({ label: 'Cancel job' })]
        });
        if (!answer.button.accept) {
          return;
        }
      }
      await api.cancel(job.id);
      await model.refresh();
    };

    const resubmit = async (job: IJob): Promise<void> => {
      const d = await api.getJob(job.id);
      const spec: IJobSubmit = {
        notebook: d.notebook,
        gpus: d.gpus,
        priority: d.priority,
        tenant: d.tenant,
        parameters: d.parameters,
        max_runtime: d.max_runtime,
        preemptible: d.preemptible,
        max_retries: d.max_retries,
        gpu_type: d.gpu_type
      };
      const again = await api.submit(spec);
      model.add(again);
      void model.refresh();
    };

    const actions: IJobActions = { cancel, openLog, openOutput, resubmit };
    const panel = new GPUSchedPanel({
      model,
      form,
      actions,
      onSubmit: () => void submit(),
      onNotebookChange: path => void fillForm(path)
    });
    shell.add(panel, 'left', { rank: 600 });
    if (restorer) {
      restorer.add(panel, panel.id);
    }

    const showPanel = (): void => {
      shell.activateById(panel.id);
    };

    commands.addCommand(CommandIDs.openPanel, {
      label: 'GPU Jobs',
      caption: 'Show the GPU Jobs panel',
      icon: gpuIcon,
      execute: showPanel
    });

    commands.addCommand(CommandIDs.refresh, {
      label: 'Refresh GPU Jobs',
      execute: () => model.refresh()
    });

    commands.addCommand(CommandIDs.submitNotebook, {
      label: args => (args.toolbar ? '' : 'Submit as GPU job…'),
      caption: 'Submit this notebook as a GPU job',
      icon: gpuIcon,
      execute: async args => {
        const path = (args.path as string | undefined) ?? tracker?.currentWidget?.context.path;
        showPanel();
        if (path) {
          await fillForm(path);
        } else {
          form.setErrors({ notebook: 'Open a notebook first, or right-click one in the file browser.' });
        }
        panel.focusForm();
      }
    });

    commands.addCommand(CommandIDs.submitFile, {
      label: 'Submit as GPU job…',
      caption: 'Submit the selected notebook as a GPU job',
      icon: gpuIcon,
      isVisible: () => {
        const item = browserFactory?.tracker.currentWidget?.selectedItems().next();
        return !!item && !('done' in item && item.done) && selectedPath(item) !== null;
      },
      execute: async () => {
        const item = browserFactory?.tracker.currentWidget?.selectedItems().next();
        const path = item ? selectedPath(item) : null;
        if (path) {
          await commands.execute(CommandIDs.submitNotebook, { path });
        }
      }
    });

    app.contextMenu.addItem({
      command: CommandIDs.submitFile,
      selector: '.jp-DirListing-item[data-file-type="notebook"]',
      rank: 3
    });

    app.docRegistry.addWidgetExtension('Notebook', new SubmitButtonExtension(commands));

    if (palette) {
      palette.addItem({ command: CommandIDs.openPanel, category: 'GPU Jobs' });
      palette.addItem({ command: CommandIDs.submitNotebook, category: 'GPU Jobs' });
      palette.addItem({ command: CommandIDs.refresh, category: 'GPU Jobs' });
    }

    if (statusBar) {
      const item = new GPUSchedStatus(model, showPanel);
      statusBar.registerStatusItem('jupyter-gpusched:status', { item, align: 'left', rank: 4 });
    }

    // The form follows the notebook being looked at (not the executed copies it opened).
    tracker?.currentChanged.connect(async (_, widget) => {
      if (!widget) {
        return;
      }
      await widget.context.ready;
      const path = widget.context.path;
      if (!outputs.has(path) && path !== form.values.notebook && !form.busy) {
        await fillForm(path);
      }
    });

    // A word when one of the listed jobs ends.
    model.transitions.connect((_, moves) => {
      for (const { job, from, to } of moves) {
        if (from === null) {
          continue;
        }
        const what = `GPU job ${notebookName(job)} (${shortId(job.id)})`;
        if (to === 'SUCCEEDED') {
          Notification.success(`${what} succeeded.`, {
            autoClose: 5000,
            actions: [{ label: 'Open output', callback: () => void openOutput(job) }]
          });
        } else if (to === 'FAILED') {
          Notification.error(`${what} failed${job.message ? `: ${job.message}` : '.'}`, {
            autoClose: 8000,
            actions: [{ label: 'Open log', callback: () => void openLog(job) }]
          });
        }
      }
    });

    const applySettings = (s: ISettingRegistry.ISettings): void => {
      const next = { ...DEFAULT_SETTINGS, ...(s.composite as Partial<IGPUSchedSettings>) };
      form.setDefaults(
        { gpus: settings.defaultGpus, priority: settings.defaultPriority },
        { gpus: next.defaultGpus, priority: next.defaultPriority }
      );
      model.refreshInterval = next.refreshInterval;
      settings = next;
    };
    if (settingRegistry) {
      settingRegistry
        .load(PLUGIN_ID)
        .then(s => {
          applySettings(s);
          s.changed.connect(applySettings);
        })
        .catch(err => console.warn('jupyter-gpusched: settings not loaded, using defaults', err))
        .then(() => model.start());
    } else {
      model.start();
    }
  }
};

/** The path of a file browser item if it is a notebook. */
function selectedPath(item: unknown): string | null {
  const value = (item && typeof item === 'object' && 'value' in item ? (item as { value: unknown }).value : item) as
    | { path?: string; type?: string }
    | undefined;
  return value && value.type === 'notebook' && value.path ? value.path : null;
}

/** The "Submit as GPU job…" button in every notebook's toolbar. */
class SubmitButtonExtension implements DocumentRegistry.IWidgetExtension<NotebookPanel, INotebookModel> {
  constructor(private readonly _commands: JupyterFrontEnd['commands']) {}

  createNew(panel: NotebookPanel): IDisposable {
    const button = new ToolbarButton({
      className: 'jp-GPUSched-toolbarButton',
      icon: gpuIcon,
      label: 'GPU job',
      tooltip: 'Submit as GPU job…',
      onClick: () => void this._commands.execute(CommandIDs.submitNotebook, { path: panel.context.path })
    });
    button.node.dataset.command = CommandIDs.submitNotebook;
    panel.toolbar.insertItem(10, 'gpusched-submit', button);
    return new DisposableDelegate(() => button.dispose());
  }
}

export default plugin;
