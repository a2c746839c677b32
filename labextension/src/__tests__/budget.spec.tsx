import { ReactWidget } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';
import * as React from 'react';

import { BudgetAlerts, budgetText, budgetWaitText, costText } from '../budget';
import { BudgetBars, JobCost } from '../components/BudgetBar';
import { IBudgetBar, IClusterPool, IMe, IQueues } from '../tokens';

const JAN_1 = Date.UTC(2027, 0, 1) / 1000;

function bar(patch: Partial<IBudgetBar> = {}): IBudgetBar {
  return {
    used: 412,
    budget: 500,
    unit: 'gpu_hours',
    period: '2026-12',
    period_end: JAN_1,
    state: 'warning',
    enforce: 'soft',
    ...patch
  };
}

const pool = (
  name: string,
  price: number,
  spot = false,
  gpu_type: string | null = null
): IClusterPool => ({ name, spot, price_per_gpu_hour: price, gpu_type });

describe('budget texts', () => {
  it('says used / budget, the period, the percent and the reset day', () => {
    expect(budgetText('vision', bar(), 'UTC')).toBe(
      'vision: 412 / 500 GPU-h this month (82%), resets 1 Jan - nearly spent'
    );
    expect(budgetText('vision', bar({ used: 12.4, state: 'ok' }), 'UTC')).toBe(
      'vision: 12 / 500 GPU-h this month (2%), resets 1 Jan'
    );
    expect(
      budgetText(
        'nlp',
        bar({
          unit: 'money',
          used: 1020.5,
          budget: 1000,
          period: 'week of 2026-11-30',
          period_end: Date.UTC(2026, 11, 7) / 1000,
          state: 'over',
          enforce: 'hard'
        }),
        'UTC'
      )
    ).toBe(
      'nlp: $1020.50 / $1000.00 this week (102%), resets 7 Dec - over budget: new jobs wait'
    );
  });

  it('says a hard-budget job will wait and why; nothing when within budget', () => {
    expect(budgetWaitText('vision', bar(), 'UTC')).toBeNull();
    expect(budgetWaitText('vision', null)).toBeNull();
    expect(
      budgetWaitText(
        'vision',
        bar({ used: 512, state: 'over', enforce: 'hard' }),
        'UTC'
      )
    ).toBe(
      'vision is over its budget for 2026-12 (512 / 500 GPU-h): this job will wait until the budget resets on 1 Jan or an admin raises it.'
    );
    expect(
      budgetWaitText('vision', bar({ used: 512, state: 'over' }), 'UTC')
    ).toContain('lowest priority');
  });

  it('prices a job: GPUs x max runtime x the pool price, or per hour', () => {
    const pools = [pool('a100', 2.4)];
    const q = {
      gpus: 2,
      maxRuntimeMinutes: 120,
      gpuType: '',
      preemptible: false
    };
    expect(costText(q, pools)).toBe('about 4 GPU-h, $9.60');
    expect(costText({ ...q, gpus: 1, maxRuntimeMinutes: null }, pools)).toBe(
      '$2.40 per hour (no max runtime)'
    );
    // spot pools only for a preemptible job; a range where prices differ
    const mixed = [pool('a100', 2.4), pool('spot', 0.8, true)];
    expect(costText(q, mixed)).toBe('about 4 GPU-h, $9.60');
    expect(costText({ ...q, preemptible: true }, mixed)).toBe(
      'about 4 GPU-h, $3.20-$9.60'
    );
    // the chosen GPU type's pools only
    const typed = [pool('a', 2.4, false, 'A100'), pool('h', 4, false, 'H100')];
    expect(costText({ ...q, gpuType: 'H100' }, typed)).toBe(
      'about 4 GPU-h, $16.00'
    );
    // no prices: GPU-hours only, or nothing to say
    expect(costText(q, [pool('local', 0)])).toBe('about 4 GPU-h');
    expect(costText({ ...q, maxRuntimeMinutes: null }, [])).toBeNull();
    expect(costText({ ...q, gpus: 0 }, pools)).toBeNull();
  });
});

describe('BudgetBars and JobCost', () => {
  const me: IMe = {
    name: 'al',
    admin: false,
    tenants: ['vision', 'nlp'],
    default_tenant: 'vision'
  };
  const queue = {
    quota: 4,
    burst: null,
    used: 0,
    borrowed: 0,
    queued: 0,
    queued_gpus: 0,
    running: 0
  };
  let widget: ReactWidget | null = null;

  async function render(element: JSX.Element): Promise<HTMLElement> {
    widget = ReactWidget.create(element);
    Widget.attach(widget, document.body);
    await widget.renderPromise;
    return widget.node;
  }

  afterEach(() => {
    widget?.dispose();
    widget = null;
  });

  it('shows a bar per budgeted tenant of mine, coloured by state, with an aria label', async () => {
    const queues: IQueues = {
      policy: 'dynamic',
      queues: {
        vision: { ...queue, budget: bar() },
        nlp: { ...queue, budget: null },
        other: { ...queue, budget: bar({ state: 'over' }) }
      }
    };
    const node = await render(<BudgetBars me={me} queues={queues} />);
    const bars = node.querySelectorAll('.jp-GPUSched-budget');
    expect(bars.length).toBe(1); // not nlp (no budget), not other (not mine)
    expect(bars[0].getAttribute('data-state')).toBe('warning');
    expect(bars[0].classList.contains('jp-mod-warning')).toBe(true);
    const meter = bars[0].querySelector('[role="meter"]')!;
    expect(meter.getAttribute('aria-label')).toMatch(
      /^vision: 412 \/ 500 GPU-h this month \(82%\), resets /
    );
    expect(
      (bars[0].querySelector('.jp-GPUSched-budgetFill') as HTMLElement).style
        .width
    ).toBe('82.4%');
  });

  it('is hidden when none of my tenants has a budget', async () => {
    const queues: IQueues = {
      policy: 'dynamic',
      queues: { vision: { ...queue, budget: null } }
    };
    const node = await render(<BudgetBars me={me} queues={queues} />);
    expect(node.querySelector('.jp-GPUSched-budgets')).toBeNull();
  });

  it('the form line: the cost, and the wait for a hard-budget tenant over it', async () => {
    const queues: IQueues = {
      policy: 'dynamic',
      queues: {
        vision: {
          ...queue,
          budget: bar({ used: 600, state: 'over', enforce: 'hard' })
        }
      }
    };
    const cluster = {
      backend: 'local',
      policy: 'dynamic',
      total_gpus: 2,
      free_gpus: 2,
      allocated_gpus: 0,
      utilization: 0,
      nodes: [],
      pools: [pool('local', 2.4)]
    };
    const node = await render(
      <JobCost
        gpus="2"
        maxRuntime="120"
        gpuType=""
        preemptible={false}
        tenant=""
        me={me}
        queues={queues}
        cluster={cluster}
      />
    );
    expect(node.querySelector('.jp-GPUSched-costEstimate')!.textContent).toBe(
      'Cost: about 4 GPU-h, $9.60'
    );
    expect(node.querySelector('.jp-GPUSched-budgetWait')!.textContent).toMatch(
      /^vision is over its budget for 2026-12 .*this job will wait until/
    );
  });
});

describe('BudgetAlerts', () => {
  const me: IMe = {
    name: 'al',
    admin: false,
    tenants: ['vision'],
    default_tenant: 'vision'
  };
  const queue = {
    quota: 4,
    burst: null,
    used: 0,
    borrowed: 0,
    queued: 0,
    queued_gpus: 0,
    running: 0
  };
  const queues = (b: IBudgetBar | null): IQueues => ({
    policy: 'dynamic',
    queues: { vision: { ...queue, budget: b } }
  });

  it('warns once per level and period, remembered across reloads', () => {
    const saved = new Map<string, string>();
    const store = {
      getItem: (k: string) => saved.get(k) ?? null,
      setItem: (k: string, v: string) => void saved.set(k, v)
    };
    const alerts = new BudgetAlerts(store);
    expect(alerts.due(me, queues(bar({ state: 'ok', used: 10 })))).toEqual([]);
    const warned = alerts.due(me, queues(bar()));
    expect(warned.map(a => a.state)).toEqual(['warning']);
    expect(warned[0].text).toMatch(/^vision: 412 \/ 500 GPU-h this month/);
    expect(alerts.due(me, queues(bar()))).toEqual([]); // once
    expect(
      alerts
        .due(me, queues(bar({ used: 501, state: 'over' })))
        .map(a => a.state)
    ).toEqual(['over']);
    // a page reload: nothing again for this period; the next period warns anew
    const reloaded = new BudgetAlerts(store);
    expect(reloaded.due(me, queues(bar({ used: 501, state: 'over' })))).toEqual(
      []
    );
    expect(
      reloaded.due(me, queues(bar({ period: '2027-01' }))).map(a => a.key)
    ).toEqual(['vision|2027-01|warning']);
  });

  it('a tenant first seen over its budget gets the 100% warning only; no budget, no warning', () => {
    const alerts = new BudgetAlerts();
    expect(
      alerts.due(me, queues(bar({ used: 600, state: 'over' }))).map(a => a.key)
    ).toEqual(['vision|2026-12|over']);
    expect(alerts.due(me, queues(bar()))).toEqual([]); // its 80% was passed on the way
    expect(alerts.due(me, queues(null))).toEqual([]);
    expect(alerts.due(null, queues(bar({ period: 'x' })))).toEqual([]);
  });
});
