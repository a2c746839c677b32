/**
 * Papermill parameters: read `name = value` rows from a notebook's cell tagged `parameters`,
 * and turn the text of a value the user typed into the JSON value the API takes.
 */

/**
 * A float typed with a decimal point or exponent whose value is whole (`3.0`, `1e3`): JSON has
 * no way to keep it a float, so it is wrapped here and written as `3.0` by `toJSONText`, and
 * the notebook gets `3.0`, not the int `3`.
 */
export class PyFloat {
  constructor(readonly value: number) {}

  toString(): string {
    return formatFloat(this.value);
  }
}

function formatFloat(v: number): string {
  const text = String(v);
  return /[.eE]|Infinity|NaN/.test(text) ? text : `${text}.0`;
}

/** JSON text of a request body, writing PyFloat values as floats (`3.0`). */
export function toJSONText(body: unknown): string {
  // a marker no user string can hold by chance: NUL plus a fresh random tag
  const tag = `gpusched-float-${Math.random().toString(36).slice(2)}-${Date.now().toString(36)}:`;
  const text = JSON.stringify(body, (_key, value) =>
    value instanceof PyFloat ? `\u0000${tag}${formatFloat(value.value)}` : value
  );
  return text
    .split(`"\\u0000${tag}`)
    .map((part, i) => (i === 0 ? part : part.replace('"', '')))
    .join('');
}

/** One editable parameter row. */
export interface IParameterRow {
  name: string;
  /** The value as Python-ish text, e.g. `0.1`, `'adam'`, `True`, `[1, 2]`. */
  value: string;
}

/** A notebook cell as found in nbformat JSON or a cell model's `toJSON()`. */
export interface ICellLike {
  cell_type?: string;
  source?: string | string[];
  metadata?: { tags?: unknown } & Record<string, unknown>;
}

const ASSIGNMENT = /^([A-Za-z_][A-Za-z0-9_]*)\s*(?::\s*[^=]+?)?\s*=\s*(.+)$/;

/** The source of the first code cell tagged `parameters`, or null. */
export function parametersSource(
  cells: ReadonlyArray<ICellLike>
): string | null {
  for (const cell of cells) {
    const tags = cell.metadata?.tags;
    if (
      (cell.cell_type ?? 'code') === 'code' &&
      Array.isArray(tags) &&
      tags.includes('parameters')
    ) {
      const src = cell.source ?? '';
      return Array.isArray(src) ? src.join('') : src;
    }
  }
  return null;
}

/**
 * `name = value` rows of a parameters cell, in order. Comments, blank lines and lines
 * that are not a simple assignment are skipped; a trailing `# comment` is dropped.
 */
export function parseParametersCell(source: string): IParameterRow[] {
  const rows: IParameterRow[] = [];
  const seen = new Set<string>();
  for (const raw of source.split(/\r?\n/)) {
    if (/^\s/.test(raw)) {
      continue; // continuation or indented code: not a top-level parameter
    }
    const match = ASSIGNMENT.exec(stripComment(raw).trim());
    if (!match || match[2].startsWith('=')) {
      continue;
    }
    const [, name, value] = match;
    if (seen.has(name)) {
      rows.splice(
        rows.findIndex(r => r.name === name),
        1
      );
    }
    seen.add(name);
    rows.push({ name, value: value.trim() });
  }
  return rows;
}

/** Drop a trailing `# comment`, leaving `#` inside quotes alone. */
export function stripComment(line: string): string {
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === '\\') {
        i++;
      } else if (c === quote) {
        quote = null;
      }
    } else if (c === '"' || c === "'") {
      quote = c;
    } else if (c === '#') {
      return line.slice(0, i).trimEnd();
    }
  }
  return line;
}

/**
 * The JSON value of a typed parameter value: numbers, True/False/None (or true/false/null),
 * quoted strings, JSON lists and objects (Python quotes and literals accepted);
 * anything else is sent as the string typed.
 */
export function parseValue(text: string): unknown {
  const t = text.trim();
  if (t === '') {
    return '';
  }
  if (/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(t)) {
    const n = Number(t);
    return /[.eE]/.test(t) && Number.isInteger(n) && Number.isFinite(n)
      ? new PyFloat(n)
      : n;
  }
  if (t === 'True' || t === 'true') {
    return true;
  }
  if (t === 'False' || t === 'false') {
    return false;
  }
  if (t === 'None' || t === 'null') {
    return null;
  }
  const quoted = /^(['"])(.*)\1$/s.exec(t);
  if (quoted && !quoted[2].includes(quoted[1])) {
    return quoted[2];
  }
  if (/^[[{]/.test(t)) {
    try {
      return JSON.parse(pythonToJson(t));
    } catch {
      return t;
    }
  }
  return t;
}

/** Best-effort rewrite of a Python literal's quotes and constants into JSON. */
function pythonToJson(t: string): string {
  let out = '';
  let quote: string | null = null;
  for (let i = 0; i < t.length; i++) {
    const c = t[i];
    if (quote) {
      if (c === '\\' && i + 1 < t.length) {
        out += c + t[++i];
      } else if (c === quote) {
        out += '"';
        quote = null;
      } else if (c === '"') {
        out += '\\"';
      } else {
        out += c;
      }
    } else if (c === "'" || c === '"') {
      quote = c;
      out += '"';
    } else {
      out += c;
    }
  }
  return out
    .replace(/\bTrue\b/g, 'true')
    .replace(/\bFalse\b/g, 'false')
    .replace(/\bNone\b/g, 'null')
    .replace(/,\s*([\]}])/g, '$1');
}

/** The `parameters` object for the API from the rows (blank names skipped). */
export function rowsToParameters(
  rows: ReadonlyArray<IParameterRow>
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const row of rows) {
    const name = row.name.trim();
    if (name) {
      out[name] = parseValue(row.value);
    }
  }
  return out;
}

/** Rows showing a job's parameters (for a resubmit), values as Python-ish text. */
export function parametersToRows(
  parameters: Record<string, unknown>
): IParameterRow[] {
  return Object.entries(parameters).map(([name, v]) => ({
    name,
    value: formatValue(v)
  }));
}

export function formatValue(v: unknown): string {
  if (v instanceof PyFloat) {
    return v.toString();
  }
  if (v === null || v === undefined) {
    return 'None';
  }
  if (v === true) {
    return 'True';
  }
  if (v === false) {
    return 'False';
  }
  if (typeof v === 'string') {
    return JSON.stringify(v);
  }
  return JSON.stringify(v);
}
