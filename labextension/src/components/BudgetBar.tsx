import * as React from 'react';

import {
  budgetPercent,
  budgetText,
  budgetWaitText,
  costText,
  periodWords,
  usedOfBudget
} from '../budget';
import { IBudgetBar, ICluster, IMe, IQueues } from '../tokens';

/** One tenant's "used / budget this period" bar; its state (ok, warning, over) sets the colour. */
export function BudgetBar(props: {
  tenant: string;
  bar: IBudgetBar;
}): JSX.Element {
  const { tenant, bar } = props;
  const pct = budgetPercent(bar);
  const text = budgetText(tenant, bar);
  return (
    <div
      className={`jp-GPUSched-budget jp-mod-${bar.state}`}
      data-tenant={tenant}
      data-state={bar.state}
    >
      <div
        className="jp-GPUSched-budgetTrack"
        role="meter"
        aria-label={text}
        aria-valuemin={0}
        aria-valuemax={bar.budget}
        aria-valuenow={Math.min(bar.used, bar.budget)}
        aria-valuetext={`${usedOfBudget(bar)} ${periodWords(bar.period)}`}
      >
        <div
          className="jp-GPUSched-budgetFill"
          style={{ width: `${Math.min(100, pct)}%` }}
        />
      </div>
      <div className="jp-GPUSched-budgetText">{text}</div>
    </div>
  );
}

/** The bars of the caller's tenants that have a budget (nothing when none has). */
export function BudgetBars(props: {
  me: IMe | null;
  queues: IQueues | null;
}): JSX.Element | null {
  const queues = props.queues?.queues ?? {};
  const mine = props.me ? [...props.me.tenants].sort() : [];
  const bars = mine.filter(t => queues[t]?.budget);
  if (bars.length === 0) {
    return null;
  }
  return (
    <section className="jp-GPUSched-budgets" aria-label="Budget this period">
      {bars.map(t => (
        <BudgetBar key={t} tenant={t} bar={queues[t].budget as IBudgetBar} />
      ))}
    </section>
  );
}

/** Under the form: what the job would cost, and whether its tenant's budget holds it back. */
export function JobCost(props: {
  gpus: string;
  maxRuntime: string;
  gpuType: string;
  preemptible: boolean;
  tenant: string;
  me: IMe | null | undefined;
  queues: IQueues | null;
  cluster: ICluster | null;
}): JSX.Element | null {
  const minutes = props.maxRuntime.trim() ? Number(props.maxRuntime) : null;
  const cost = costText(
    {
      gpus: Number(props.gpus),
      maxRuntimeMinutes: minutes !== null && isFinite(minutes) ? minutes : null,
      gpuType: props.gpuType,
      preemptible: props.preemptible
    },
    props.cluster?.pools ?? []
  );
  const tenant = props.tenant || props.me?.default_tenant || '';
  const wait = budgetWaitText(tenant, props.queues?.queues[tenant]?.budget);
  if (!cost && !wait) {
    return null;
  }
  return (
    <div className="jp-GPUSched-cost" role="status" aria-live="polite">
      {cost && <div className="jp-GPUSched-costEstimate">Cost: {cost}</div>}
      {wait && <div className="jp-GPUSched-budgetWait">{wait}</div>}
    </div>
  );
}
