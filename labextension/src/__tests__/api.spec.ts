import { apiUrl, errorFromResponse, GPUSchedAPI, GPUSchedError } from '../api';
import { rowsToParameters } from '../params';
import { FakeServer, json } from './fakeServer';

describe('apiUrl', () => {
  it('joins the base URL, the API path and encoded parts', () => {
    expect(apiUrl('http://h/base/', ['jobs'])).toBe(
      'http://h/base/gpusched/api/jobs'
    );
    expect(apiUrl('http://h/base', ['jobs', 'a b/c', 'log'])).toBe(
      'http://h/base/gpusched/api/jobs/a%20b%2Fc/log'
    );
  });

  it('adds only the query entries that have a value', () => {
    const url = apiUrl('http://h/', ['jobs'], {
      state: 'QUEUED',
      mine: 'true',
      tenant: undefined,
      limit: 5,
      x: null,
      y: ''
    });
    expect(url).toBe(
      'http://h/gpusched/api/jobs?state=QUEUED&mine=true&limit=5'
    );
  });

  it('encodes query values', () => {
    expect(apiUrl('http://h/', ['jobs'], { tenant: 'team a&b' })).toBe(
      'http://h/gpusched/api/jobs?tenant=team%20a%26b'
    );
  });
});

describe('errorFromResponse', () => {
  it("carries the server's error, message and field", async () => {
    const err = await errorFromResponse(
      json(
        {
          error: 'invalid_value',
          message: '99 GPUs requested but the cluster has 2',
          field: 'gpus'
        },
        400
      )
    );
    expect(err).toBeInstanceOf(GPUSchedError);
    expect(err.message).toBe('99 GPUs requested but the cluster has 2');
    expect(err.status).toBe(400);
    expect(err.code).toBe('invalid_value');
    expect(err.field).toBe('gpus');
  });

  it('has a null field when the server names none', async () => {
    const err = await errorFromResponse(
      json({ error: 'bad_json', message: 'not JSON', field: null }, 400)
    );
    expect(err.field).toBeNull();
  });

  it('explains a 404 that is not ours (extension not enabled)', async () => {
    const err = await errorFromResponse(
      new Response('<html>404</html>', { status: 404, statusText: 'Not Found' })
    );
    expect(err.status).toBe(404);
    expect(err.message).toMatch(/server extension/);
  });

  it('falls back to the status line for other non-JSON bodies', async () => {
    const err = await errorFromResponse(
      new Response('oops', { status: 502, statusText: 'Bad Gateway' })
    );
    expect(err.message).toBe('The server answered 502 Bad Gateway.');
    expect(err.code).toBe('http_error');
  });
});

describe('GPUSchedAPI', () => {
  let server: FakeServer;
  let api: GPUSchedAPI;

  beforeEach(() => {
    server = new FakeServer();
    api = new GPUSchedAPI(server.settings);
  });

  it('lists jobs under the base URL with filters and the token', async () => {
    server.routes['GET jobs'] = () =>
      json({ jobs: [], total: 0, next_offset: null });
    await api.listJobs({ state: 'RUNNING', mine: true, limit: 1 });
    const [req] = server.calls('jobs');
    expect(req.url.pathname).toBe('/lab-base/gpusched/api/jobs');
    expect(req.url.searchParams.get('state')).toBe('RUNNING');
    expect(req.url.searchParams.get('mine')).toBe('true');
    expect(req.url.searchParams.get('limit')).toBe('1');
    expect(req.url.searchParams.has('tenant')).toBe(false);
    expect(req.headers.get('Authorization')).toBe('token secret');
  });

  it('posts a submit as JSON and returns the job', async () => {
    server.routes['POST jobs'] = req =>
      json({ id: 'abc', state: 'QUEUED', ...JSON.parse(req.body) }, 201);
    const job = await api.submit({
      notebook: 'train.ipynb',
      gpus: 2,
      parameters: { lr: 0.1 }
    });
    expect(job.id).toBe('abc');
    const [req] = server.calls('jobs', 'POST');
    expect(JSON.parse(req.body)).toEqual({
      notebook: 'train.ipynb',
      gpus: 2,
      parameters: { lr: 0.1 }
    });
    expect(req.headers.get('Content-Type')).toBe('application/json');
  });

  it('sends whole floats typed as floats as JSON floats', async () => {
    server.routes['POST jobs'] = req =>
      json({ id: 'abc', state: 'QUEUED', ...JSON.parse(req.body) }, 201);
    await api.submit({
      notebook: 'train.ipynb',
      parameters: rowsToParameters([{ name: 'seconds', value: '3.0' }])
    });
    expect(server.calls('jobs', 'POST')[0].body).toContain('"seconds":3.0');
  });

  it('rejects a refused submit with the field at fault', async () => {
    server.routes['POST jobs'] = () =>
      json(
        {
          error: 'invalid_value',
          message: "parameter name 'for' is not a valid Python identifier",
          field: 'parameters.for'
        },
        400
      );
    await expect(
      api.submit({ notebook: 'n.ipynb', parameters: { for: 1 } })
    ).rejects.toMatchObject({
      name: 'GPUSchedError',
      status: 400,
      field: 'parameters.for',
      message: "parameter name 'for' is not a valid Python identifier"
    });
  });

  it('cancels with DELETE and maps 409', async () => {
    server.routes['DELETE jobs/j1'] = () =>
      json(
        {
          error: 'conflict',
          message: 'job j1 already ended (SUCCEEDED); nothing to cancel',
          field: 'id'
        },
        409
      );
    await expect(api.cancel('j1')).rejects.toMatchObject({
      status: 409,
      code: 'conflict',
      field: 'id'
    });
    expect(server.calls('jobs/j1', 'DELETE')).toHaveLength(1);
  });

  it('reads the log from an offset and returns the next offset from X-Log-Offset', async () => {
    server.routes['GET jobs/j1/log'] = req =>
      new Response('épochs 1\n', {
        status: 200,
        headers: {
          'Content-Type': 'text/plain',
          'X-Log-Offset': String(
            Number(req.url.searchParams.get('offset') ?? 0) + 10
          )
        }
      });
    const first = await api.log('j1');
    expect(first).toEqual({ text: 'épochs 1\n', offset: 10 });
    expect(server.calls('jobs/j1/log')[0].url.searchParams.has('offset')).toBe(
      false
    );
    const next = await api.log('j1', 10);
    expect(next.offset).toBe(20);
    expect(server.calls('jobs/j1/log')[1].url.searchParams.get('offset')).toBe(
      '10'
    );
  });

  it('reads a trimmed log again from its new start after a 416', async () => {
    server.routes['GET jobs/j1/log'] = req =>
      req.url.searchParams.has('offset')
        ? json(
            {
              error: 'invalid_value',
              message: 'offset 900 is past the end of the log (40 bytes)',
              field: 'offset'
            },
            416
          )
        : new Response('[gpusched] its first 1000 bytes were dropped\n', {
            status: 200,
            headers: { 'X-Log-Offset': '40' }
          });
    const chunk = await api.log('j1', 900);
    expect(chunk).toEqual({
      text: '[gpusched] its first 1000 bytes were dropped\n',
      offset: 40
    });
    expect(server.calls('jobs/j1/log')).toHaveLength(2);
  });

  it('counts UTF-8 bytes when the offset header is missing', async () => {
    server.routes['GET jobs/j1/log'] = () => new Response('é', { status: 200 });
    expect((await api.log('j1', 5)).offset).toBe(7);
  });

  it('fetches the executed notebook, queues and cluster', async () => {
    server.routes['GET jobs/j1/output'] = () =>
      json({ nbformat: 4, cells: [] });
    server.routes['GET queues'] = () =>
      json({ policy: 'dynamic', queues: { default: { quota: 2 } } });
    server.routes['GET cluster'] = () => json({ total_gpus: 2, free_gpus: 1 });
    const output = await api.output('j1');
    expect(output.notebook.nbformat).toBe(4);
    expect(output.text).toBe('{"nbformat":4,"cells":[]}'); // the bytes a download saves
    expect(Object.keys((await api.queues()).queues)).toEqual(['default']);
    expect((await api.cluster()).free_gpus).toBe(1);
  });

  it('refuses an executed notebook that is not JSON', async () => {
    server.routes['GET jobs/j1/output'] = () =>
      new Response('not json', { status: 200 });
    await expect(api.output('j1')).rejects.toMatchObject({
      code: 'bad_response'
    });
  });

  it('turns a network failure into a status-0 error', async () => {
    server.offline = true;
    await expect(api.cluster()).rejects.toMatchObject({
      status: 0,
      code: 'network'
    });
  });

  it('reports a 200 that is not JSON', async () => {
    server.routes['GET cluster'] = () =>
      new Response('<html/>', { status: 200 });
    await expect(api.cluster()).rejects.toMatchObject({ code: 'bad_response' });
  });
});
