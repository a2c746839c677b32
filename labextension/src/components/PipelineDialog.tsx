import { Dialog } from '@jupyterlab/apputils';
import { ReactWidget, closeIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

import { IPipelineValues, PipelineErrors } from '../pipelineForm';
import { Priority } from '../tokens';

const PRIORITIES: Priority[] = ['high', 'normal', 'low'];

/** The message shown under a control, tied to it for screen readers. */
function FieldMessage(props: {
  id: string;
  text?: string;
}): JSX.Element | null {
  return props.text ? (
    <div id={props.id} className="jp-GPUSched-fieldError" role="alert">
      {props.text}
    </div>
  ) : null;
}

/**
 * Where typing goes when the dialog opens: the control a refusal names, else the first notebook.
 * The form focuses it itself once rendered (the dialog's own focusing may run before the body has
 * rendered, and then lands on a button); the dialog is given the same selector.
 */
export function pipelineFocusSelector(errors: PipelineErrors): string {
  return Object.keys(errors).some(k => k !== 'form' && k !== 'steps')
    ? '[aria-invalid="true"]'
    : 'input';
}

/** The dialog's form: notebooks in order (add / remove rows), the shared job fields, chain or not. */
export function PipelineForm(props: {
  initial: IPipelineValues;
  errors: PipelineErrors;
  onChange: (values: IPipelineValues) => void;
}): JSX.Element {
  const { errors, onChange } = props;
  const [values, setValues] = React.useState(props.initial);
  const root = React.useRef<HTMLDivElement>(null);
  // as the rows appear (a layout effect), so no keystroke lands elsewhere first
  React.useLayoutEffect(() => {
    root.current
      ?.querySelector<HTMLElement>(pipelineFocusSelector(errors))
      ?.focus();
  }, []); // once, when the dialog opens
  const update = (patch: Partial<IPipelineValues>): void => {
    const next = { ...values, ...patch };
    setValues(next);
    onChange(next);
  };
  const setRow = (row: number, path: string): void => {
    update({
      notebooks: values.notebooks.map((p, i) => (i === row ? path : p))
    });
  };
  const removeRow = (row: number): void => {
    const notebooks = values.notebooks.filter((_, i) => i !== row);
    update({ notebooks: notebooks.length ? notebooks : [''] });
  };
  return (
    <div className="jp-GPUSched-form jp-GPUSched-pipelineForm" ref={root}>
      <FieldMessage id="gpusched-pipeline-error" text={errors.form} />
      <fieldset
        className="jp-GPUSched-params"
        aria-describedby="gpusched-pipeline-hint gpusched-pipeline-steps-error"
      >
        <legend>Notebooks, in order</legend>
        <div id="gpusched-pipeline-hint" className="jp-GPUSched-hint">
          Paths from the server root, one step each.
        </div>
        <ol className="jp-GPUSched-pipelineRows" start={0}>
          {values.notebooks.map((path, row) => {
            const id = `gpusched-pipeline-step-${row}`;
            const error = errors[`step.${row}`];
            return (
              <li key={row} className="jp-GPUSched-pipelineRow">
                <label htmlFor={id}>Step {row}</label>
                <input
                  id={id}
                  className="jp-mod-styled"
                  value={path}
                  placeholder="folder/notebook.ipynb"
                  aria-invalid={error ? true : undefined}
                  aria-describedby={error ? `${id}-error` : undefined}
                  onChange={e => setRow(row, e.target.value)}
                />
                <button
                  type="button"
                  className="jp-Button jp-mod-minimal jp-GPUSched-iconButton"
                  title={`Remove step ${row}`}
                  aria-label={`Remove step ${row}`}
                  onClick={() => removeRow(row)}
                >
                  <closeIcon.react tag="span" />
                </button>
                <FieldMessage id={`${id}-error`} text={error} />
              </li>
            );
          })}
        </ol>
        <FieldMessage id="gpusched-pipeline-steps-error" text={errors.steps} />
        <button
          type="button"
          className="jp-Button jp-mod-styled jp-GPUSched-secondary jp-GPUSched-pipelineAdd"
          onClick={() => update({ notebooks: [...values.notebooks, ''] })}
        >
          Add step
        </button>
      </fieldset>
      <div className="jp-GPUSched-check">
        <input
          id="gpusched-pipeline-chain"
          type="checkbox"
          checked={values.chain}
          onChange={e => update({ chain: e.target.checked })}
        />
        <label htmlFor="gpusched-pipeline-chain">
          Each step runs after the previous one
        </label>
      </div>
      <div className="jp-GPUSched-field">
        <label htmlFor="gpusched-pipeline-gpus">GPUs per step</label>
        <input
          id="gpusched-pipeline-gpus"
          className="jp-mod-styled"
          inputMode="numeric"
          value={values.gpus}
          aria-invalid={errors.gpus ? true : undefined}
          aria-describedby={
            errors.gpus ? 'gpusched-pipeline-gpus-error' : undefined
          }
          onChange={e => update({ gpus: e.target.value })}
        />
        <FieldMessage id="gpusched-pipeline-gpus-error" text={errors.gpus} />
      </div>
      <div className="jp-GPUSched-field">
        <label htmlFor="gpusched-pipeline-priority">Priority</label>
        <select
          id="gpusched-pipeline-priority"
          className="jp-mod-styled"
          value={values.priority}
          aria-invalid={errors.priority ? true : undefined}
          aria-describedby={
            errors.priority ? 'gpusched-pipeline-priority-error' : undefined
          }
          onChange={e => update({ priority: e.target.value as Priority })}
        >
          {PRIORITIES.map(p => (
            <option key={p} value={p}>
              {p}
            </option>
          ))}
        </select>
        <FieldMessage
          id="gpusched-pipeline-priority-error"
          text={errors.priority}
        />
      </div>
    </div>
  );
}

/** The dialog's body: its value is the form's values when the user presses "Run pipeline". */
export class PipelineDialogBody
  extends ReactWidget
  implements Dialog.IBodyWidget<IPipelineValues>
{
  constructor(initial: IPipelineValues, errors: PipelineErrors) {
    super();
    this._values = initial;
    this._errors = errors;
    this.addClass('jp-GPUSched-pipelineDialog');
  }

  getValue(): IPipelineValues {
    return this._values;
  }

  protected render(): JSX.Element {
    return (
      <PipelineForm
        initial={this._values}
        errors={this._errors}
        onChange={v => (this._values = v)}
      />
    );
  }

  private _values: IPipelineValues;
  private _errors: PipelineErrors;
}
