import { Button, UseSignal } from '@jupyterlab/ui-components';
import * as React from 'react';

import { SubmitFormModel } from '../form';
import { IParameterRow } from '../params';
import { JobCost } from './BudgetBar';
import { ICluster, IMe, IQueues, PRIORITIES, Priority } from '../tokens';

export interface ISubmitFormProps {
  form: SubmitFormModel;
  /** Tenants to choose from (keys of `GET queues`) where `me` does not say. */
  queues: IQueues | null;
  /** The tenants this user may submit to, and their default. */
  me?: IMe | null;
  cluster: ICluster | null;
  onSubmit: () => void;
  /** The user typed another notebook path (on leaving the field): load its parameters. */
  onNotebookChange?: (path: string) => void;
}

const ID = 'gpusched-form';

/** The message under a field, tied to it by aria-describedby. */
function FieldError(props: {
  id: string;
  message?: string;
}): JSX.Element | null {
  if (!props.message) {
    return null;
  }
  return (
    <div id={props.id} className="jp-GPUSched-fieldError" role="alert">
      {props.message}
    </div>
  );
}

function describedBy(
  id: string,
  message?: string
): { 'aria-invalid'?: boolean; 'aria-describedby'?: string } {
  return message ? { 'aria-invalid': true, 'aria-describedby': id } : {};
}

/** GPU types offered by the cluster's pools (the API may not send them; then none are offered). */
function gpuTypes(cluster: ICluster | null): string[] {
  const types = new Set<string>();
  for (const pool of cluster?.pools ?? []) {
    if (pool.gpu_type) {
      types.add(pool.gpu_type);
    }
  }
  return [...types].sort();
}

export function SubmitForm(props: ISubmitFormProps): JSX.Element {
  return (
    <UseSignal signal={props.form.changed}>
      {() => <SubmitFormBody {...props} />}
    </UseSignal>
  );
}

function SubmitFormBody(props: ISubmitFormProps): JSX.Element {
  const { form } = props;
  const v = form.values;
  const errors = form.errors;
  // only the tenants the server will accept from this user (JupyterHub: their groups')
  const tenants = props.me
    ? [...props.me.tenants].sort()
    : Object.keys(props.queues?.queues ?? {}).sort();
  const defaultLabel = props.me
    ? `my default (${props.me.default_tenant})`
    : 'my default';
  const types = gpuTypes(props.cluster);
  const free = props.cluster
    ? `${props.cluster.free_gpus} of ${props.cluster.total_gpus} free`
    : null;

  const setRow = (index: number, patch: Partial<IParameterRow>) => {
    const rows = v.rows.map((r, i) => (i === index ? { ...r, ...patch } : r));
    form.update({ rows });
  };
  const removeRow = (index: number) =>
    form.update({ rows: v.rows.filter((_, i) => i !== index) });
  const addRow = () =>
    form.update({ rows: [...v.rows, { name: '', value: '' }] });

  const rowNames = new Set(v.rows.map(r => r.name.trim()));
  const strayParamErrors = Object.entries(errors)
    .filter(
      ([k]) =>
        (k === 'parameters' || k.startsWith('parameters.')) &&
        !rowNames.has(k.slice('parameters.'.length))
    )
    .map(([, m]) => m);

  return (
    <form
      id={ID}
      className="jp-GPUSched-form"
      aria-label="Submit a notebook as a GPU job"
      onSubmit={e => {
        e.preventDefault();
        props.onSubmit();
      }}
    >
      <div className="jp-GPUSched-field">
        <label htmlFor={`${ID}-notebook`}>Notebook</label>
        <input
          id={`${ID}-notebook`}
          name="notebook"
          className="jp-mod-styled"
          type="text"
          placeholder="open a notebook, or right-click one"
          value={v.notebook}
          onChange={e => form.update({ notebook: e.target.value })}
          onBlur={e => {
            const path = e.target.value.trim();
            if (path && path !== form.rowsFrom && path.endsWith('.ipynb')) {
              props.onNotebookChange?.(path);
            }
          }}
          {...describedBy(`${ID}-notebook-error`, errors.notebook)}
        />
        <FieldError id={`${ID}-notebook-error`} message={errors.notebook} />
      </div>

      <div className="jp-GPUSched-row">
        <div className="jp-GPUSched-field">
          <label htmlFor={`${ID}-gpus`}>GPUs</label>
          <input
            id={`${ID}-gpus`}
            name="gpus"
            className="jp-mod-styled"
            type="number"
            min={1}
            step={1}
            inputMode="numeric"
            value={v.gpus}
            onChange={e => form.update({ gpus: e.target.value })}
            {...describedBy(`${ID}-gpus-error`, errors.gpus)}
          />
        </div>
        <div className="jp-GPUSched-field">
          <label htmlFor={`${ID}-priority`}>Priority</label>
          <select
            id={`${ID}-priority`}
            name="priority"
            className="jp-mod-styled"
            value={v.priority}
            onChange={e =>
              form.update({ priority: e.target.value as Priority })
            }
            {...describedBy(`${ID}-priority-error`, errors.priority)}
          >
            {PRIORITIES.map(p => (
              <option key={p} value={p}>
                {p}
              </option>
            ))}
          </select>
        </div>
      </div>
      {free && <div className="jp-GPUSched-hint">Cluster: {free}</div>}
      <FieldError id={`${ID}-gpus-error`} message={errors.gpus} />
      <FieldError id={`${ID}-priority-error`} message={errors.priority} />

      {(types.length > 1 || v.gpuType) && (
        <div className="jp-GPUSched-field">
          <label htmlFor={`${ID}-gputype`}>GPU type</label>
          <select
            id={`${ID}-gputype`}
            name="gpu_type"
            className="jp-mod-styled"
            value={v.gpuType}
            onChange={e => form.update({ gpuType: e.target.value })}
            {...describedBy(`${ID}-gputype-error`, errors.gpuType)}
          >
            <option value="">any</option>
            {types.map(t => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
          <FieldError id={`${ID}-gputype-error`} message={errors.gpuType} />
        </div>
      )}

      <div className="jp-GPUSched-field">
        <label htmlFor={`${ID}-tenant`}>Queue (tenant)</label>
        <select
          id={`${ID}-tenant`}
          name="tenant"
          className="jp-mod-styled"
          value={v.tenant}
          onChange={e => form.update({ tenant: e.target.value })}
          {...describedBy(`${ID}-tenant-error`, errors.tenant)}
        >
          <option value="">{defaultLabel}</option>
          {tenants.map(t => (
            <option key={t} value={t}>
              {t}
            </option>
          ))}
          {v.tenant && !tenants.includes(v.tenant) && (
            <option value={v.tenant}>{v.tenant}</option>
          )}
        </select>
        <FieldError id={`${ID}-tenant-error`} message={errors.tenant} />
      </div>

      <div className="jp-GPUSched-field">
        <label htmlFor={`${ID}-runtime`}>Max runtime (minutes)</label>
        <input
          id={`${ID}-runtime`}
          name="max_runtime"
          className="jp-mod-styled"
          type="number"
          min={0}
          step="any"
          placeholder="no limit"
          value={v.maxRuntime}
          onChange={e => form.update({ maxRuntime: e.target.value })}
          {...describedBy(`${ID}-runtime-error`, errors.maxRuntime)}
        />
        <FieldError id={`${ID}-runtime-error`} message={errors.maxRuntime} />
      </div>

      <div className="jp-GPUSched-field">
        <label htmlFor={`${ID}-notify`}>Notify me</label>
        <input
          id={`${ID}-notify`}
          name="notify"
          className="jp-mod-styled"
          type="text"
          placeholder="my defaults"
          spellCheck={false}
          value={v.notify}
          onChange={e => form.update({ notify: e.target.value })}
          aria-describedby={
            errors.notify ? `${ID}-notify-error` : `${ID}-notify-hint`
          }
          aria-invalid={errors.notify ? true : undefined}
        />
        <span id={`${ID}-notify-hint`} className="jp-GPUSched-hint">
          email or webhook URL, comma separated; none: no notifications
        </span>
        <FieldError id={`${ID}-notify-error`} message={errors.notify} />
      </div>

      <div className="jp-GPUSched-check">
        <input
          id={`${ID}-spot`}
          name="preemptible"
          type="checkbox"
          checked={v.preemptible}
          onChange={e => form.update({ preemptible: e.target.checked })}
          aria-describedby={`${ID}-spot-hint`}
        />
        <label htmlFor={`${ID}-spot`}>Spot OK</label>
        <span id={`${ID}-spot-hint`} className="jp-GPUSched-hint">
          may be preempted; resumes from its last checkpoint
        </span>
      </div>
      <FieldError id={`${ID}-spot-error`} message={errors.preemptible} />

      <fieldset className="jp-GPUSched-params">
        <legend>Parameters</legend>
        {v.rows.length === 0 && (
          <div className="jp-GPUSched-hint">
            None. Tag a cell <code>parameters</code> to prefill them, or add
            one.
          </div>
        )}
        {v.rows.map((row, i) => {
          const key = `parameters.${row.name.trim()}`;
          const message = row.name.trim() ? errors[key] : undefined;
          const errId = `${ID}-param-${i}-error`;
          return (
            <div className="jp-GPUSched-param" key={i} data-param={row.name}>
              <div className="jp-GPUSched-paramInputs">
                <input
                  className="jp-mod-styled jp-GPUSched-paramName"
                  type="text"
                  aria-label={`Parameter ${i + 1} name`}
                  placeholder="name"
                  value={row.name}
                  spellCheck={false}
                  onChange={e => setRow(i, { name: e.target.value })}
                  {...describedBy(errId, message)}
                />
                <span aria-hidden="true">=</span>
                <input
                  className="jp-mod-styled jp-GPUSched-paramValue"
                  type="text"
                  aria-label={`Value of ${row.name || `parameter ${i + 1}`}`}
                  placeholder="value"
                  value={row.value}
                  spellCheck={false}
                  onChange={e => setRow(i, { value: e.target.value })}
                />
                <button
                  type="button"
                  className="jp-Button jp-mod-minimal jp-GPUSched-iconButton"
                  aria-label={`Remove parameter ${row.name || i + 1}`}
                  title="Remove"
                  onClick={() => removeRow(i)}
                >
                  ×
                </button>
              </div>
              <FieldError id={errId} message={message} />
            </div>
          );
        })}
        {strayParamErrors.map((m, i) => (
          <FieldError key={i} id={`${ID}-params-error-${i}`} message={m} />
        ))}
        <Button
          type="button"
          minimal
          small
          className="jp-GPUSched-secondary jp-GPUSched-add"
          onClick={addRow}
        >
          + Add parameter
        </Button>
      </fieldset>

      <JobCost
        gpus={v.gpus}
        maxRuntime={v.maxRuntime}
        gpuType={v.gpuType}
        preemptible={v.preemptible}
        tenant={v.tenant}
        me={props.me}
        queues={props.queues}
        cluster={props.cluster}
      />
      {form.formError && (
        <div className="jp-GPUSched-formError" role="alert">
          {form.formError}
        </div>
      )}
      {form.notice && (
        <div className="jp-GPUSched-notice" role="status">
          {form.notice}
        </div>
      )}
      <button
        type="submit"
        className="jp-Button jp-mod-styled jp-mod-accept jp-GPUSched-submit"
        disabled={form.busy}
      >
        {form.busy ? 'Submitting…' : 'Submit GPU job'}
      </button>
    </form>
  );
}
