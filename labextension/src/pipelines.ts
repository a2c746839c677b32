/**
 * Pipelines in the lab (docs/pipelines.md): "Run a pipeline…" in the panel (a dialog of notebooks in
 * order) and "Run pipeline file…" on a JSON file in the file browser post one, and a main-area view
 * shows a pipeline's steps and their states.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import {
  Dialog,
  ICommandPalette,
  MainAreaWidget,
  showDialog,
  showErrorMessage
} from '@jupyterlab/apputils';
import { PathExt } from '@jupyterlab/coreutils';
import { IFileBrowserFactory } from '@jupyterlab/filebrowser';

import { GPUSchedAPI } from './api';
import { gpuIcon } from './components/icons';
import {
  PipelineDialogBody,
  pipelineFocusSelector
} from './components/PipelineDialog';
import { PipelineView } from './components/PipelineView';
import { SubmitFormModel } from './form';
import { shortId } from './format';
import { JobsModel } from './model';
import {
  buildPipeline,
  IPipelineValues,
  PipelineErrors,
  pipelineErrors
} from './pipelineForm';
import { CommandIDs, IJobSubmit } from './tokens';

/** A pipeline file's body with each step's notebook made relative to the server root (from the file's folder). */
export function pipelineBody(
  path: string,
  text: string
): { steps: IJobSubmit[]; edges: number[][] } {
  const spec = JSON.parse(text);
  if (!spec || !Array.isArray(spec.steps)) {
    throw new Error(
      `${path}: a pipeline file holds "steps" (a list) and "edges"`
    );
  }
  const folder = PathExt.dirname(path);
  const steps = spec.steps.map((step: IJobSubmit) =>
    step && typeof step.notebook === 'string'
      ? {
          ...step,
          notebook: PathExt.normalize(PathExt.join(folder, step.notebook))
        }
      : step
  );
  return { steps, edges: Array.isArray(spec.edges) ? spec.edges : [] };
}

const views = new Map<string, MainAreaWidget<PipelineView>>();

/** Show a pipeline's steps in a main-area tab (one per pipeline). */
export function openPipelineView(
  app: JupyterFrontEnd,
  api: GPUSchedAPI,
  pipelineId: string
): void {
  let widget = views.get(pipelineId);
  if (!widget || widget.isDisposed) {
    widget = new MainAreaWidget({ content: new PipelineView(api, pipelineId) });
    widget.id = `gpusched-pipeline-${pipelineId}`;
    widget.title.label = `Pipeline ${shortId(pipelineId)}`;
    widget.title.caption = `GPU pipeline ${pipelineId}`;
    widget.title.icon = gpuIcon;
    widget.title.closable = true;
    views.set(pipelineId, widget);
    widget.disposed.connect(() => views.delete(pipelineId));
    app.shell.add(widget, 'main', { mode: 'split-right' });
  }
  app.shell.activateById(widget.id);
}

/**
 * "Run a pipeline…": a dialog of notebooks in order (the form's notebook first, its GPUs and
 * priority for every step); a refusal shows the dialog again with the message at its place.
 */
export async function runPipelineDialog(
  app: JupyterFrontEnd,
  api: GPUSchedAPI,
  model: JobsModel,
  form: SubmitFormModel
): Promise<string | null> {
  let values: IPipelineValues = {
    notebooks: [form.values.notebook, ''],
    gpus: form.values.gpus,
    priority: form.values.priority,
    chain: true
  };
  let errors: PipelineErrors = {};
  for (;;) {
    const result = await showDialog<IPipelineValues>({
      title: 'Run a pipeline',
      body: new PipelineDialogBody(values, errors),
      buttons: [
        Dialog.cancelButton(),
        Dialog.okButton({ label: 'Run pipeline', ariaLabel: 'Run pipeline' })
      ],
      focusNodeSelector: pipelineFocusSelector(errors)
    });
    if (!result.button.accept || !result.value) {
      return null;
    }
    values = result.value;
    const built = buildPipeline(values);
    if (!built.body) {
      errors = built.errors;
      continue;
    }
    try {
      const pipeline = await api.submitPipeline(built.body);
      void model.refresh();
      openPipelineView(app, api, pipeline.id);
      return pipeline.id;
    } catch (err) {
      errors = pipelineErrors(err, built.rowOfStep);
    }
  }
}

/** "Run a pipeline…" (the panel's button, the palette) and "Run pipeline file…" on a .json file. */
export function addPipelineCommands(
  app: JupyterFrontEnd,
  api: GPUSchedAPI,
  model: JobsModel,
  form: SubmitFormModel,
  browserFactory: IFileBrowserFactory | null,
  palette: ICommandPalette | null = null
): void {
  app.commands.addCommand(CommandIDs.runPipeline, {
    label: 'Run a pipeline…',
    caption: 'Submit notebooks in order as a GPU pipeline',
    icon: gpuIcon,
    execute: () => runPipelineDialog(app, api, model, form)
  });
  palette?.addItem({ command: CommandIDs.runPipeline, category: 'GPU Jobs' });
  app.commands.addCommand(CommandIDs.runPipelineFile, {
    label: 'Run pipeline file…',
    caption: 'Submit the steps and edges this file lists as a GPU pipeline',
    icon: gpuIcon,
    execute: async args => {
      const next = browserFactory?.tracker.currentWidget
        ?.selectedItems()
        .next();
      const path =
        (args.path as string | undefined) ??
        (next && !next.done ? next.value.path : undefined);
      if (!path) {
        return;
      }
      try {
        const file = await app.serviceManager.contents.get(path, {
          content: true,
          format: 'text',
          type: 'file'
        });
        const pipeline = await api.submitPipeline(
          pipelineBody(path, String(file.content))
        );
        void model.refresh();
        openPipelineView(app, api, pipeline.id);
      } catch (err) {
        await showErrorMessage(
          'Could not run the pipeline',
          err instanceof Error ? err.message : String(err)
        );
      }
    }
  });
  app.contextMenu.addItem({
    command: CommandIDs.runPipelineFile,
    selector: '.jp-DirListing-item[data-file-type="json"]',
    rank: 4
  });
}
