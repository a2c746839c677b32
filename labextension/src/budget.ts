/**
 * Budgets in words: the panel's "used / budget this period" bar and what a job would cost
 * before it is submitted (docs/budgets.md). Pure functions of the API's shapes.
 */
import { IBudgetBar, IClusterPool, IMe, IQueues } from './tokens';

/** Percent of the budget used (100+ when over; a zero budget is 100% once anything is spent). */
export function budgetPercent(bar: IBudgetBar): number {
  if (bar.budget > 0) {
    return (100 * bar.used) / bar.budget;
  }
  return bar.used > 0 ? 100 : 0;
}

/** "this month", "this week", "today": what kind of period the server's label names. */
export function periodWords(label: string): string {
  if (/^\d{4}-\d{2}$/.test(label) || label.startsWith('month from')) {
    return 'this month';
  }
  if (label.startsWith('week of')) {
    return 'this week';
  }
  return 'today';
}

/** A day as "1 Jan" (in `timeZone`; the browser's own by default). */
export function shortDate(epochSeconds: number, timeZone?: string): string {
  return new Date(epochSeconds * 1000).toLocaleDateString('en-GB', {
    day: 'numeric',
    month: 'short',
    timeZone
  });
}

function amount(x: number): string {
  return x >= 10 || Number.isInteger(x) ? x.toFixed(0) : x.toFixed(2);
}

/** "412 / 500 GPU-h" or "$412 / $500". */
export function usedOfBudget(bar: IBudgetBar): string {
  return bar.unit === 'money'
    ? `${money(bar.used)} / ${money(bar.budget)}`
    : `${amount(bar.used)} / ${amount(bar.budget)} GPU-h`;
}

/** Money in the pools' price unit, shown as dollars like the dashboard. */
export function money(x: number): string {
  return `$${x.toFixed(2)}`;
}

/** "vision: 412 / 500 GPU-h this month (82%), resets 1 Jan" (and ", over: new jobs wait" when held). */
export function budgetText(
  tenant: string,
  bar: IBudgetBar,
  timeZone?: string
): string {
  const pct = Math.round(budgetPercent(bar));
  let text =
    `${tenant}: ${usedOfBudget(bar)} ${periodWords(bar.period)} (${pct}%), ` +
    `resets ${shortDate(bar.period_end, timeZone)}`;
  if (bar.state === 'over') {
    text +=
      bar.enforce === 'hard'
        ? ' - over budget: new jobs wait'
        : ' - over budget: jobs run at the lowest priority';
  } else if (bar.state === 'warning') {
    text += ' - nearly spent';
  }
  return text;
}

/** What the form says about a tenant over its budget (null: it may submit as usual). */
export function budgetWaitText(
  tenant: string,
  bar: IBudgetBar | null | undefined,
  timeZone?: string
): string | null {
  if (!bar || bar.state !== 'over') {
    return null;
  }
  const resets = shortDate(bar.period_end, timeZone);
  return bar.enforce === 'hard'
    ? `${tenant} is over its budget for ${bar.period} (${usedOfBudget(bar)}): ` +
        `this job will wait until the budget resets on ${resets} or an admin raises it.`
    : `${tenant} is over its budget for ${bar.period} (${usedOfBudget(bar)}): ` +
        'this job runs at the lowest priority and may not borrow idle GPUs.';
}

/** What a job would be asked for: GPUs, minutes (null: no limit), GPU type, spot allowed. */
export interface ICostQuestion {
  gpus: number;
  maxRuntimeMinutes: number | null;
  gpuType: string;
  preemptible: boolean;
}

function priceRange(lo: number, hi: number): string {
  return lo === hi ? money(lo) : `${money(lo)}-${money(hi)}`;
}

/**
 * "about 4 GPU-h, $9.60" (GPUs x max runtime x the pool's price), "$2.40 per hour" without a max
 * runtime, a range where the pools it may run on differ in price; null when nothing is known.
 * Spot pools count only for a preemptible job.
 */
export function costText(
  q: ICostQuestion,
  pools: ReadonlyArray<IClusterPool>
): string | null {
  if (!(q.gpus >= 1)) {
    return null;
  }
  const fits = pools.filter(
    p => (!q.gpuType || p.gpu_type === q.gpuType) && (q.preemptible || !p.spot)
  );
  const prices = fits.map(p => p.price_per_gpu_hour);
  const lo = Math.min(...prices);
  const hi = Math.max(...prices);
  const priced = prices.length > 0 && hi > 0;
  if (q.maxRuntimeMinutes !== null && q.maxRuntimeMinutes > 0) {
    const gpuHours = (q.gpus * q.maxRuntimeMinutes) / 60;
    const hours = `about ${amount(gpuHours)} GPU-h`;
    return priced
      ? `${hours}, ${priceRange(lo * gpuHours, hi * gpuHours)}`
      : hours;
  }
  return priced
    ? `${priceRange(lo * q.gpus, hi * q.gpus)} per hour (no max runtime)`
    : null;
}

/** Where shown warnings are remembered (window.localStorage in Lab). */
export interface IKeyValueStore {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

/** A budget warning to show once: the 80% (warning) or 100% (over) level of a tenant's period. */
export interface IBudgetAlert {
  key: string;
  state: 'warning' | 'over';
  text: string;
}

const SEEN_KEY = 'jupyter-gpusched:budget-warnings-shown';

/**
 * The budget warnings not shown yet, once per tenant, period and level (remembered across
 * reloads in `store`). A tenant first seen over its budget gets only the 100% one.
 */
export class BudgetAlerts {
  constructor(private readonly _store: IKeyValueStore | null = null) {
    try {
      const saved = JSON.parse(this._store?.getItem(SEEN_KEY) ?? '[]');
      this._seen = new Set(Array.isArray(saved) ? saved.map(String) : []);
    } catch {
      this._seen = new Set();
    }
  }

  due(me: IMe | null, queues: IQueues | null): IBudgetAlert[] {
    const out: IBudgetAlert[] = [];
    for (const tenant of [...(me?.tenants ?? [])].sort()) {
      const bar = queues?.queues[tenant]?.budget;
      if (!bar || bar.state === 'ok') {
        continue;
      }
      const keys = (['warning', 'over'] as const)
        .filter(s => s === 'warning' || bar.state === 'over')
        .map(s => `${tenant}|${bar.period}|${s}`);
      const fresh = keys.filter(k => !this._seen.has(k));
      if (fresh.length === 0) {
        continue;
      }
      keys.forEach(k => this._seen.add(k));
      out.push({
        key: keys[keys.length - 1],
        state: bar.state,
        text: budgetText(tenant, bar)
      });
    }
    if (out.length) {
      // keep the last few hundred: periods roll over
      this._store?.setItem(
        SEEN_KEY,
        JSON.stringify([...this._seen].slice(-300))
      );
    }
    return out;
  }

  private _seen: Set<string>;
}
