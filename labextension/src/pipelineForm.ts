/**
 * "Run a pipeline…" in the panel (docs/lab.md): the dialog's rows of notebooks, in order, turned into
 * a `POST pipelines` body, and a refusal's `field` (`steps[1].notebook`, `edges`, ...) turned back into
 * the place in the dialog where its message is shown. Kept apart from React so both are testable.
 */
import { GPUSchedError } from './api';
import { IJobSubmit, Priority } from './tokens';

export interface IPipelineValues {
  /** One notebook path per step, in order ('' rows are left out). */
  notebooks: string[];
  /** Text of the GPUs input: every step asks for this many. */
  gpus: string;
  priority: Priority;
  /** Each step runs after the previous one (a chain); false: all at once (no edges). */
  chain: boolean;
}

/**
 * Where a message is shown: `step.<row>` (that row), `gpus`, `priority`, `steps` (the list as a
 * whole) or `form` (the dialog as a whole).
 */
export type PipelineErrors = Record<string, string>;

/** The request body for the dialog's values, or the messages that stop it being sent. */
export function buildPipeline(values: IPipelineValues): {
  body?: { steps: IJobSubmit[]; edges: number[][] };
  errors: PipelineErrors;
  /** The row each step came from (rows left empty are skipped). */
  rowOfStep: number[];
} {
  const errors: PipelineErrors = {};
  const rowOfStep: number[] = [];
  values.notebooks.forEach((path, row) => {
    if (path.trim()) {
      rowOfStep.push(row);
    }
  });
  if (rowOfStep.length === 0) {
    errors.steps = 'Add at least one notebook.';
  }
  const gpusText = values.gpus.trim();
  if (!/^[-+]?\d+$/.test(gpusText)) {
    errors.gpus = 'GPUs must be a whole number.';
  }
  if (Object.keys(errors).length) {
    return { errors, rowOfStep };
  }
  const steps = rowOfStep.map(row => ({
    notebook: values.notebooks[row].trim(),
    gpus: Number(gpusText),
    priority: values.priority
  }));
  const edges = values.chain ? steps.slice(1).map((_, i) => [i, i + 1]) : [];
  return { body: { steps, edges }, errors, rowOfStep };
}

/** Shared fields of a step: a message about one of them is shown at the dialog's own input. */
const SHARED = new Set(['gpus', 'priority']);

/**
 * Where a refusal's message goes: `steps[i].gpus` at the GPUs input, any other `steps[i].<field>`
 * at the row step i came from, `steps` / `edges` at the list, anything else for the dialog.
 */
export function pipelineErrors(
  err: unknown,
  rowOfStep: number[]
): PipelineErrors {
  const message = err instanceof Error ? err.message : String(err);
  const field = err instanceof GPUSchedError ? err.field : null;
  const match = field ? /^steps\[(\d+)\](?:\.(\w+))?/.exec(field) : null;
  if (match) {
    const sub = match[2] ?? '';
    if (SHARED.has(sub)) {
      return { [sub]: message };
    }
    const row = rowOfStep[Number(match[1])];
    return row === undefined
      ? { steps: message }
      : { [`step.${row}`]: message };
  }
  if (field === 'steps' || field === 'edges') {
    return { steps: message };
  }
  return { form: message };
}
