/** A fake `fetch` for ServerConnection: routes by method + path, records every request. */
import { ServerConnection } from '@jupyterlab/services';

import { IJob, JobState } from '../tokens';

export interface IRecorded {
  method: string;
  url: URL;
  body: string;
  headers: Headers;
}

export type Route = (req: IRecorded) => Response | Promise<Response>;

export function json(
  body: unknown,
  status = 200,
  headers: Record<string, string> = {}
): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'Content-Type': 'application/json', ...headers }
  });
}

export class FakeServer {
  readonly requests: IRecorded[] = [];
  routes: Record<string, Route> = {};
  /** When set, every request fails as if the network were down. */
  offline = false;

  readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings(
    {
      baseUrl: 'http://localhost:8888/lab-base/',
      wsUrl: 'ws://localhost:8888/lab-base/',
      token: 'secret',
      fetch: (input: RequestInfo | URL, init?: RequestInit) =>
        this.handle(input as Request, init)
    }
  );

  /** Requests whose path ends with `suffix` (after gpusched/api/). */
  calls(suffix: string, method = 'GET'): IRecorded[] {
    return this.requests.filter(
      r =>
        r.method === method &&
        r.url.pathname.endsWith(`/gpusched/api/${suffix}`)
    );
  }

  private async handle(
    request: Request,
    _init?: RequestInit
  ): Promise<Response> {
    const rec: IRecorded = {
      method: request.method,
      url: new URL(request.url),
      body:
        request.method === 'GET' || request.method === 'DELETE'
          ? ''
          : await request.text(),
      headers: request.headers
    };
    this.requests.push(rec);
    if (this.offline) {
      throw new TypeError('Failed to fetch');
    }
    const path = rec.url.pathname.replace(/^.*\/gpusched\/api\//, '');
    const route = this.routes[`${rec.method} ${path}`];
    if (!route) {
      return json(
        {
          error: 'not_found',
          message: `no API endpoint at ${rec.url.pathname}`,
          field: null
        },
        404
      );
    }
    return route(rec);
  }
}

/** A job as the API lists it; `extra` overrides any field. */
export function makeJob(
  id: string,
  state: JobState,
  extra: Partial<IJob> = {}
): IJob {
  return {
    id,
    state,
    notebook: `${id}.ipynb`,
    gpus: 1,
    priority: 'normal',
    tenant: 'default',
    owner: 'me',
    created: '2026-01-01T00:00:00.000+00:00',
    started: null,
    finished: null,
    reason: '',
    preemptible: false,
    max_runtime: null,
    runtime_estimate: {
      seconds: null,
      source: null,
      basis: null,
      samples: null
    },
    allocation: [],
    borrowed: false,
    attempts: 0,
    preemptions: 0,
    progress: null,
    message: '',
    stalled_since: null,
    waiting_on_data: null,
    after: [],
    when: 'succeeded',
    pipeline_id: null,
    schedule_id: null,
    ...extra
  };
}
