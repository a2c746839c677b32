import { GPUSchedAPI } from '../api';
import { IJobTransition, JobsModel } from '../model';
import { IJob } from '../tokens';
import { FakeServer, json, makeJob as job } from './fakeServer';

const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms));

describe('JobsModel', () => {
  let server: FakeServer;
  let jobs: IJob[];
  let model: JobsModel;

  beforeEach(() => {
    server = new FakeServer();
    jobs = [];
    server.routes['GET jobs'] = req => {
      const state = req.url.searchParams.get('state');
      const mine = req.url.searchParams.get('mine') === 'true';
      const interactive = req.url.searchParams.get('interactive');
      const matching = jobs.filter(
        j =>
          (!state || j.state === state) &&
          (!mine || j.owner === 'me') &&
          (interactive === null || !!j.interactive === (interactive === 'true'))
      );
      const limit = Number(req.url.searchParams.get('limit') ?? 1000);
      return json({
        jobs: matching.slice(0, limit),
        total: matching.length,
        next_offset: null
      });
    };
    server.routes['GET cluster'] = () =>
      json({ total_gpus: 4, free_gpus: 3, nodes: [], pools: [] });
    server.routes['GET queues'] = () =>
      json({ policy: 'dynamic', queues: { default: {}, vision: {} } });
    model = new JobsModel({
      api: new GPUSchedAPI(server.settings),
      refreshInterval: 0.1
    });
  });

  afterEach(() => model.dispose());

  it('loads jobs, cluster, queues and my counts in one refresh', async () => {
    jobs = [
      job('a', 'RUNNING'),
      job('b', 'QUEUED'),
      job('c', 'QUEUED', { owner: 'someone else' })
    ];
    server.routes['GET jobs/b'] = () =>
      json({
        ...jobs[1],
        position: 0,
        estimated_start: '2026-01-01T00:05:00Z'
      });
    server.routes['GET jobs/c'] = () =>
      json({ ...jobs[2], position: 1, estimated_start: null });
    let changed = 0;
    model.changed.connect(() => changed++);
    expect(model.loaded).toBe(false);
    await model.refresh();
    expect(model.loaded).toBe(true);
    expect(model.jobs.map(j => j.id)).toEqual(['a', 'b', 'c']);
    expect(model.total).toBe(3);
    expect(model.cluster?.free_gpus).toBe(3);
    expect(Object.keys(model.queues?.queues ?? {})).toEqual([
      'default',
      'vision'
    ]);
    expect(model.mine).toEqual({ running: 1, starting: 0, queued: 1 });
    expect(model.detail('b')?.position).toBe(0);
    expect(model.detail('a')).toBeUndefined(); // only queued jobs need a position
    expect(model.error).toBeNull();
    expect(changed).toBe(1);
  });

  it('counts my ADMITTED job as starting (it is neither running nor queued)', async () => {
    jobs = [
      job('a', 'ADMITTED'),
      job('b', 'ADMITTED', { owner: 'someone else' })
    ];
    await model.refresh();
    expect(model.mine).toEqual({ running: 0, starting: 1, queued: 0 });
    expect(
      server.calls('jobs').map(r => r.url.searchParams.get('state'))
    ).toContain('ADMITTED');
  });

  it('counts my GPU kernels apart from my jobs', async () => {
    jobs = [
      job('a', 'RUNNING'),
      job('k1', 'RUNNING', { interactive: true, notebook: 'kernel:1' }),
      job('k2', 'QUEUED', { interactive: true, notebook: 'kernel:2' }),
      job('k3', 'RUNNING', { interactive: true, owner: 'someone else' })
    ];
    await model.refresh();
    expect(model.mine).toEqual({
      running: 1,
      starting: 0,
      queued: 0,
      kernels: 1,
      kernelsQueued: 1
    });
    expect(
      server
        .calls('jobs')
        .filter(r => r.url.searchParams.get('mine') === 'true')
        .map(r => r.url.searchParams.get('interactive'))
    ).toEqual(['false', 'false', 'false', 'true', 'true']);
  });

  it('reports state transitions between refreshes, not on the first load', async () => {
    const seen: IJobTransition[][] = [];
    model.transitions.connect((_, moves) => seen.push(moves));
    jobs = [job('a', 'QUEUED')];
    server.routes['GET jobs/a'] = () =>
      json({ ...jobs[0], position: 0, estimated_start: null });
    await model.refresh();
    expect(seen).toEqual([]);

    jobs = [job('a', 'RUNNING')];
    await model.refresh();
    expect(seen).toHaveLength(1);
    expect(seen[0].map(m => [m.job.id, m.from, m.to])).toEqual([
      ['a', 'QUEUED', 'RUNNING']
    ]);

    await model.refresh(); // nothing moved
    expect(seen).toHaveLength(1);

    jobs = [job('b', 'QUEUED'), job('a', 'SUCCEEDED')];
    server.routes['GET jobs/b'] = () =>
      json({ ...jobs[0], position: 0, estimated_start: null });
    await model.refresh();
    expect(seen[1].map(m => [m.job.id, m.from, m.to])).toEqual([
      ['b', null, 'QUEUED'],
      ['a', 'RUNNING', 'SUCCEEDED']
    ]);
  });

  it('keeps the last good data and records the error when a refresh fails, then recovers', async () => {
    jobs = [job('a', 'RUNNING')];
    await model.refresh();
    server.routes['GET cluster'] = () =>
      json(
        {
          error: 'internal',
          message: 'internal server error; see the server log',
          field: null
        },
        500
      );
    await model.refresh();
    expect(model.error).toBe('internal server error; see the server log');
    expect(model.jobs.map(j => j.id)).toEqual(['a']);
    server.routes['GET cluster'] = () =>
      json({ total_gpus: 4, free_gpus: 4, nodes: [], pools: [] });
    await model.refresh();
    expect(model.error).toBeNull();
    expect(model.cluster?.free_gpus).toBe(4);
  });

  it('learns who I am with the queues, and copes with a server that cannot say', async () => {
    server.routes['GET me'] = () =>
      json({
        name: 'alice',
        admin: false,
        tenants: ['vision'],
        default_tenant: 'vision'
      });
    await model.refresh();
    expect(model.me).toEqual({
      name: 'alice',
      admin: false,
      tenants: ['vision'],
      default_tenant: 'vision'
    });
    await model.refresh();
    expect(server.calls('me')).toHaveLength(1); // not on every poll

    const older = new JobsModel({
      api: new GPUSchedAPI(server.settings),
      refreshInterval: 0.1
    });
    delete server.routes['GET me']; // a server from before `GET me`: 404
    await older.refresh();
    expect(older.me).toBeNull();
    expect(older.error).toBeNull();
    older.dispose();
  });

  it('asks for the queues at most once a minute', async () => {
    await model.refresh();
    await model.refresh();
    expect(server.calls('queues')).toHaveLength(1);
  });

  it('polls after start() and stops after stop()', async () => {
    expect(model.isPolling).toBe(false);
    model.start();
    expect(model.isPolling).toBe(true);
    await sleep(450);
    const whilePolling = server.calls('jobs').length;
    expect(whilePolling).toBeGreaterThanOrEqual(3 * 3); // list + 2 counts, at least 3 ticks
    model.stop();
    expect(model.isPolling).toBe(false);
    await sleep(50);
    const afterStop = server.calls('jobs').length;
    await sleep(350);
    expect(server.calls('jobs').length).toBe(afterStop);
  });

  it('backs off while the server fails', async () => {
    server.offline = true;
    model.start();
    await sleep(1000);
    model.stop();
    // at a steady 0.1 s it would be ~10 ticks; backing off doubles (or more) each wait
    const ticks = server.calls('cluster').length;
    expect(ticks).toBeGreaterThanOrEqual(2);
    expect(ticks).toBeLessThan(8);
    expect(model.error).toMatch(/Cannot reach the Jupyter server/);
  });

  it('restarts polling at a new interval', async () => {
    model.start();
    model.refreshInterval = 10;
    expect(model.refreshInterval).toBe(10);
    expect(model.isPolling).toBe(true);
    await sleep(300);
    // first tick runs at once; the next one is 10 s away
    expect(server.calls('cluster').length).toBeLessThanOrEqual(2);
  });

  it('stops polling when disposed', async () => {
    model.start();
    await sleep(150);
    model.dispose();
    expect(model.isDisposed).toBe(true);
    const n = server.requests.length;
    await sleep(300);
    expect(server.requests.length).toBe(n);
  });

  it('shows a submitted job before the next refresh', () => {
    let changed = 0;
    model.changed.connect(() => changed++);
    model.add({
      ...job('new', 'QUEUED'),
      parameters: {},
      max_retries: 2,
      gpu_type: null,
      position: 3,
      estimated_start: null,
      stall_timeout: null,
      cpus: 0,
      memory: 0,
      activity: null,
      gpu_hours: { allocated: 0, idle: 0, waiting_on_data: 0 }
    });
    expect(model.jobs[0].id).toBe('new');
    expect(model.detail('new')?.position).toBe(3);
    expect(model.total).toBe(1);
    expect(changed).toBe(1);
  });
});
