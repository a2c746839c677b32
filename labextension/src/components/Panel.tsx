import { ReactWidget, UseSignal, refreshIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

import { SubmitFormModel } from '../form';
import { JobsModel } from '../model';
import { PANEL_ID } from '../tokens';
import { BudgetBars } from './BudgetBar';
import { gpuIcon } from './icons';
import { IJobActions, JobList } from './JobList';
import { ScheduleBox, ScheduleList, SchedulesModel } from './Schedules';
import { SubmitForm } from './SubmitForm';

export interface IPanelOptions {
  model: JobsModel;
  form: SubmitFormModel;
  actions: IJobActions;
  onSubmit: () => void;
  onNotebookChange: (path: string) => void;
  /** Recurring schedules (Schedules.tsx); left out, the panel shows none. */
  schedules?: SchedulesModel;
  /** Open the main-area Jobs view (all jobs in a table). */
  onOpenJobsView?: () => void;
  /** "Run a pipeline…": the dialog that submits notebooks in order as a pipeline (pipelines.ts). */
  onRunPipeline?: () => void;
}

/** The left sidebar panel: the submit form above the live job list. */
export class GPUSchedPanel extends ReactWidget {
  constructor(options: IPanelOptions) {
    super();
    this._options = options;
    this.id = PANEL_ID;
    this.addClass('jp-GPUSched-panel');
    this.title.icon = gpuIcon;
    this.title.caption = 'GPU Jobs';
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', 'GPU Jobs');
  }

  /** Move keyboard focus to the first form control (after a command filled the form). */
  focusForm(): void {
    requestAnimationFrame(() => {
      const input = this.node.querySelector<HTMLElement>('#gpusched-form-gpus');
      input?.focus();
    });
  }

  protected render(): JSX.Element {
    const { model, form, actions, onSubmit, onNotebookChange, schedules } =
      this._options;
    return (
      <div className="jp-GPUSched-panelBody">
        <div className="jp-GPUSched-header">
          <h2>GPU Jobs</h2>
          {this._options.onOpenJobsView && (
            <button
              type="button"
              className="jp-Button jp-mod-minimal jp-mod-styled jp-GPUSched-openJobsView"
              title="Open the Jobs view: all jobs in a table"
              aria-label="Open Jobs view"
              onClick={this._options.onOpenJobsView}
            >
              Jobs view
            </button>
          )}
          <button
            type="button"
            className="jp-Button jp-mod-minimal jp-GPUSched-iconButton"
            title="Refresh"
            aria-label="Refresh the job list"
            onClick={() => void model.refresh()}
          >
            <refreshIcon.react tag="span" />
          </button>
        </div>
        <UseSignal signal={model.changed}>
          {() => (
            <>
              <BudgetBars me={model.me} queues={model.queues} />
              <SubmitForm
                form={form}
                queues={model.queues}
                me={model.me}
                cluster={model.cluster}
                onSubmit={onSubmit}
                onNotebookChange={onNotebookChange}
              />
            </>
          )}
        </UseSignal>
        {schedules && <ScheduleBox form={form} model={schedules} />}
        {this._options.onRunPipeline && (
          <button
            type="button"
            className="jp-Button jp-mod-styled jp-GPUSched-secondary jp-GPUSched-pipelineOpen"
            title="Submit notebooks in order as a pipeline: each step runs after the previous one"
            aria-haspopup="dialog"
            onClick={this._options.onRunPipeline}
          >
            Run a pipeline…
          </button>
        )}
        <JobList model={model} actions={actions} />
        {schedules && <ScheduleList model={schedules} />}
      </div>
    );
  }

  private _options: IPanelOptions;
}
