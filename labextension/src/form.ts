/**
 * The submit form's state, kept outside React so commands (file browser, toolbar) can fill it
 * and so turning it into a request, and a refusal back into per-field messages, is testable.
 */
import { ISignal, Signal } from '@lumino/signaling';

import { GPUSchedError } from './api';
import { IParameterRow, rowsToParameters } from './params';
import { IJobDetail, IJobSubmit, INotifyTarget, Priority } from './tokens';

export interface IFormValues {
  notebook: string;
  /** Text of the GPUs input. */
  gpus: string;
  /** '' = any GPU type. */
  gpuType: string;
  priority: Priority;
  /** '' = the caller's default tenant. */
  tenant: string;
  preemptible: boolean;
  /** Text of the max runtime input, in minutes; '' = no limit. */
  maxRuntime: string;
  /** "Notify me": targets, comma separated; '' = my defaults, 'none' = no notifications. */
  notify: string;
  rows: IParameterRow[];
}

/** Where a message is shown: a form field, `parameters.<name>`, or the form as a whole (`null`). */
export type FieldErrors = Record<string, string>;

/** The form fields the server's `field` names map to. */
const FIELD_OF: Record<string, string> = {
  notebook: 'notebook',
  gpus: 'gpus',
  gpu_type: 'gpuType',
  priority: 'priority',
  tenant: 'tenant',
  preemptible: 'preemptible',
  max_runtime: 'maxRuntime',
  notify: 'notify',
  parameters: 'parameters'
};

/** The form field (or `parameters.<name>`) a server `field` belongs to; null: the form as a whole. */
export function formField(serverField: string | null): string | null {
  if (!serverField) {
    return null;
  }
  if (serverField.startsWith('parameters.')) {
    return serverField;
  }
  return FIELD_OF[serverField] ?? null;
}

/**
 * The "Notify me" text as the job's `notify`: null (field left out: the user's defaults) when empty,
 * [] for "none", else the comma-separated targets. The server checks each (400 naming `notify`).
 */
export function notifyTargets(text: string): string[] | null {
  const targets = text
    .split(',')
    .map(t => t.trim())
    .filter(t => t);
  if (!targets.length) {
    return null;
  }
  if (targets.length === 1 && targets[0].toLowerCase() === 'none') {
    return [];
  }
  return targets;
}

/** The request body for the form's values, or the messages that stop it being sent. */
export function buildSubmit(values: IFormValues): {
  spec?: IJobSubmit;
  errors: FieldErrors;
} {
  const errors: FieldErrors = {};
  const notebook = values.notebook.trim();
  if (!notebook) {
    errors.notebook =
      'Choose a notebook: open one, or right-click it in the file browser.';
  }
  const gpusText = values.gpus.trim();
  if (!/^[-+]?\d+$/.test(gpusText)) {
    errors.gpus = 'GPUs must be a whole number.';
  }
  let maxRuntime: number | null = null;
  const rt = values.maxRuntime.trim();
  if (rt) {
    const minutes = Number(rt);
    if (!Number.isFinite(minutes) || minutes <= 0) {
      errors.maxRuntime =
        'Max runtime must be a positive number of minutes (or empty for no limit).';
    } else {
      maxRuntime = Math.round(minutes * 60 * 1000) / 1000;
    }
  }
  const names = new Set<string>();
  for (const row of values.rows) {
    const name = row.name.trim();
    if (!name && !row.value.trim()) {
      continue;
    }
    if (!name) {
      errors['parameters.'] = 'Give this parameter a name.';
    } else if (names.has(name)) {
      errors[`parameters.${name}`] = `${name} is given twice.`;
    }
    names.add(name);
  }
  if (Object.keys(errors).length) {
    return { errors };
  }
  const spec: IJobSubmit = {
    notebook,
    gpus: Number(gpusText),
    priority: values.priority,
    preemptible: values.preemptible,
    parameters: rowsToParameters(values.rows)
  };
  if (values.tenant) {
    spec.tenant = values.tenant;
  }
  if (values.gpuType) {
    spec.gpu_type = values.gpuType;
  }
  if (maxRuntime !== null) {
    spec.max_runtime = maxRuntime;
  }
  const notify = notifyTargets(values.notify);
  if (notify !== null) {
    spec.notify = notify;
  }
  return { spec, errors };
}

/** The body that submits a job again exactly as it was asked for. */
export function resubmitBody(d: IJobDetail): IJobSubmit {
  return {
    notebook: d.notebook,
    gpus: d.gpus,
    priority: d.priority,
    tenant: d.tenant,
    parameters: d.parameters,
    max_runtime: d.max_runtime,
    checkpoint_interval: d.checkpoint_interval ?? null,
    preemptible: d.preemptible,
    interactive: d.interactive,
    max_retries: d.max_retries,
    gpu_type: d.gpu_type,
    stall_timeout: d.stall_timeout,
    cpus: d.cpus,
    memory: d.memory,
    notify: resubmitTargets(d.notify),
    // as asked: dependencies that have ended count at once (docs/pipelines.md)
    after: d.after,
    when: d.when
  };
}

/**
 * The job's notification targets to ask for again: its webhooks and mail addresses. Apprise URLs hold
 * secrets the server does not show back (only their scheme), so those are left out; none left: my defaults.
 */
export function resubmitTargets(
  targets: IJobDetail['notify']
): INotifyTarget[] | undefined {
  const kept = (targets ?? []).filter(t => !('apprise' in t));
  return kept.length ? (kept as INotifyTarget[]) : undefined;
}

/** The form's values for submitting a job again with edits (the sidebar form, filled). */
export function formValuesFromJob(d: IJobDetail): Partial<IFormValues> {
  return {
    gpus: String(d.gpus),
    gpuType: d.gpu_type ?? '',
    priority: d.priority,
    tenant: d.tenant,
    preemptible: d.preemptible,
    maxRuntime: d.max_runtime ? String(d.max_runtime / 60) : ''
  };
}

/** The form's values and its messages; `changed` fires on every change. */
export class SubmitFormModel {
  constructor(defaults: { gpus: number; priority: Priority }) {
    this._values = {
      notebook: '',
      gpus: String(defaults.gpus),
      gpuType: '',
      priority: defaults.priority,
      tenant: '',
      preemptible: false,
      maxRuntime: '',
      notify: '',
      rows: []
    };
  }

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get values(): Readonly<IFormValues> {
    return this._values;
  }

  /** Messages by form field (`gpus`, `parameters.lr`, ...). */
  get errors(): Readonly<FieldErrors> {
    return this._errors;
  }

  /** A message about the form as a whole (not tied to a field), or null. */
  get formError(): string | null {
    return this._formError;
  }

  /** What happened last (e.g. "Queued job ..."), or null. */
  get notice(): string | null {
    return this._notice;
  }

  get busy(): boolean {
    return this._busy;
  }
  set busy(value: boolean) {
    this._busy = value;
    this._changed.emit();
  }

  update(patch: Partial<IFormValues>): void {
    this._values = { ...this._values, ...patch };
    // an edited field's old message no longer applies
    const errors = { ...this._errors };
    for (const key of Object.keys(patch)) {
      delete errors[key];
      if (key === 'rows') {
        for (const k of Object.keys(errors)) {
          if (k.startsWith('parameters')) {
            delete errors[k];
          }
        }
      }
    }
    this._errors = errors;
    this._changed.emit();
  }

  /** The notebook the parameter rows were read from ('' before any). */
  get rowsFrom(): string {
    return this._rowsFrom;
  }

  /** Point the form at a notebook, with the rows of its parameters cell. */
  setNotebook(path: string, rows: IParameterRow[]): void {
    this._rowsFrom = path;
    this._values = { ...this._values, notebook: path, rows };
    this._errors = {};
    this._formError = null;
    this._notice = null;
    this._changed.emit();
  }

  /** Apply new defaults (from the settings) to fields still at the old defaults. */
  setDefaults(
    previous: { gpus: number; priority: Priority },
    next: { gpus: number; priority: Priority }
  ): void {
    const patch: Partial<IFormValues> = {};
    if (this._values.gpus === String(previous.gpus)) {
      patch.gpus = String(next.gpus);
    }
    if (this._values.priority === previous.priority) {
      patch.priority = next.priority;
    }
    this._values = { ...this._values, ...patch };
    this._changed.emit();
  }

  setErrors(errors: FieldErrors, formError: string | null = null): void {
    this._errors = errors;
    this._formError = formError;
    this._notice = null;
    this._changed.emit();
  }

  /** Show a refusal: next to its field when the server names one the form has, else for the form. */
  setError(err: unknown): void {
    if (err instanceof GPUSchedError) {
      const field = formField(err.field);
      if (field) {
        this.setErrors({ [field]: err.message });
      } else {
        this.setErrors({}, err.message);
      }
    } else {
      this.setErrors({}, err instanceof Error ? err.message : String(err));
    }
  }

  setNotice(notice: string | null): void {
    this._notice = notice;
    this._errors = {};
    this._formError = null;
    this._changed.emit();
  }

  private _values: IFormValues;
  private _rowsFrom = '';
  private _errors: FieldErrors = {};
  private _formError: string | null = null;
  private _notice: string | null = null;
  private _busy = false;
  private _changed = new Signal<this, void>(this);
}
