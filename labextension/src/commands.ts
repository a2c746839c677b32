/**
 * The commands (open the panel, refresh, "Submit as GPU job…" for the current notebook and for a
 * file browser item) and where they show: context menu, notebook toolbar, command palette.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { DocumentRegistry } from '@jupyterlab/docregistry';
import { IFileBrowserFactory } from '@jupyterlab/filebrowser';
import {
  INotebookModel,
  INotebookTracker,
  NotebookPanel
} from '@jupyterlab/notebook';
import { DisposableDelegate, IDisposable } from '@lumino/disposable';

import { JobActions } from './actions';
import { gpuIcon } from './components/icons';
import { GPUSchedPanel } from './components/Panel';
import { SubmitFormModel } from './form';
import { actionButton } from './toolbar';
import { JobsModel } from './model';
import { CommandIDs } from './tokens';

export interface ICommandsOptions {
  app: JupyterFrontEnd;
  panel: GPUSchedPanel;
  model: JobsModel;
  form: SubmitFormModel;
  actions: JobActions;
  tracker: INotebookTracker | null;
  browserFactory: IFileBrowserFactory | null;
  palette: ICommandPalette | null;
}

/** Add the commands, the context menu item, the notebook toolbar button and the palette entries. */
export function addCommands(options: ICommandsOptions): void {
  const { app, panel, model, form, actions, tracker, browserFactory, palette } =
    options;
  const { commands } = app;
  const showPanel = (): void => {
    app.shell.activateById(panel.id);
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
      const path =
        (args.path as string | undefined) ??
        tracker?.currentWidget?.context.path;
      showPanel();
      if (path) {
        await actions.fillForm(path);
      } else {
        form.setErrors({
          notebook:
            'Open a notebook first, or right-click one in the file browser.'
        });
      }
      panel.focusForm();
    }
  });

  commands.addCommand(CommandIDs.submitFile, {
    label: 'Submit as GPU job…',
    caption: 'Submit the selected notebook as a GPU job',
    icon: gpuIcon,
    isVisible: () => {
      const item = browserFactory?.tracker.currentWidget
        ?.selectedItems()
        .next();
      return (
        !!item && !('done' in item && item.done) && selectedPath(item) !== null
      );
    },
    execute: async () => {
      const item = browserFactory?.tracker.currentWidget
        ?.selectedItems()
        .next();
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

  app.docRegistry.addWidgetExtension(
    'Notebook',
    new SubmitButtonExtension(commands)
  );

  if (palette) {
    palette.addItem({ command: CommandIDs.openPanel, category: 'GPU Jobs' });
    palette.addItem({
      command: CommandIDs.submitNotebook,
      category: 'GPU Jobs'
    });
    palette.addItem({ command: CommandIDs.refresh, category: 'GPU Jobs' });
  }
}

/** The path of a file browser item if it is a notebook. */
export function selectedPath(item: unknown): string | null {
  const value = (
    item && typeof item === 'object' && 'value' in item
      ? (item as { value: unknown }).value
      : item
  ) as { path?: string; type?: string } | undefined;
  return value && value.type === 'notebook' && value.path ? value.path : null;
}

/** The "Submit as GPU job…" button in every notebook's toolbar. */
export class SubmitButtonExtension implements DocumentRegistry.IWidgetExtension<
  NotebookPanel,
  INotebookModel
> {
  constructor(private readonly _commands: JupyterFrontEnd['commands']) {}

  createNew(panel: NotebookPanel): IDisposable {
    const button = actionButton({
      className: 'jp-GPUSched-toolbarButton',
      icon: gpuIcon,
      label: 'GPU job',
      tooltip: 'Submit as GPU job…',
      onClick: () =>
        void this._commands.execute(CommandIDs.submitNotebook, {
          path: panel.context.path
        })
    });
    button.node.dataset.command = CommandIDs.submitNotebook;
    panel.toolbar.insertItem(10, 'gpusched-submit', button);
    return new DisposableDelegate(() => button.dispose());
  }
}
