/**
 * jupyter-gpusched's JupyterLab plugin: the GPU Jobs sidebar panel, the "Submit as GPU job…"
 * commands (file browser context menu, notebook toolbar), the status bar item, log views and the
 * read-only viewer of executed notebooks.
 *
 * This module only wires the pieces together: what the buttons do is in actions.ts, the
 * commands and where they show in commands.ts.
 */
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, Notification } from '@jupyterlab/apputils';
import { IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import { IFileBrowserFactory } from '@jupyterlab/filebrowser';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';

import { JobActions } from './actions';
import { GPUSchedAPI } from './api';
import { BudgetAlerts } from './budget';
import { addCommands } from './commands';
import { addPipelineCommands } from './pipelines';
import { SchedulesModel } from './components/Schedules';
import { addJobsViewCommands } from './jobsCommands';
import { GPUSchedPanel } from './components/Panel';
import { GPUSchedStatus } from './components/StatusItem';
import { notebookName, shortId } from './format';
import { SubmitFormModel } from './form';
import { GPUKernelWatch } from './gpuKernels';
import { JobsModel } from './model';
import {
  CommandIDs,
  DEFAULT_SETTINGS,
  IGPUSchedSettings,
  PLUGIN_ID
} from './tokens';

export * from './tokens';
export { GPUSchedAPI, GPUSchedError } from './api';
export { JobsModel } from './model';

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description:
    'Submit notebooks as GPU jobs, follow the queue, logs and executed notebooks.',
  autoStart: true,
  optional: [
    ISettingRegistry,
    ILayoutRestorer,
    INotebookTracker,
    IFileBrowserFactory,
    IStatusBar,
    ICommandPalette,
    IRenderMimeRegistry,
    IEditorLanguageRegistry
  ],
  activate: (
    app: JupyterFrontEnd,
    settingRegistry: ISettingRegistry | null,
    restorer: ILayoutRestorer | null,
    tracker: INotebookTracker | null,
    browserFactory: IFileBrowserFactory | null,
    statusBar: IStatusBar | null,
    palette: ICommandPalette | null,
    rendermime: IRenderMimeRegistry | null,
    languages: IEditorLanguageRegistry | null
  ) => {
    const api = new GPUSchedAPI(app.serviceManager.serverSettings);
    let settings: IGPUSchedSettings = { ...DEFAULT_SETTINGS };
    const model = new JobsModel({
      api,
      refreshInterval: settings.refreshInterval
    });
    const form = new SubmitFormModel({
      gpus: settings.defaultGpus,
      priority: settings.defaultPriority
    });
    const actions = new JobActions({
      app,
      api,
      model,
      form,
      tracker,
      rendermime,
      languages
    });

    const panel = new GPUSchedPanel({
      model,
      form,
      actions,
      onSubmit: () => void actions.submit(),
      onNotebookChange: path => void actions.fillForm(path),
      schedules: new SchedulesModel(api),
      onOpenJobsView: () => void app.commands.execute(CommandIDs.openJobsView),
      onRunPipeline: () => void app.commands.execute(CommandIDs.runPipeline)
    });
    app.shell.add(panel, 'left', { rank: 600 });
    if (restorer) {
      restorer.add(panel, panel.id);
    }

    addCommands({
      app,
      panel,
      model,
      form,
      actions,
      tracker,
      browserFactory,
      palette
    });
    addPipelineCommands(app, api, model, form, browserFactory, palette);
    addJobsViewCommands({
      app,
      api,
      model,
      form,
      actions,
      palette,
      showForm: () => {
        app.shell.activateById(panel.id);
        panel.focusForm();
      }
    });

    if (statusBar) {
      const item = new GPUSchedStatus(
        model,
        () => void app.commands.execute(CommandIDs.openJobsView)
      );
      statusBar.registerStatusItem('jupyter-gpusched:status', {
        item,
        align: 'left',
        rank: 4
      });
    }

    // The form follows the notebook being looked at.
    tracker?.currentChanged.connect(async (_, widget) => {
      if (!widget) {
        return;
      }
      await widget.context.ready;
      const path = widget.context.path;
      if (path !== form.values.notebook && !form.busy) {
        await actions.fillForm(path);
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
            actions: [
              {
                label: 'Open output',
                callback: () => void actions.openOutput(job)
              }
            ]
          });
        } else if (to === 'FAILED') {
          Notification.error(
            `${what} failed${job.message ? `: ${job.message}` : '.'}`,
            {
              autoClose: 8000,
              actions: [
                { label: 'Open log', callback: () => void actions.openLog(job) }
              ]
            }
          );
        }
      }
    });

    // Budget warnings (80%, 100%) of my tenants: a toast once per level and period; the bar stays.
    const budgetAlerts = new BudgetAlerts(window.localStorage);
    model.changed.connect(() => {
      for (const alert of budgetAlerts.due(model.me, model.queues)) {
        const toast =
          alert.state === 'over' ? Notification.error : Notification.warning;
        toast(`Budget: ${alert.text}`, { autoClose: 10000 });
      }
    });

    const applySettings = (s: ISettingRegistry.ISettings): void => {
      const next = {
        ...DEFAULT_SETTINGS,
        ...(s.composite as Partial<IGPUSchedSettings>)
      };
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
        .catch(err =>
          console.warn(
            'jupyter-gpusched: settings not loaded, using defaults',
            err
          )
        )
        .then(() => model.start());
    } else {
      model.start();
    }
    new GPUKernelWatch(api).start(); // "waiting for a GPU: #2 in line" while a GPU kernel starts
  }
};

export default plugin;
