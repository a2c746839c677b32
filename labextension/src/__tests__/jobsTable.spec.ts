import * as fs from 'fs';
import * as yaml from 'js-yaml';
import * as path from 'path';

import { GPUSchedAPI } from '../api';
import { JobsTable } from '../components/JobsView';
import {
  aboutMinutes,
  ariaSort,
  cellText,
  COLUMNS,
  DEFAULT_QUERY,
  etaText,
  goToPage,
  mergePage,
  NO_ETA_REASON,
  pageInfo,
  setFilter,
  STATE_CHOICES,
  toggleSort,
  toJobFilter,
  visibleColumns
} from '../jobsTable';
import { JOB_STATES } from '../tokens';
import { FakeServer, json, makeJob } from './fakeServer';

const column = (id: string) => COLUMNS.find(c => c.id === id)!;

describe('sorting', () => {
  it('flips the order on the same column and starts a new one at its natural order', () => {
    expect(DEFAULT_QUERY.sort).toBe('created');
    expect(DEFAULT_QUERY.order).toBe('desc');
    let q = toggleSort({ ...DEFAULT_QUERY, offset: 100 }, 'notebook');
    expect([q.sort, q.order, q.offset]).toEqual(['notebook', 'asc', 0]);
    q = toggleSort(q, 'notebook');
    expect(q.order).toBe('desc');
    q = toggleSort(q, 'gpus');
    expect([q.sort, q.order]).toEqual(['gpus', 'desc']);
    q = toggleSort(q, 'gpus');
    expect(q.order).toBe('asc');
  });

  it('says the order in aria-sort on the sorted column only', () => {
    const q = toggleSort(DEFAULT_QUERY, 'notebook');
    expect(ariaSort(q, column('name'))).toBe('ascending');
    expect(ariaSort(toggleSort(q, 'notebook'), column('name'))).toBe(
      'descending'
    );
    expect(ariaSort(q, column('submitted'))).toBe('none');
    expect(ariaSort(q, column('eta'))).toBe('none');
  });
});

describe('filters and the request', () => {
  it('sends only what is set, and a filter starts again on page 1', () => {
    expect(toJobFilter(DEFAULT_QUERY)).toEqual({
      limit: 50,
      offset: 0,
      sort: 'created',
      order: 'desc'
    });
    const q = setFilter(
      { ...DEFAULT_QUERY, offset: 150 },
      { state: 'QUEUED', tenant: 'team-a', mine: true, text: '  train ' }
    );
    expect(toJobFilter(q)).toEqual({
      limit: 50,
      offset: 0,
      sort: 'created',
      order: 'desc',
      state: 'QUEUED',
      tenant: 'team-a',
      mine: true,
      q: 'train'
    });
  });

  it('offers every state of the one list, which is the API enum', () => {
    expect(STATE_CHOICES).toEqual(['', ...JOB_STATES]);
    const spec = yaml.load(
      fs.readFileSync(
        path.join(__dirname, '../../../jupyter_gpusched/server/openapi.yaml'),
        'utf8'
      )
    ) as { components: { schemas: { State: { enum: string[] } } } };
    expect([...JOB_STATES].sort()).toEqual(
      [...spec.components.schemas.State.enum].sort()
    );
  });

  it('shows the owner column to admins only', () => {
    expect(visibleColumns(true).map(c => c.id)).toContain('owner');
    expect(visibleColumns(false).map(c => c.id)).not.toContain('owner');
  });
});

describe('paging', () => {
  it('counts pages and rows, and clamps the page asked for', () => {
    const q = { ...DEFAULT_QUERY, limit: 50 };
    expect(pageInfo(q, 2500)).toEqual({
      page: 1,
      pages: 50,
      first: 1,
      last: 50,
      total: 2500
    });
    const last = goToPage(q, 50, 2500);
    expect(last.offset).toBe(2450);
    expect(pageInfo(last, 2500)).toMatchObject({
      page: 50,
      first: 2451,
      last: 2500
    });
    expect(goToPage(q, 999, 2500).offset).toBe(2450);
    expect(goToPage(q, 0, 2500).offset).toBe(0);
    expect(goToPage(q, Infinity, 120).offset).toBe(100);
    expect(pageInfo(q, 0)).toEqual({
      page: 1,
      pages: 1,
      first: 0,
      last: 0,
      total: 0
    });
  });
});

describe('mergePage', () => {
  it('keeps unchanged rows as they were and names the changed and new ones', () => {
    const a = makeJob('a', 'RUNNING');
    const b = makeJob('b', 'QUEUED');
    const shown = [a, b];
    const fresh = [
      makeJob('c', 'QUEUED'),
      makeJob('a', 'RUNNING'),
      makeJob('b', 'ADMITTED')
    ];
    const { rows, changed } = mergePage(shown, fresh);
    expect(rows.map(j => j.id)).toEqual(['c', 'a', 'b']);
    expect(rows[1]).toBe(a); // same object: React does not redraw it
    expect(rows[2]).not.toBe(b);
    expect(rows[2].state).toBe('ADMITTED');
    expect(changed).toEqual(['c', 'b']);
  });
});

describe('cellText', () => {
  it("marks a GPU kernel's reservation as interactive in the name column", () => {
    const name = column('name');
    expect(cellText(name, makeJob('a', 'RUNNING'), undefined)).toBe('a.ipynb');
    const kernel = makeJob('k', 'RUNNING', {
      interactive: true,
      notebook: 'kernel:1234'
    });
    expect(cellText(name, kernel, undefined)).toBe('kernel:1234 (interactive)');
  });
});

describe('etaText', () => {
  const now = Date.parse('2026-01-01T12:00:00Z');
  it('gives the place in line and the start in minutes', () => {
    expect(
      etaText(
        { state: 'QUEUED' },
        { position: 2, estimated_start: '2026-01-01T12:12:10Z' },
        now
      )
    ).toBe('#3 in line · starts in about 12 min');
  });
  it('says why there is no estimate', () => {
    expect(
      etaText({ state: 'QUEUED' }, { position: 0, estimated_start: null }, now)
    ).toBe(`#1 in line · no estimate: ${NO_ETA_REASON}`);
  });
  it('is empty for a job that is not queued and … before its detail is known', () => {
    expect(etaText({ state: 'RUNNING' }, undefined, now)).toBe('');
    expect(etaText({ state: 'QUEUED' }, undefined, now)).toBe('…');
  });
  it('words long and short waits', () => {
    expect(aboutMinutes(20)).toBe('under a minute');
    expect(aboutMinutes(125 * 60)).toBe('about 2 h 05 min');
  });
});

describe('JobsTable', () => {
  it('asks for the visible page only and the place in line of its queued jobs', async () => {
    const server = new FakeServer();
    let page = [makeJob('q1', 'QUEUED'), makeJob('r1', 'RUNNING')];
    server.routes['GET jobs'] = () =>
      json({ jobs: page, total: 2500, next_offset: 50 });
    server.routes['GET jobs/q1'] = () =>
      json({ ...page[0], position: 4, estimated_start: null });
    const table = new JobsTable(new GPUSchedAPI(server.settings), 0.05, 50);
    await table.refresh();
    const list = server.calls('jobs');
    expect(list).toHaveLength(1);
    expect(Object.fromEntries(list[0].url.searchParams)).toMatchObject({
      limit: '50',
      offset: '0',
      sort: 'created',
      order: 'desc'
    });
    expect(server.calls('jobs/q1')).toHaveLength(1);
    expect(server.calls('jobs/r1')).toHaveLength(0);
    expect(table.total).toBe(2500);
    expect(table.detail('q1')?.position).toBe(4);
    const running = table.rows[1];

    // a live update: only q1 changed; r1 keeps its row object
    page = [makeJob('q1', 'RUNNING'), makeJob('r1', 'RUNNING')];
    await table.refresh();
    expect(table.changedIds).toEqual(['q1']);
    expect(table.rows[1]).toBe(running);

    table.setQuery(toggleSort(table.query, 'gpus'));
    await table.refresh();
    const last = server.calls('jobs').pop()!;
    expect(last.url.searchParams.get('sort')).toBe('gpus');
    expect(last.url.searchParams.get('order')).toBe('desc');
    table.dispose();
  });
});
