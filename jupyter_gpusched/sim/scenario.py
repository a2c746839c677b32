"""Scenario files: which trace, which cluster, which tenants, how jobs behave.

The YAML schema is documented in docs/simulator.md. `load_scenario(name_or_path)` reads
one, checks every field (an error names the file and the field, e.g.
``pools[1].lifetime.mean_s``), loads the trace and returns a `Scenario` ready to run.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..core.budget import Budget, parse_budget
from ..core.model import NodeSpec, Priority, Tenant
from ..core.policies import Policy, make_policy, policy_names
from ..core.scheduler import OVERSIZE_GRANT_AFTER_S, SchedulerConfig
from .config import ESTIMATES, CheckpointModel, Lifetime, PoolConfig, SimJob
from .traces import NODE_FORMATS, TRACE_FORMATS, Trace, TraceError, load_nodes, load_trace

__all__ = ["Scenario", "ScenarioError", "find_scenario", "load_scenario", "scenario_dirs", "traces_dir"]

DEFAULT_POLICIES = ("static", "fifo", "priority", "dynamic", "spot-hybrid", "tiresias", "srpt")
PROJECT_ROOT = Path(__file__).resolve().parents[2]
BUILTIN_SCENARIOS = Path(__file__).resolve().parent / "scenarios"


class ScenarioError(ValueError):
    """A scenario file that cannot be run: `where` is the file, `field` the dotted field."""

    def __init__(self, where: str, message: str, field: str | None = None):
        super().__init__(f"{where}: {field + ': ' if field else ''}{message}")
        self.where = where
        self.field = field
        self.reason = message


# --- where files are ----------------------------------------------------------------------------
def scenario_dirs() -> list[Path]:
    """Where built-in scenarios are: inside the package (shipped in the wheel), one copy."""
    return [BUILTIN_SCENARIOS]


def builtin_scenarios() -> list[str]:
    names: set[str] = set()
    for d in scenario_dirs():
        if d.is_dir():
            names.update(p.stem for p in d.glob("*.yaml"))
    return sorted(names)


def override(raw: dict, estimates: str | None = None, short_first: bool | None = None) -> dict:
    """`raw` (a scenario as read from YAML) with jobs.estimates and scheduler.short_first set
    where given: how the sweeps replay one scenario with and without them. Changes `raw`."""
    if estimates:
        raw.setdefault("jobs", {})["estimates"] = estimates
    if short_first is not None:
        raw.setdefault("scheduler", {})["short_first"] = short_first
    return raw


def find_scenario(name_or_path: str | Path) -> Path:
    """A path to a YAML file, or the name of a built-in one (jupyter_gpusched/sim/scenarios/)."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    if p.suffix in (".yaml", ".yml") or os.sep in str(name_or_path):
        raise ScenarioError(str(name_or_path), "no such scenario file")
    for d in scenario_dirs():
        for ext in (".yaml", ".yml"):
            f = d / f"{name_or_path}{ext}"
            if f.is_file():
                return f
    known = ", ".join(builtin_scenarios()) or "none found"
    raise ScenarioError(str(name_or_path), f"unknown scenario; give a YAML file or one of: {known}")


def traces_dir(start: Path | None = None, override: str | Path | None = None) -> Path | None:
    """Where ``${traces}`` points: `override`, else $GPUSCHED_TRACES, else the first
    ``shared/traces`` folder found beside an ancestor of `start` (the scenario file's folder)
    or of the current directory -- i.e. ``../shared/traces`` from the project root."""
    if override:
        return Path(override)
    env = os.environ.get("GPUSCHED_TRACES")
    if env:
        return Path(env)
    for base in ([start] if start else []) + [Path.cwd(), PROJECT_ROOT]:
        for anc in [base.resolve(), *base.resolve().parents]:
            cand = anc / "shared" / "traces"
            if cand.is_dir():
                return cand
    return None


# --- the scenario ---------------------------------------------------------------------------------
@dataclass
class Scenario:
    name: str
    description: str
    path: Path | None
    trace: Trace
    jobs: list[SimJob]
    pools: list[PoolConfig]
    pools_for: dict[str, list[PoolConfig]]
    tenant_terms: dict[str, dict]  # name -> {"quota": int | None, "share": float | None, "burst": int | None}
    default_tenant: dict
    checkpoint: CheckpointModel
    estimates: str
    scheduler: SchedulerConfig
    policies: list[str]
    policy_options: dict[str, dict] = field(default_factory=dict)
    seed: int = 0
    notes: dict[str, Any] = field(default_factory=dict)
    budgets: dict[str, Budget] = field(default_factory=dict)  # tenant -> budget (tenants[].budget)

    def pools_of(self, policy: str) -> list[PoolConfig]:
        return self.pools_for.get(policy, self.pools)

    def tenants_for(self, policy: str) -> list[Tenant]:
        """Tenant terms on the cluster `policy` runs on: shares become quotas of its GPUs at
        its largest (elastic pools at max_nodes), by largest remainder so they add up."""
        capacity = sum(p.max_gpus for p in self.pools_of(policy))
        names = sorted(set(self.tenant_terms) | {j.trace.tenant for j in self.jobs})
        terms = {n: self.tenant_terms.get(n, self.default_tenant) for n in names}
        shares = {n: t["share"] for n, t in terms.items() if t.get("share") is not None}
        quotas: dict[str, int] = {n: int(t["quota"]) for n, t in terms.items() if t.get("quota") is not None}
        if shares:
            fixed = sum(quotas.values())
            left = max(0, capacity - fixed)
            total = sum(shares.values())
            exact = {n: left * w / total for n, w in shares.items()}
            floor = {n: int(math.floor(x)) for n, x in exact.items()}
            spare = left - sum(floor.values())
            for n in sorted(exact, key=lambda n: (-(exact[n] - floor[n]), n))[:spare]:
                floor[n] += 1
            quotas.update(floor)
        return [Tenant(n, quotas.get(n, 0), terms[n].get("burst")) for n in names]

    def make_policy(self, name: str) -> Policy:
        opts = self.policy_options.get(name) or {}
        base = make_policy(name)
        if not opts:
            return base
        try:
            return type(base)(**opts)
        except (TypeError, ValueError) as exc:
            where = str(self.path) if self.path else self.name
            raise ScenarioError(where, f"bad options for policy {name!r}: {exc}", f"policy_options.{name}") from None

    @property
    def capacity(self) -> int:
        return sum(p.gpus for p in self.pools)


# --- parsing helpers ---------------------------------------------------------------------------------
class _Reader:
    def __init__(self, where: str):
        self.where = where

    def fail(self, path: str, msg: str):
        raise ScenarioError(self.where, msg, path or None)

    def mapping(self, value, path: str, allowed: Sequence[str]) -> dict:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.fail(path, f"expected a mapping, got {type(value).__name__}")
        extra = sorted(set(value) - set(allowed))
        if extra:
            self.fail(f"{path}.{extra[0]}" if path else str(extra[0]), f"unknown field; allowed: {', '.join(allowed)}")
        return dict(value)

    def number(self, value, path: str, *, minimum: float | None = None, positive: bool = False, optional=False):
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            self.fail(path, f"expected a number, got {value!r}")
        if positive and value <= 0:
            self.fail(path, f"must be above 0, got {value!r}")
        if minimum is not None and value < minimum:
            self.fail(path, f"must be at least {minimum}, got {value!r}")
        return float(value)

    def integer(self, value, path: str, *, minimum: int = 0, optional=False):
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(path, f"expected a whole number, got {value!r}")
        if value < minimum:
            self.fail(path, f"must be at least {minimum}, got {value!r}")
        return int(value)

    def boolean(self, value, path: str) -> bool:
        if not isinstance(value, bool):
            self.fail(path, f"expected true or false, got {value!r}")
        return value

    def string(self, value, path: str, *, choices: Sequence[str] | None = None, optional=False):
        if value is None and optional:
            return None
        if not isinstance(value, str) or not value.strip():
            self.fail(path, f"expected text, got {value!r}")
        if choices is not None and value not in choices:
            self.fail(path, f"expected one of {', '.join(choices)}, got {value!r}")
        return value.strip()


def _resolve_path(raw: str, base: Path, traces: Path | None, r: _Reader, fld: str) -> Path:
    if "${traces}" in raw:
        if traces is None:
            r.fail(
                fld, "${traces} is not set: pass --traces DIR or set GPUSCHED_TRACES (no shared/traces folder found)"
            )
        raw = raw.replace("${traces}", str(traces))
    p = Path(os.path.expanduser(raw))
    if not p.is_absolute():
        p = base / p
    return p


def _lifetime(r: _Reader, value, path: str) -> Lifetime | None:
    if value is None:
        return None
    v = r.mapping(value, path, ["distribution", "mean_s", "min_s", "max_s", "shape", "scale_s"])
    kw: dict[str, Any] = {}
    if "distribution" in v:
        kw["distribution"] = r.string(
            v["distribution"], f"{path}.distribution", choices=["exponential", "weibull", "uniform", "fixed"]
        )
    for k in ("mean_s", "min_s", "max_s", "shape", "scale_s"):
        if k in v and v[k] is not None:
            kw[k] = r.number(v[k], f"{path}.{k}", minimum=0)
    try:
        return Lifetime(**kw)
    except ValueError as exc:
        r.fail(path, str(exc))
    return None  # pragma: no cover


def _node_lists(r: _Reader, value, path: str, pool: str, base: Path, traces: Path | None) -> tuple[NodeSpec, ...]:
    """One node-list source or a list of them; each may keep only machines with `gpus` in a
    list, then `skip` the first N of those and `take` the next N (file order)."""
    sources = value if isinstance(value, list) else [value]
    out: list[NodeSpec] = []
    for k, src in enumerate(sources):
        sp = f"{path}[{k}]" if isinstance(value, list) else path
        nl = r.mapping(src, sp, ["format", "path", "gpus", "skip", "take"])
        fmt = r.string(nl.get("format"), f"{sp}.format", choices=list(NODE_FORMATS))
        f = _resolve_path(r.string(nl.get("path"), f"{sp}.path"), base, traces, r, f"{sp}.path")
        try:
            nodes = load_nodes(fmt, f, pool=pool)
        except TraceError as exc:
            r.fail(f"{sp}.path", str(exc))
        if nl.get("gpus") is not None:
            want = nl["gpus"] if isinstance(nl["gpus"], list) else [nl["gpus"]]
            sizes = {r.integer(g, f"{sp}.gpus", minimum=1) for g in want}
            nodes = [n for n in nodes if n.gpus in sizes]
        skip = r.integer(nl.get("skip", 0), f"{sp}.skip", minimum=0)
        take = r.integer(nl.get("take"), f"{sp}.take", minimum=0, optional=True)
        nodes = nodes[skip:] if take is None else nodes[skip : skip + take]
        out.extend(nodes)
    return tuple(out)


def _pools(r: _Reader, value, path: str, base: Path, traces: Path | None) -> list[PoolConfig]:
    if not isinstance(value, list) or not value:
        r.fail(path, "expected a list of pools")
    out, names = [], set()
    for i, raw in enumerate(value):
        p = f"{path}[{i}]"
        v = r.mapping(
            raw,
            p,
            [
                "name",
                "nodes",
                "gpus_per_node",
                "node_list",
                "price_per_gpu_hour",
                "spot",
                "lifetime",
                "replace_after_s",
                "provision_s",
                "gpu_type",
                "min_nodes",
                "max_nodes",
            ],
        )
        name = r.string(v.get("name"), f"{p}.name")
        if name in names:
            r.fail(f"{p}.name", f"pool {name!r} appears twice")
        names.add(name)
        spot = v.get("spot", False)
        if not isinstance(spot, bool):
            r.fail(f"{p}.spot", "expected true or false")
        price = r.number(v.get("price_per_gpu_hour", 0.0), f"{p}.price_per_gpu_hour", minimum=0)
        gpn = r.integer(v.get("gpus_per_node"), f"{p}.gpus_per_node", minimum=1, optional=True)
        if "node_list" in v:
            if "nodes" in v:
                r.fail(p, "give either nodes (a count) or node_list, not both")
            nodes = _node_lists(r, v["node_list"], f"{p}.node_list", name, base, traces)
        else:
            count = r.integer(v.get("nodes"), f"{p}.nodes", minimum=0)
            if gpn is None:
                r.fail(f"{p}.gpus_per_node", "required with nodes")
            nodes = tuple(NodeSpec(f"{name}-{k}", gpn, name) for k in range(count))
        life = _lifetime(r, v.get("lifetime"), f"{p}.lifetime")
        if spot and life is None:
            r.fail(f"{p}.lifetime", "a spot pool needs a lifetime distribution")
        if life is not None and not spot:
            r.fail(f"{p}.lifetime", "only spot pools have lifetimes")
        replace = v.get("replace_after_s", 600.0)
        replace = None if replace is None else r.number(replace, f"{p}.replace_after_s", minimum=0)
        min_nodes = r.integer(v.get("min_nodes", 0), f"{p}.min_nodes", minimum=0)
        max_nodes = r.integer(v.get("max_nodes"), f"{p}.max_nodes", minimum=0, optional=True)
        if max_nodes is not None and min_nodes > max_nodes:
            r.fail(f"{p}.max_nodes", f"max_nodes ({max_nodes}) is below min_nodes ({min_nodes})")
        if max_nodes is not None and len(nodes) > max_nodes:
            r.fail(f"{p}.max_nodes", f"the pool starts with {len(nodes)} nodes but max_nodes is {max_nodes}")
        out.append(
            PoolConfig(
                name=name,
                nodes=nodes,
                price_per_gpu_hour=price,
                spot=spot,
                lifetime=life,
                replace_after_s=replace,
                provision_s=r.number(v.get("provision_s", 300.0), f"{p}.provision_s", minimum=0),
                gpus_per_node=gpn,
                gpu_type=r.string(v.get("gpu_type"), f"{p}.gpu_type", optional=True),
                min_nodes=min_nodes,
                max_nodes=max_nodes,
            )
        )
    if not any(n for pc in out for n in pc.nodes):
        r.fail(path, "the pools have no GPUs at all")
    return out


# --- loading ------------------------------------------------------------------------------------------
def load_scenario(name_or_path: str | Path, *, traces: str | Path | None = None, seed: int | None = None) -> Scenario:
    """Read a scenario by name or path. `seed` overrides the file's (priorities and
    preemptible flags drawn, spot lifetimes)."""
    path = find_scenario(name_or_path)
    where = str(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ScenarioError(where, f"not valid YAML ({exc})") from None
    except OSError as exc:
        raise ScenarioError(where, f"cannot read it ({exc})") from None
    if seed is not None and isinstance(raw, dict):
        raw = dict(raw, seed=seed)
    return scenario_from_dict(raw, where=where, base=path.parent, traces=traces_dir(path.parent, traces), path=path)


def scenario_from_dict(
    raw: Any,
    *,
    where: str = "<scenario>",
    base: Path | None = None,
    traces: Path | None = None,
    path: Path | None = None,
) -> Scenario:
    r = _Reader(where)
    base = base or Path.cwd()
    top = r.mapping(
        raw,
        "",
        [
            "name",
            "description",
            "seed",
            "trace",
            "pools",
            "pools_for",
            "tenants",
            "default_tenant",
            "jobs",
            "scheduler",
            "policies",
            "policy_options",
            "notes",
        ],
    )
    name = r.string(top.get("name", path.stem if path else "scenario"), "name")
    seed = r.integer(top.get("seed", 0), "seed")

    # trace
    tv = r.mapping(top.get("trace"), "trace", ["format", "path", "window", "tenants", "max_gpus", "limit"])
    if not tv:
        r.fail("trace", "required: the trace to replay (format and path)")
    fmt = r.string(tv.get("format"), "trace.format", choices=list(TRACE_FORMATS))
    tpath = _resolve_path(r.string(tv.get("path"), "trace.path"), base, traces, r, "trace.path")
    try:
        trace = load_trace(fmt, tpath)
    except TraceError as exc:
        raise ScenarioError(where, str(exc), "trace.path") from None
    win = r.mapping(tv.get("window"), "trace.window", ["start", "end"])
    bounds = {}
    for k in ("start", "end"):
        if win.get(k) is not None:
            val = win[k]
            if not isinstance(val, (str, int, float)) or isinstance(val, bool):
                r.fail(f"trace.window.{k}", f"expected seconds or a date/time, got {val!r}")
            try:
                bounds[k] = trace.to_seconds(val)
            except ValueError as exc:
                r.fail(f"trace.window.{k}", str(exc))
    if "start" in bounds and "end" in bounds and bounds["end"] <= bounds["start"]:
        r.fail("trace.window", "end must be after start")
    tenants_sel = tv.get("tenants")
    if tenants_sel is not None:
        if not isinstance(tenants_sel, list) or not all(isinstance(t, (str, int)) for t in tenants_sel):
            r.fail("trace.tenants", "expected a list of tenant names")
        tenants_sel = [str(t) for t in tenants_sel]
    trace = trace.select(
        start=bounds.get("start"),
        end=bounds.get("end"),
        tenants=tenants_sel,
        max_gpus=r.integer(tv.get("max_gpus"), "trace.max_gpus", minimum=1, optional=True),
        limit=r.integer(tv.get("limit"), "trace.limit", minimum=1, optional=True),
    )
    if not trace.jobs:
        r.fail("trace", "no jobs left after the window and filters")

    # pools
    pools = _pools(r, top.get("pools"), "pools", base, traces)
    pools_for: dict[str, list[PoolConfig]] = {}
    pf = top.get("pools_for") or {}
    if not isinstance(pf, Mapping):
        r.fail("pools_for", "expected a mapping of policy name to a list of pools")
    for pol, lst in pf.items():
        if pol not in policy_names():
            r.fail(f"pools_for.{pol}", f"unknown policy; use one of {', '.join(policy_names())}")
        pools_for[pol] = _pools(r, lst, f"pools_for.{pol}", base, traces)

    # tenants
    terms: dict[str, dict] = {}
    budgets: dict[str, Budget] = {}
    tl = top.get("tenants") or []
    if not isinstance(tl, list):
        r.fail("tenants", "expected a list of tenants")
    for i, tv_ in enumerate(tl):
        p = f"tenants[{i}]"
        t = r.mapping(tv_, p, ["name", "quota", "share", "burst", "budget"])
        tname = str(t.get("name")) if isinstance(t.get("name"), (str, int)) else r.string(t.get("name"), f"{p}.name")
        if tname in terms:
            r.fail(f"{p}.name", f"tenant {tname!r} appears twice")
        if ("quota" in t) == ("share" in t):
            r.fail(p, "give a tenant either quota (GPUs) or share (a weight), exactly one")
        terms[tname] = {
            "quota": r.integer(t.get("quota"), f"{p}.quota", minimum=0, optional=True),
            "share": r.number(t.get("share"), f"{p}.share", positive=True, optional=True),
            "burst": r.integer(t.get("burst"), f"{p}.burst", minimum=0, optional=True),
        }
        if t.get("budget") is not None:
            try:
                budgets[tname] = parse_budget(f"{p}.budget", t["budget"])
            except ValueError as exc:
                r.fail(f"{p}.budget", str(exc))
    dt = r.mapping(top.get("default_tenant"), "default_tenant", ["quota", "share", "burst"])
    default_tenant = {
        "quota": r.integer(
            dt.get("quota", 0 if "share" not in dt else None), "default_tenant.quota", minimum=0, optional=True
        ),
        "share": r.number(dt.get("share"), "default_tenant.share", positive=True, optional=True),
        "burst": r.integer(dt.get("burst"), "default_tenant.burst", minimum=0, optional=True),
    }

    # jobs
    jv = r.mapping(top.get("jobs"), "jobs", ["priority_mix", "preemptible", "checkpoint", "estimates"])
    mix = _priority_mix(r, jv.get("priority_mix"))
    preemptible = _preemptible_rule(r, jv.get("preemptible", "trace"))
    cv = r.mapping(jv.get("checkpoint"), "jobs.checkpoint", ["interval_s", "cost_s", "restore_s", "applies_to"])
    ck = {
        "interval_s": r.number(cv.get("interval_s"), "jobs.checkpoint.interval_s", positive=True, optional=True),
        "cost_s": r.number(cv.get("cost_s", 0.0), "jobs.checkpoint.cost_s", minimum=0),
        "restore_s": r.number(cv.get("restore_s", 0.0), "jobs.checkpoint.restore_s", minimum=0),
        "applies_to": r.string(
            cv.get("applies_to", "all"), "jobs.checkpoint.applies_to", choices=["all", "preemptible"]
        ),
    }
    checkpoint = CheckpointModel(**ck)
    estimates = r.string(jv.get("estimates", "none"), "jobs.estimates", choices=list(ESTIMATES))
    jobs = _assign(trace, mix, preemptible, seed)

    # scheduler, policies
    sv = r.mapping(
        top.get("scheduler"),
        "scheduler",
        ["aging_interval_s", "max_reservations", "short_first", "pause_long_runs", "oversize_grant_after_s"],
    )
    sched = SchedulerConfig(
        aging_interval=r.number(sv.get("aging_interval_s", 3600.0), "scheduler.aging_interval_s", positive=True),
        max_reservations=r.integer(sv.get("max_reservations", 1), "scheduler.max_reservations", minimum=0),
        short_first=r.boolean(sv.get("short_first", False), "scheduler.short_first"),
        pause_long_runs=r.boolean(sv.get("pause_long_runs", True), "scheduler.pause_long_runs"),
        oversize_grant_after=r.number(
            sv.get("oversize_grant_after_s", OVERSIZE_GRANT_AFTER_S),
            "scheduler.oversize_grant_after_s",
            minimum=0,
            optional=True,
        ),
    )
    pols = top.get("policies", list(DEFAULT_POLICIES))
    if not isinstance(pols, list) or not pols:
        r.fail("policies", "expected a list of policy names")
    for i, pol in enumerate(pols):
        r.string(pol, f"policies[{i}]", choices=policy_names())
    popts = top.get("policy_options") or {}
    if not isinstance(popts, Mapping):
        r.fail("policy_options", "expected a mapping of policy name to options")
    for pol, o in popts.items():
        if pol not in policy_names():
            r.fail(f"policy_options.{pol}", f"unknown policy; use one of {', '.join(policy_names())}")
        if not isinstance(o, Mapping):
            r.fail(f"policy_options.{pol}", "expected a mapping of option to value")
    notes = top.get("notes") or {}
    sc = Scenario(
        name=name,
        description=str(top.get("description", "")).strip(),
        path=path,
        trace=trace,
        jobs=jobs,
        pools=pools,
        pools_for=pools_for,
        tenant_terms=terms,
        budgets=budgets,
        default_tenant=default_tenant,
        checkpoint=checkpoint,
        estimates=estimates,
        scheduler=sched,
        policies=list(pols),
        policy_options={k: dict(v) for k, v in popts.items()},
        seed=seed,
        notes=dict(notes) if isinstance(notes, Mapping) else {"text": str(notes)},
    )
    for pol in sc.policies:
        sc.make_policy(pol)  # options checked now, not mid-run
    return sc


def _priority_mix(r: _Reader, value) -> dict[Priority, float] | None:
    if value is None:
        return None
    v = r.mapping(value, "jobs.priority_mix", ["high", "normal", "low"])
    mix = {Priority.parse(k): r.number(x, f"jobs.priority_mix.{k}", minimum=0) for k, x in v.items()}
    total = sum(mix.values())
    if not total > 0:
        r.fail("jobs.priority_mix", "the weights must add up to more than 0")
    return {k: x / total for k, x in mix.items()}


def _preemptible_rule(r: _Reader, value) -> dict:
    """``trace`` (the trace's flag, else false), ``true``/``false`` (all or none),
    ``{priorities: [low, normal]}`` or ``{fraction: 0.5}`` (seeded draw)."""
    if value == "trace" or value is None:
        return {"kind": "trace"}
    if isinstance(value, bool):
        return {"kind": "all" if value else "none"}
    v = r.mapping(value, "jobs.preemptible", ["priorities", "fraction"])
    if ("priorities" in v) == ("fraction" in v):
        r.fail("jobs.preemptible", "give either priorities (a list) or fraction, exactly one; or trace, true, false")
    if "priorities" in v:
        lst = v["priorities"]
        if not isinstance(lst, list):
            r.fail("jobs.preemptible.priorities", "expected a list like [low, normal]")
        try:
            return {"kind": "priorities", "set": {Priority.parse(x) for x in lst}}
        except ValueError as exc:
            r.fail("jobs.preemptible.priorities", str(exc))
    frac = r.number(v["fraction"], "jobs.preemptible.fraction", minimum=0)
    if frac > 1:
        r.fail("jobs.preemptible.fraction", "must be between 0 and 1")
    return {"kind": "fraction", "p": frac}


def _assign(trace: Trace, mix: dict[Priority, float] | None, rule: dict, seed: int) -> list[SimJob]:
    """Priority and preemptible flag per job: the trace's where it has them, else drawn with
    a seeded generator in submit order -- the same for every policy."""
    prng = random.Random(f"{seed}:priority")
    frng = random.Random(f"{seed}:preemptible")
    classes = sorted(mix, key=int, reverse=True) if mix else []
    out = []
    for tj in trace.jobs:
        if tj.priority is not None:
            prio = tj.priority
        elif mix:
            x, acc, prio = prng.random(), 0.0, classes[-1]
            for c in classes:
                acc += mix[c]
                if x < acc:
                    prio = c
                    break
        else:
            prio = Priority.NORMAL
        kind = rule["kind"]
        if kind == "trace":
            pre = bool(tj.preemptible)
        elif kind == "all":
            pre = True
        elif kind == "none":
            pre = False
        elif kind == "priorities":
            pre = prio in rule["set"]
        else:
            pre = frng.random() < rule["p"]
        out.append(SimJob(tj, prio, pre))
    return out
