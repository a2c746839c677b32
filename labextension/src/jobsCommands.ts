/**
 * The main-area Jobs view and job pages: the commands that open them ("GPU jobs: open jobs
 * view" in the palette; the panel's button and the status bar run it too) and what the job
 * page's buttons do beyond the panel's (resubmit with edits, download output).
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { ICommandPalette, MainAreaWidget } from '@jupyterlab/apputils';

import { JobActions } from './actions';
import { GPUSchedAPI } from './api';
import { IJobDetailActions, JobDetailView } from './components/JobDetail';
import { JobsView } from './components/JobsView';
import { downloadText } from './components/NotebookView';
import { outputFileName } from './format';
import { formValuesFromJob, SubmitFormModel } from './form';
import { JobsModel } from './model';
import { parametersToRows } from './params';
import { CommandIDs, IJob } from './tokens';

export interface IJobsViewCommandsOptions {
  app: JupyterFrontEnd;
  api: GPUSchedAPI;
  model: JobsModel;
  form: SubmitFormModel;
  actions: JobActions;
  palette: ICommandPalette | null;
  /** Show the sidebar form (after filling it for a resubmit with edits). */
  showForm: () => void;
}

export function addJobsViewCommands(options: IJobsViewCommandsOptions): void {
  const { app, api, model, form, actions, palette, showForm } = options;
  let view: MainAreaWidget<JobsView> | null = null;
  const pages = new Map<string, MainAreaWidget<JobDetailView>>();

  const detailActions: IJobDetailActions = {
    cancel: job => actions.cancel(job),
    resubmit: job => actions.resubmit(job),
    openOutput: job => actions.openOutput(job),
    downloadOutput: async job => {
      const { text } = await api.output(job.id);
      downloadText(outputFileName(job), text);
    },
    editAndResubmit: async job => {
      form.setNotebook(job.notebook, parametersToRows(job.parameters ?? {}));
      form.update(formValuesFromJob(job));
      showForm();
    }
  };

  const openJob = (job: IJob): void => {
    let page = pages.get(job.id);
    if (!page || page.isDisposed) {
      const content = new JobDetailView({
        api,
        job,
        actions: detailActions,
        interval: model.refreshInterval
      });
      page = new MainAreaWidget({ content });
      page.id = `gpusched-job-page-${job.id}`;
      page.title.label = content.title.label;
      page.title.caption = content.title.caption;
      page.title.icon = content.title.icon;
      page.title.closable = true;
      pages.set(job.id, page);
      page.disposed.connect(() => pages.delete(job.id));
      app.shell.add(page, 'main');
    }
    app.shell.activateById(page.id);
  };

  app.commands.addCommand(CommandIDs.openJobsView, {
    label: 'GPU jobs: open jobs view',
    caption: 'A table of all GPU jobs: sort, filter, page, open one',
    execute: () => {
      if (!view || view.isDisposed) {
        const content = new JobsView({ api, model, onOpenJob: openJob });
        view = new MainAreaWidget({ content });
        view.id = 'gpusched-jobs-view-tab';
        view.title.label = content.title.label;
        view.title.caption = content.title.caption;
        view.title.icon = content.title.icon;
        view.title.closable = true;
        app.shell.add(view, 'main');
      }
      app.shell.activateById(view.id);
    }
  });

  app.commands.addCommand(CommandIDs.openJobDetail, {
    label: 'GPU jobs: open job',
    execute: async args => {
      const id = args.job as string | undefined;
      if (id) {
        openJob(await api.getJob(id));
      }
    }
  });

  palette?.addItem({ command: CommandIDs.openJobsView, category: 'GPU Jobs' });
}
