/**
 * The one request module: every call to `<base_url>/gpusched/api/...` goes through here.
 *
 * A refused request becomes a `GPUSchedError` carrying the server's
 * `{"error", "message", "field"}`, so the UI can show the message next to the field.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { toJSONText } from './params';
import {
  IApiErrorBody,
  ICluster,
  IJobDetail,
  IJobEvent,
  IJobFilter,
  IJobList,
  IJobSubmit,
  ILogChunk,
  IMe,
  IPipeline,
  IQueues
} from './tokens';

/** `GET jobs/{id}/output`: the file's text and its parsed JSON. */
export interface IExecutedNotebook {
  text: string;
  notebook: Record<string, unknown>;
}

/** Path of the REST API below the server's base URL. */
export const API_PATH = 'gpusched/api';

/** A request the server (or the network) refused. */
export class GPUSchedError extends Error {
  constructor(
    message: string,
    /** HTTP status; 0 when the server could not be reached. */
    readonly status: number,
    /** Machine-readable code from the server, e.g. `invalid_value`. */
    readonly code: string,
    /** The input at fault (`gpus`, `parameters.lr`, ...), or null. */
    readonly field: string | null = null
  ) {
    super(message);
    this.name = 'GPUSchedError';
  }
}

export type QueryValue = string | number | boolean | null | undefined;

/**
 * The URL of an API path: `<baseUrl>gpusched/api/<parts...>?<query>`.
 * Path parts are URI-encoded; query entries that are null/undefined are left out.
 */
export function apiUrl(
  baseUrl: string,
  parts: string[],
  query: Record<string, QueryValue> = {}
): string {
  const url = URLExt.join(baseUrl, API_PATH, ...parts.map(encodeURIComponent));
  const entries = Object.entries(query).filter(
    ([, v]) => v !== undefined && v !== null && v !== ''
  );
  if (entries.length === 0) {
    return url;
  }
  const qs = entries
    .map(
      ([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`
    )
    .join('&');
  return `${url}?${qs}`;
}

/** Turn a non-2xx response into a GPUSchedError with the server's own words. */
export async function errorFromResponse(
  response: Response
): Promise<GPUSchedError> {
  let text = '';
  try {
    text = await response.text();
  } catch {
    // body unreadable: fall through to the status line
  }
  let body: Partial<IApiErrorBody> | null = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (
    body &&
    typeof body === 'object' &&
    typeof body.message === 'string' &&
    body.message
  ) {
    return new GPUSchedError(
      body.message,
      response.status,
      typeof body.error === 'string' ? body.error : 'error',
      typeof body.field === 'string' ? body.field : null
    );
  }
  if (response.status === 404) {
    return new GPUSchedError(
      'The jupyter-gpusched server extension is not answering (404). ' +
        'Is it installed and enabled on this Jupyter server? ' +
        'Check `jupyter server extension list`.',
      404,
      'not_found'
    );
  }
  if (response.status === 403) {
    return new GPUSchedError(
      'The server refused the request (403): your session may have expired; reload the page.',
      403,
      'forbidden'
    );
  }
  const reason = response.statusText || 'error';
  return new GPUSchedError(
    `The server answered ${response.status} ${reason}.`,
    response.status,
    'http_error'
  );
}

/** A thin, typed wrapper over the REST API. */
export class GPUSchedAPI {
  constructor(serverSettings?: ServerConnection.ISettings) {
    this.serverSettings = serverSettings ?? ServerConnection.makeSettings();
  }

  readonly serverSettings: ServerConnection.ISettings;

  /** The URL of an API path (see `apiUrl`). */
  url(parts: string[], query: Record<string, QueryValue> = {}): string {
    return apiUrl(this.serverSettings.baseUrl, parts, query);
  }

  /** Send a request; resolve with the response when it is 2xx, else reject with GPUSchedError. */
  async request(
    parts: string[],
    init: RequestInit = {},
    query: Record<string, QueryValue> = {}
  ): Promise<Response> {
    const url = this.url(parts, query);
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(
        url,
        init,
        this.serverSettings
      );
    } catch (err) {
      const detail = err instanceof Error ? err.message : String(err);
      throw new GPUSchedError(
        `Cannot reach the Jupyter server (${detail}).`,
        0,
        'network'
      );
    }
    if (!response.ok) {
      throw await errorFromResponse(response);
    }
    return response;
  }

  /** Send a request and parse its JSON body. */
  async requestJSON<T>(
    parts: string[],
    init: RequestInit = {},
    query: Record<string, QueryValue> = {}
  ): Promise<T> {
    const response = await this.request(parts, init, query);
    try {
      return (await response.json()) as T;
    } catch {
      throw new GPUSchedError(
        `The server sent a response that is not JSON (${response.status}).`,
        response.status,
        'bad_response'
      );
    }
  }

  listJobs(filter: IJobFilter = {}): Promise<IJobList> {
    return this.requestJSON<IJobList>(
      ['jobs'],
      {},
      {
        state: filter.state,
        tenant: filter.tenant,
        mine: filter.mine ? 'true' : undefined,
        limit: filter.limit,
        offset: filter.offset,
        sort: filter.sort,
        order: filter.order,
        q: filter.q || undefined,
        interactive:
          filter.interactive === undefined
            ? undefined
            : String(filter.interactive)
      }
    );
  }

  getJob(id: string): Promise<IJobDetail> {
    return this.requestJSON<IJobDetail>(['jobs', id]);
  }

  submit(spec: IJobSubmit): Promise<IJobDetail> {
    return this.requestJSON<IJobDetail>(['jobs'], {
      method: 'POST',
      body: toJSONText(spec), // keeps `3.0` a float for the notebook
      headers: { 'Content-Type': 'application/json' }
    });
  }

  /** Submit a pipeline: steps (submit bodies) and edges [from, to] (docs/pipelines.md). */
  submitPipeline(body: {
    steps: IJobSubmit[];
    edges: number[][];
  }): Promise<IPipeline> {
    return this.requestJSON<IPipeline>(['pipelines'], {
      method: 'POST',
      body: toJSONText(body),
      headers: { 'Content-Type': 'application/json' }
    });
  }

  getPipeline(id: string): Promise<IPipeline> {
    return this.requestJSON<IPipeline>(['pipelines', id]);
  }

  cancel(id: string): Promise<IJobDetail> {
    return this.requestJSON<IJobDetail>(['jobs', id], { method: 'DELETE' });
  }

  async events(id: string): Promise<IJobEvent[]> {
    const body = await this.requestJSON<{ events: IJobEvent[] }>([
      'jobs',
      id,
      'events'
    ]);
    return body.events;
  }

  /**
   * The log from byte `offset` on, and the offset to ask for next. A log now
   * shorter than `offset` was trimmed on the server (its head dropped past the
   * size cap): it is read again from its new start, whose first line says so.
   */
  async log(id: string, offset = 0): Promise<ILogChunk> {
    let response: Response;
    try {
      response = await this.request(
        ['jobs', id, 'log'],
        {},
        { offset: offset || undefined }
      );
    } catch (err) {
      if (!(err instanceof GPUSchedError) || err.status !== 416 || !offset) {
        throw err;
      }
      offset = 0;
      response = await this.request(['jobs', id, 'log']);
    }
    const text = await response.text();
    const header = response.headers.get('X-Log-Offset');
    const next =
      header !== null && /^\d+$/.test(header)
        ? Number(header)
        : offset + utf8Length(text);
    return { text, offset: next };
  }

  /**
   * The executed notebook: the file's text as the server sent it (what a download saves)
   * and its parsed nbformat JSON (what the viewer renders).
   */
  async output(id: string): Promise<IExecutedNotebook> {
    const response = await this.request(['jobs', id, 'output']);
    const text = await response.text();
    let notebook: unknown;
    try {
      notebook = JSON.parse(text);
    } catch {
      notebook = null;
    }
    if (!notebook || typeof notebook !== 'object' || Array.isArray(notebook)) {
      throw new GPUSchedError(
        `The executed notebook of job ${id} is not a notebook (not JSON).`,
        response.status,
        'bad_response'
      );
    }
    return { text, notebook: notebook as Record<string, unknown> };
  }

  queues(): Promise<IQueues> {
    return this.requestJSON<IQueues>(['queues']);
  }

  cluster(): Promise<ICluster> {
    return this.requestJSON<ICluster>(['cluster']);
  }

  me(): Promise<IMe> {
    return this.requestJSON<IMe>(['me']);
  }
}

function utf8Length(text: string): number {
  return new TextEncoder().encode(text).length;
}
