"""The scheduler's driver API and each policy's behaviour on small hand-made cases."""

from __future__ import annotations

import math

import pytest

from jupyter_gpusched.core import (
    Admit,
    Cluster,
    Event,
    IllegalTransition,
    JobSpec,
    JobState,
    NodeSpec,
    Pool,
    Preempt,
    Priority,
    Scheduler,
    SchedulerConfig,
    SpecError,
    Tenant,
    UnknownJob,
    make_policy,
    policy_names,
)
from jupyter_gpusched.core.health import HealthConfig, leaked_gpus, lost_jobs, zombie_processes
from jupyter_gpusched.core.lookahead import MAX_PASSES, QUIET_PASSES, Lookahead
from jupyter_gpusched.core.policies.fifo import FifoPolicy

S = JobState
HIGH, NORMAL, LOW = Priority.HIGH, Priority.NORMAL, Priority.LOW


def sched(sizes=(4,), tenants=(), policy="dynamic", **config) -> Scheduler:
    nodes = [NodeSpec(f"n{i}", g) for i, g in enumerate(sizes)]
    return Scheduler(Cluster(nodes), tenants, policy, SchedulerConfig(**config))


def spec(gpus=1, **kw) -> JobSpec:
    return JobSpec("nb.ipynb", gpus=gpus, **kw)


def admitted(decisions) -> list[str]:
    return [d.job_id for d in decisions if isinstance(d, Admit)]


def preempted(decisions) -> list[str]:
    return [d.job_id for d in decisions if isinstance(d, Preempt)]


def run(s: Scheduler, now: float) -> list[str]:
    """One pass; every admitted job starts at once. Returns the admitted ids."""
    decisions = s.schedule(now)
    for d in decisions:
        if isinstance(d, Admit):
            s.started(d.job_id, now)
    return admitted(decisions)


def snapshot(s: Scheduler) -> tuple:
    return (
        {j.id: (j.state, j.allocation, j.borrowed) for j in s.jobs.values()},
        [j.id for j in s.queue],
        sorted(s.active),
        s.cluster.free_gpus,
        dict(s.ledger.used),
        dict(s.ledger.borrowed),
        set(s.ledger.tenants),
        len(s.events),
    )


# --- submit validation ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(gpus=0), "gpus"),
        (dict(gpus=-2), "gpus"),
        (dict(gpus=True), "gpus"),
        (dict(gpus=1.5), "gpus"),
        (dict(gpus=9), "gpus"),  # more than the whole cluster (8)
        (dict(gpus=7, tenant="capped"), "gpus"),  # above the tenant's quota + burst (6)
        (dict(tenant="ghost"), "tenant"),  # strict_tenants
        (dict(max_runtime=0.0), "max_runtime"),
        (dict(max_runtime=-5.0), "max_runtime"),
        (dict(max_runtime=math.inf), "max_runtime"),
        (dict(max_runtime=math.nan), "max_runtime"),
        (dict(est_runtime=0.0), "est_runtime"),
        (dict(est_runtime=math.nan), "est_runtime"),
        (dict(max_retries=-1), "max_retries"),
        (dict(gpu_type="tpu"), "gpu_type"),
    ],
)
def test_submit_rejects_bad_specs_with_the_field_and_changes_nothing(kwargs, field):
    nodes = [NodeSpec("a", 4, "h100"), NodeSpec("b", 4, "h100")]
    s = Scheduler(
        Cluster(nodes, [Pool("h100", gpu_type="h100")]),
        [Tenant("default", 8), Tenant("capped", 4, burst=2)],
        "dynamic",
        SchedulerConfig(strict_tenants=True),
    )
    before = snapshot(s)
    with pytest.raises(SpecError) as info:
        s.submit(spec(**kwargs), 0.0)
    assert info.value.field == field
    assert info.value.message and str(info.value) == info.value.message
    assert snapshot(s) == before
    assert s.submit(spec(), 0.0).id == "job-0"  # no sequence number was used up


def test_without_strict_tenants_an_unknown_tenant_may_borrow():
    s = sched(tenants=[Tenant("a", 2)])
    job = s.submit(spec(tenant="ghost"), 0.0)
    assert admitted(s.schedule(0.0)) == [job.id]
    assert job.borrowed and set(s.ledger.tenants) == {"a"}
    assert s.queues_view()["ghost"]["running"] == 1


def test_static_limits_submissions_to_the_quota():
    s = sched(sizes=(8,), tenants=[Tenant("a", 2, burst=4)], policy="static")
    with pytest.raises(SpecError) as info:
        s.submit(spec(3, tenant="a"), 0.0)
    assert info.value.field == "gpus" and "at most 2" in info.value.message


def test_submit_records_an_event_and_queues():
    s = sched()
    job = s.submit(spec(owner="ada"), 3.0)
    other = s.submit(spec(), 4.0, job_id="mine")
    assert job.state is S.QUEUED and job.submitted_at == 3.0 and other.id == "mine"
    assert s.events == [
        Event(job.id, 3.0, None, S.QUEUED, "submitted", "ada"),
        Event("mine", 4.0, None, S.QUEUED, "submitted", "user"),
    ]
    assert s.position(job.id) == 0 and s.position("mine") == 1
    with pytest.raises(ValueError, match="duplicate"):
        s.submit(spec(), 5.0, job_id="mine")
    assert s.drain_events() and s.events == []
    with pytest.raises(UnknownJob):
        s.get("nope")


# --- reports from the backend ----------------------------------------------------------------------
def test_start_and_finish():
    s = sched()
    job = s.submit(spec(2), 0.0)
    assert run(s, 1.0) == [job.id]
    assert job.state is S.RUNNING and s.cluster.free_gpus == 2
    s.finished(job.id, 11.0, ok=True)
    assert job.state is S.SUCCEEDED and job.finished_at == 11.0
    assert job.attained_gpu_s == 20.0 and job.allocation == ()
    assert s.cluster.free_gpus == 4 and s.ledger.used["default"] == 0 and not s.active
    events = [e for e in s.events if e.job_id == job.id]
    assert [(e.src, e.dst, e.actor) for e in events] == [
        (None, S.QUEUED, "user"),
        (S.QUEUED, S.ADMITTED, "scheduler"),
        (S.ADMITTED, S.RUNNING, "backend"),
        (S.RUNNING, S.SUCCEEDED, "backend"),
    ]
    assert events[-1].reason == "completed"


def test_a_queued_job_can_be_failed_and_leaves_the_queue():
    """Regression: QUEUED -> FAILED is legal, but `finished` left the job in the queue, so the
    next pass tried to admit a FAILED job and raised IllegalTransition."""
    s = sched()
    job = s.submit(spec(), 0.0)
    other = s.submit(spec(), 0.0)
    s.finished(job.id, 1.0, ok=False, reason="notebook not found")
    assert job.state is S.FAILED and job.id not in s.queue and s.position(job.id) is None
    assert run(s, 2.0) == [other.id]


def test_failure_reason():
    s = sched()
    job = s.submit(spec(), 0.0)
    run(s, 0.0)
    s.finished(job.id, 1.0, ok=False, reason="exit code 3")
    assert job.state is S.FAILED and s.events[-1].reason == "exit code 3" and job.reason == "exit code 3"


@pytest.mark.parametrize(
    ("setup", "report"),
    [
        ("admitted", lambda s, j: s.finished(j, 5.0, ok=True)),  # must run before it can succeed
        ("running", lambda s, j: s.not_started(j, 5.0, "x")),  # it did start
        ("queued", lambda s, j: s.lost(j, 5.0)),
        ("queued", lambda s, j: s.preempt(j, 5.0, "x")),
        ("queued", lambda s, j: s.started(j, 5.0)),
        ("running", lambda s, j: s.started(j, 5.0)),
        ("done", lambda s, j: s.lost(j, 5.0)),
        ("done", lambda s, j: s.finished(j, 5.0, ok=True)),
    ],
)
def test_an_illegal_report_raises_and_changes_nothing(setup, report):
    """Regression: `finished`/`not_started` released the job's GPUs before the transition was
    refused, leaving an ADMITTED/RUNNING job that held nothing."""
    s = sched()
    job = s.submit(spec(2), 0.0)
    if setup != "queued":
        s.schedule(0.0)
    if setup in ("running", "done"):
        s.started(job.id, 1.0)
    if setup == "done":
        s.finished(job.id, 2.0, ok=True)
    before = snapshot(s)
    with pytest.raises(IllegalTransition):
        report(s, job.id)
    assert snapshot(s) == before


def test_cancel_in_every_live_state():
    s = sched()
    queued, adm, running = (s.submit(spec(1), 0.0) for _ in range(3))
    s.schedule(0.0)  # all three fit
    s.started(running.id, 1.0)
    s.not_started(queued.id, 1.0, "image pull failed")
    assert queued.state is S.QUEUED and s.cluster.free_gpus == 2
    for job in (queued, adm, running):
        s.cancel(job.id, 2.0)
        assert job.state is S.CANCELLED and s.events[-1].actor == "user"
    assert s.cluster.free_gpus == 4 and not s.active and len(s.queue) == 0
    with pytest.raises(ValueError, match="already ended"):
        s.cancel(adm.id, 3.0)
    with pytest.raises(UnknownJob):
        s.cancel("nope", 3.0)
    s.cancel(s.submit(spec(), 4.0).id, 4.0, actor="admin", reason="policy")
    assert s.events[-1].actor == "admin" and s.events[-1].reason == "policy"


def test_lost_is_retried_until_max_retries_then_fails():
    s = sched()
    job = s.submit(spec(2, max_retries=2), 0.0)
    for attempt in (1, 2):
        assert run(s, 10.0 * attempt) == [job.id]
        s.lost(job.id, 10.0 * attempt + 5, reason="no heartbeat")
        assert job.state is S.QUEUED and job.lost_count == attempt and s.cluster.free_gpus == 4
        assert s.events[-2].dst is S.LOST and s.events[-2].actor == "health"
        assert s.events[-1].dst is S.QUEUED and f"retry {attempt}/2" in s.events[-1].reason
    run(s, 30.0)
    s.lost(job.id, 35.0)
    assert job.state is S.FAILED and job.lost_count == 3 and job.attempts == 3
    assert "lost 3 times" in job.reason and s.cluster.free_gpus == 4
    assert [e.dst for e in s.events[-2:]] == [S.LOST, S.FAILED]


def test_no_retries_fails_at_once():
    s = sched()
    job = s.submit(spec(max_retries=0), 0.0)
    s.schedule(0.0)  # lost before it even started
    s.lost(job.id, 1.0, "start timeout")
    assert job.state is S.FAILED


def test_node_lost_preempts_and_requeues_its_jobs():
    s = sched(sizes=(4, 4))
    a = s.submit(spec(4), 0.0)
    b = s.submit(spec(2), 0.0)
    c = s.submit(spec(2), 0.0)
    run(s, 0.0)
    assert a.nodes == ("n0",) and b.nodes == c.nodes == ("n1",)
    hit = s.node_lost("n1", 5.0, reason="spot reclaimed")
    assert [j.id for j in hit] == [b.id, c.id]
    for job in (b, c):
        assert job.state is S.QUEUED and job.preemptions == 1 and job.lost_count == 0
        assert job.allocation == ()
    assert a.state is S.RUNNING
    assert "n1" not in s.cluster and "n1" not in s.on_node
    assert s.cluster.total_gpus == 4 and s.cluster.free_gpus == 0
    moves = [(e.job_id, e.src, e.dst) for e in s.events[-4:]]
    assert moves == [
        (b.id, S.RUNNING, S.PREEMPTED),
        (b.id, S.PREEMPTED, S.QUEUED),
        (c.id, S.RUNNING, S.PREEMPTED),
        (c.id, S.PREEMPTED, S.QUEUED),
    ]
    assert s.node_lost("n9", 6.0) == []  # an unknown node: nothing to do
    s.add_node(NodeSpec("n2", 4))
    assert sorted(run(s, 7.0)) == [b.id, c.id]


def test_node_lost_frees_every_node_of_a_spanning_job():
    s = sched(sizes=(2, 2, 2))
    job = s.submit(spec(5), 0.0)
    run(s, 0.0)
    assert len(job.nodes) == 3
    s.node_lost(job.nodes[1], 1.0)
    assert job.state is S.QUEUED and s.cluster.free_gpus == 4 and s.cluster.total_gpus == 4


def test_preempt_and_checkpoint():
    s = sched()
    job = s.submit(spec(2), 0.0)
    run(s, 0.0)
    s.checkpointed(job.id, 7.0)
    assert job.last_checkpoint_at == 7.0
    s.preempt(job.id, 10.0, "admin")
    assert job.state is S.QUEUED and job.preemptions == 1 and job.attained_gpu_s == 20.0
    assert job.started_at is None and job.admitted_at is None and job.first_started_at == 0.0


def test_restore_puts_jobs_back_without_events():
    s = sched()
    a = s.submit(spec(2), 0.0)
    b = s.submit(spec(1), 0.0)
    run(s, 0.0)
    s.finished(b.id, 1.0, ok=True)
    c = s.submit(spec(1), 2.0)
    fresh = sched()
    for job in (a, b, c):
        fresh.restore(job)
    assert fresh.events == [] and fresh.cluster.free_gpus == 2 and list(fresh.queue) == [c]
    assert fresh.ledger.used["default"] == 2 and a.id in fresh.on_node["n0"]
    assert fresh.submit(spec(), 3.0).seq > c.seq
    with pytest.raises(ValueError, match="duplicate"):
        fresh.restore(a)


# --- views -----------------------------------------------------------------------------------------
def test_position_and_estimate_start():
    s = sched(policy="fifo")
    running = [s.submit(spec(1, est_runtime=10.0 * (i + 1)), 0.0) for i in range(4)]
    run(s, 0.0)
    a = s.submit(spec(2, est_runtime=5.0), 1.0)
    b = s.submit(spec(1, est_runtime=5.0), 2.0)
    assert (s.position(a.id), s.position(b.id), s.position(running[0].id)) == (0, 1, None)
    # a needs 2 GPUs: free at 10 and 20. It runs 20..25; b takes the 2 GPUs a frees at 25.
    assert s.estimate_start(a.id, 3.0) == 20.0
    assert s.estimate_start(b.id, 3.0) == 25.0
    assert s.estimate_start(running[0].id, 3.0) is None  # not queued
    c = s.submit(spec(4), 4.0)
    d = s.submit(spec(1), 4.0)
    assert s.estimate_start(c.id, 4.0) == 40.0
    assert s.estimate_start(d.id, 4.0) is None  # behind a job with no estimate
    s.finished(running[0].id, 5.0, ok=True)
    assert s.estimate_start(a.id, 5.0) == 20.0


def test_estimate_start_follows_the_policy_not_a_count_of_free_gpus():
    # Tenant a's 4-GPU job is larger than a's quota: rule 7 lets it only borrow, and not while
    # b's jobs wait within b's quota. When b's runs end at 100, b's two queued jobs go first and
    # a's waits for them (1,100), though a count of GPUs in line order would say 100.
    s = sched(tenants=[Tenant("a", 2), Tenant("b", 2)])
    running = [s.submit(spec(2, tenant="b", est_runtime=100.0), 0.0) for _ in range(2)]
    assert run(s, 0.0) == [j.id for j in running]
    big = s.submit(spec(4, tenant="a", est_runtime=50.0), 1.0)
    later = [s.submit(spec(2, tenant="b", est_runtime=1000.0), 2.0) for _ in range(2)]
    assert s.position(big.id) == 0
    before = snapshot(s)
    assert s.estimate_start(big.id, 3.0) == 1100.0
    assert [s.estimate_start(j.id, 3.0) for j in later] == [100.0, 100.0]
    assert snapshot(s) == before and s.events  # the copy ran forward; this scheduler did not move
    s.finished(running[0].id, 100.0, ok=True)
    s.finished(running[1].id, 100.0, ok=True)
    assert run(s, 100.0) == [j.id for j in later]  # as estimated


def test_estimate_start_is_bounded_and_unknown_past_the_bound():
    s = sched(policy="fifo")
    s.submit(spec(4, est_runtime=10.0), 0.0)
    run(s, 0.0)
    line = [s.submit(spec(4, est_runtime=10.0), 1.0) for _ in range(5)]
    assert s.estimate_start(line[-1].id, 1.0) == 50.0
    assert Lookahead(s, 1.0, max_passes=3).start_of(line[-1].id) is None  # 6 passes needed


def test_estimate_start_takes_a_run_past_its_estimate_to_end_now():
    s = sched(policy="fifo")
    s.submit(spec(4, est_runtime=10.0), 0.0)
    run(s, 0.0)
    waiting = s.submit(spec(2, est_runtime=10.0), 1.0)
    assert s.estimate_start(waiting.id, 50.0) == 50.0  # never earlier than now


def test_estimate_start_reuses_one_forward_run_until_the_state_changes():
    s = sched(policy="fifo")
    s.submit(spec(4, est_runtime=10.0), 0.0)
    run(s, 0.0)
    a, b = (s.submit(spec(4, est_runtime=10.0), 1.0) for _ in range(2))
    assert s.estimate_start(b.id, 2.0) == 20.0
    first = s._lookahead
    assert s.estimate_start(a.id, 3.0) == 10.0 and s._lookahead is first  # the start it passed on the way
    s.cancel(a.id, 4.0)
    assert s.estimate_start(b.id, 4.0) == 10.0 and s._lookahead is not first
    assert s._lookahead is not None and s._lookahead[1].sim._lookahead is None  # the copy holds no earlier run


def test_estimate_start_sees_a_pause_at_a_checkpoint():
    # a's long run may be paused for a's new job right after a checkpoint once it has run an aging
    # interval (rule 8): at its checkpoint at 3,600 s, in the pass just after it (3,750 s), not at its end
    s = sched(tenants=[Tenant("a", 4)])
    long = s.submit(spec(4, tenant="a", preemptible=True, checkpoint_interval=1800.0, est_runtime=1e5), 0.0)
    assert run(s, 0.0) == [long.id]
    new = s.submit(spec(4, tenant="a", est_runtime=100.0), 10.0)
    assert s.estimate_start(new.id, 10.0) == 3750.0


def test_estimate_start_stops_when_only_wakeups_are_left():
    class Ticking(FifoPolicy):  # asks for a pass every minute, for ever
        def next_wakeup(self, s, now):
            return now + 60.0

    s = Scheduler(Cluster([NodeSpec("n0", 4)]), (), Ticking())
    s.submit(spec(4), 0.0)  # runs with no estimate: never ends
    run(s, 0.0)
    waiting = s.submit(spec(4, est_runtime=10.0), 1.0)
    assert s.estimate_start(waiting.id, 1.0) is None
    assert s._lookahead is not None and s._lookahead[1].passes_left == MAX_PASSES - QUIET_PASSES - 1


def test_estimate_start_steps_over_many_checkpoints_at_once():
    # a run that checkpoints every millisecond (the API allows it) must not cost one step per checkpoint
    s = sched(policy="fifo")
    s.submit(spec(4, checkpoint_interval=0.001, est_runtime=86400.0), 0.0)
    run(s, 0.0)
    waiting = s.submit(spec(4, est_runtime=10.0), 1.0)
    assert s.estimate_start(waiting.id, 1.0) == 86400.0
    with pytest.raises(SpecError, match="checkpoint_interval"):
        s.submit(spec(1, checkpoint_interval=0.0), 2.0)


def test_estimate_start_now_when_it_fits():
    s = sched()
    job = s.submit(spec(2), 0.0)
    assert s.estimate_start(job.id, 7.0) == 7.0


def test_queues_view_and_starvation_bound():
    s = sched(tenants=[Tenant("a", 2, burst=1), Tenant("b", 2)], aging_interval=60.0)
    s.submit(spec(2, tenant="a"), 0.0)
    s.submit(spec(1, tenant="a"), 0.0)
    s.submit(spec(1, tenant="b"), 0.0)
    s.submit(spec(2, tenant="a"), 0.0)
    run(s, 0.0)
    view = s.queues_view()
    none_interactive = {"interactive": 0, "interactive_cap": 2, "interactive_queued": 0, "interactive_running": 0}
    assert view["a"] == {
        "quota": 2,
        "burst": 1,
        "used": 3,
        "borrowed": 1,
        "queued": 1,
        "queued_gpus": 2,
        "running": 2,
        **none_interactive,
    }
    assert view["b"] == {
        "quota": 2,
        "burst": None,
        "used": 1,
        "borrowed": 0,
        "queued": 0,
        "queued_gpus": 0,
        "running": 1,
        **none_interactive,
    }
    assert s.starvation_bound(LOW) == 120.0 and s.starvation_bound(HIGH) == 0.0


def test_pool_choices():
    pools = [Pool("od"), Pool("spot", spot=True), Pool("a100", gpu_type="a100")]
    nodes = [NodeSpec("o", 4, "od"), NodeSpec("s", 4, "spot"), NodeSpec("g", 4, "a100")]
    s = Scheduler(Cluster(nodes, pools), [], "dynamic")
    assert s.pool_choices(spec()) == [["a100", "od"]]
    assert s.pool_choices(spec(preemptible=True)) == [["spot"], ["a100", "od"]]
    assert s.pool_choices(spec(gpu_type="a100")) == [["a100"]]
    assert s.pool_choices(spec(gpu_type="h100")) == []
    pre = s.submit(spec(preemptible=True), 0.0)
    reg = s.submit(spec(), 0.0)
    s.schedule(0.0)
    assert pre.nodes == ("s",) and reg.nodes[0] != "s"


def test_policy_registry():
    names = policy_names()
    assert {"dynamic", "fifo", "priority", "static"} <= set(names)
    for name in names:
        assert make_policy(name).name == name
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("nope")


# --- health rules ----------------------------------------------------------------------------------
def test_lost_jobs_counts_from_a_start_at_time_zero():
    """Regression: `started_at or now` treated a start at t=0.0 as 'no start', so such a job
    was never declared lost."""
    s = sched()
    a = s.submit(spec(), 0.0)
    b = s.submit(spec(), 0.0)
    c = s.submit(spec(), 0.0)
    s.schedule(0.0)
    s.started(a.id, 0.0)
    s.started(b.id, 0.0)
    cfg = HealthConfig(heartbeat_timeout=60.0, start_timeout=300.0)
    assert lost_jobs(s.active.values(), {b.id: 50.0}, 100.0, cfg) == [a.id]
    assert lost_jobs(s.active.values(), {b.id: 50.0}, 301.0, cfg) == [a.id, b.id, c.id]
    assert lost_jobs(s.active.values(), {a.id: 300.0, b.id: 300.0}, 300.0, cfg) == []


def test_zombies_and_leaks():
    assert zombie_processes(["a", "b"], ["b", "c", "c", "a0"]) == ["a0", "c"]
    cfg = HealthConfig(leak_threshold_mib=256.0)
    mem = {("n0", 0): 1000.0, ("n0", 1): 100.0, ("n1", 0): 4000.0}
    assert leaked_gpus(mem, [("n1", 0)], cfg) == [("n0", 0)]


# --- fifo -------------------------------------------------------------------------------------------
def test_fifo_head_of_line_blocks_everybody():
    s = sched(policy="fifo")
    for _ in range(3):
        s.submit(spec(1), 0.0)
    run(s, 0.0)
    big = s.submit(spec(2, priority=LOW), 1.0)
    small = s.submit(spec(1, priority=HIGH), 2.0)
    assert run(s, 3.0) == []  # one GPU idle, the small job waits behind the big one
    assert s.cluster.free_gpus == 1
    s.finished("job-0", 4.0, ok=True)
    assert run(s, 4.0) == [big.id]
    s.finished("job-1", 5.0, ok=True)
    assert run(s, 5.0) == [small.id]


def test_fifo_ignores_quotas():
    s = sched(tenants=[Tenant("a", 1, burst=0)], policy="fifo")
    jobs = [s.submit(spec(1, tenant="a"), 0.0) for _ in range(3)]
    assert run(s, 0.0) == [j.id for j in jobs]
    assert s.ledger.used["a"] == 3 and not any(j.borrowed for j in jobs)


# --- priority --------------------------------------------------------------------------------------
def test_priority_is_strict_and_fifo_within_a_class():
    s = sched(sizes=(1,), policy="priority")
    low = s.submit(spec(priority=LOW), 0.0)
    n1 = s.submit(spec(priority=NORMAL), 1.0)
    high = s.submit(spec(priority=HIGH), 2.0)
    n2 = s.submit(spec(priority=NORMAL), 3.0)
    order = []
    t = 10.0
    while s.queue or s.active:
        order += run(s, t)
        for job in list(s.active.values()):
            s.finished(job.id, t + 1, ok=True)
        t += 10
    assert order == [high.id, n1.id, n2.id, low.id]


def test_priority_starves_low_under_a_stream_of_high():
    s = sched(sizes=(1,), policy="priority")
    s.submit(spec(priority=HIGH), 0.0)
    run(s, 0.0)
    low = s.submit(spec(priority=LOW), 1.0)
    for t in range(10, 10_000, 10):
        s.submit(spec(priority=HIGH), float(t))
        s.finished(next(iter(s.active)), float(t), ok=True)
        run(s, float(t))
    assert low.state is S.QUEUED  # the baseline dynamic's aging exists to beat


def test_priority_head_of_line():
    s = sched(policy="priority")
    s.submit(spec(3), 0.0)
    run(s, 0.0)
    s.submit(spec(2, priority=HIGH), 1.0)
    small = s.submit(spec(1, priority=HIGH), 2.0)
    assert run(s, 3.0) == [] and small.state is S.QUEUED


# --- static --------------------------------------------------------------------------------------------
def test_static_partitions_leave_gpus_idle():
    s = sched(tenants=[Tenant("a", 2), Tenant("b", 2)], policy="static")
    a_jobs = [s.submit(spec(1, tenant="a"), 0.0) for _ in range(4)]
    assert run(s, 0.0) == [a_jobs[0].id, a_jobs[1].id]
    assert s.cluster.free_gpus == 2 and len(s.queue) == 2  # b's share sits idle
    assert not any(j.borrowed for j in a_jobs)
    b = s.submit(spec(2, tenant="b"), 1.0)
    assert run(s, 1.0) == [b.id]
    assert s.ledger.used == {"a": 2, "b": 2}


def test_static_blocks_per_tenant_only():
    s = sched(sizes=(8,), tenants=[Tenant("a", 3), Tenant("b", 4)], policy="static")
    s.submit(spec(2, tenant="a"), 0.0)
    run(s, 0.0)
    a_big = s.submit(spec(2, tenant="a"), 1.0)  # 2 + 2 > 3: blocks a's line
    a_small = s.submit(spec(1, tenant="a"), 2.0)
    b = s.submit(spec(4, tenant="b"), 3.0)
    assert run(s, 3.0) == [b.id]
    assert a_big.state is S.QUEUED and a_small.state is S.QUEUED and s.cluster.free_gpus == 2


# --- dynamic: quota + burst ------------------------------------------------------------------------------
def test_dynamic_borrows_idle_gpus_beyond_quota():
    s = sched(tenants=[Tenant("a", 2), Tenant("b", 2)])
    jobs = [s.submit(spec(1, tenant="a"), 0.0) for _ in range(4)]
    decisions = s.schedule(0.0)
    assert [(d.job_id, d.borrowed) for d in decisions] == [
        (jobs[0].id, False),
        (jobs[1].id, False),
        (jobs[2].id, True),
        (jobs[3].id, True),
    ]
    assert s.ledger.used["a"] == 4 and s.ledger.borrowed["a"] == 2
    assert set(s.borrowers) == {jobs[2].id, jobs[3].id}


def test_dynamic_burst_caps_borrowing():
    s = sched(tenants=[Tenant("a", 2, burst=1), Tenant("b", 2)])
    jobs = [s.submit(spec(1, tenant="a"), 0.0) for _ in range(4)]
    assert run(s, 0.0) == [j.id for j in jobs[:3]]
    assert s.cluster.free_gpus == 1 and jobs[3].state is S.QUEUED


def test_dynamic_quota_jobs_go_before_borrowing_jobs():
    s = sched(tenants=[Tenant("a", 1), Tenant("b", 2)])
    a1 = s.submit(spec(1, tenant="a"), 0.0)
    a2 = s.submit(spec(2, tenant="a"), 1.0)  # would borrow
    b = s.submit(spec(2, tenant="b"), 2.0)  # within quota, submitted later
    decisions = s.schedule(3.0)
    assert [(d.job_id, d.borrowed) for d in decisions] == [(a1.id, False), (b.id, False)]
    assert a2.state is S.QUEUED


def test_dynamic_reclaims_borrowed_gpus_least_work_lost_first():
    s = sched(tenants=[Tenant("a", 2), Tenant("b", 2)])
    jobs = [s.submit(spec(1, tenant="a"), 0.0) for _ in range(4)]
    run(s, 0.0)
    s.checkpointed(jobs[2].id, 50.0)  # borrowed; only 50 s at risk
    b1 = s.submit(spec(1, tenant="b"), 100.0)
    decisions = s.schedule(100.0)
    assert decisions == [
        Preempt(jobs[2].id, "borrowed GPUs reclaimed for tenant 'b'"),
        Admit(b1.id, (("n0", (2,)),), False),
    ]
    assert jobs[2].state is S.QUEUED and jobs[2].preemptions == 1
    s.started(b1.id, 100.0)
    b2 = s.submit(spec(1, tenant="b"), 101.0)
    assert preempted(s.schedule(101.0)) == [jobs[3].id] and b2.state is S.ADMITTED
    # b is at its quota now: its next job would borrow, and borrowing never reclaims
    b3 = s.submit(spec(1, tenant="b"), 102.0)
    assert s.schedule(102.0) == [] and b3.state is S.QUEUED
    assert jobs[0].state is jobs[1].state is S.RUNNING  # a's own share is never touched
    assert s.ledger.used == {"a": 2, "b": 2} and s.ledger.borrowed.get("b", 0) == s.ledger.borrowed["a"] == 0


def test_dynamic_never_reclaims_from_the_same_tenant():
    s = sched(sizes=(3, 2), tenants=[Tenant("a", 3), Tenant("b", 0)])
    j1 = s.submit(spec(3, tenant="a"), 0.0)
    j2 = s.submit(spec(2, tenant="a"), 0.0)
    run(s, 0.0)
    assert (j1.nodes, j1.borrowed, j2.nodes, j2.borrowed) == (("n0",), False, ("n1",), True)
    s.finished(j1.id, 10.0, ok=True)
    jb = s.submit(spec(3, tenant="b"), 10.0)
    run(s, 10.0)
    assert jb.nodes == ("n0",) and jb.borrowed
    j3 = s.submit(spec(1, tenant="a"), 20.0)  # a uses 2 (borrowed) of its 3: within quota
    decisions = s.schedule(20.0)
    # the cheaper victim would be a's own borrowed 2-GPU job; only b's job may be reclaimed
    assert preempted(decisions) == [jb.id] and admitted(decisions) == [j3.id]
    assert j2.state is S.RUNNING


def test_dynamic_a_tenants_newer_jobs_do_not_pass_its_job_waiting_for_quota():
    """Regression (starvation): tenant a (quota 4 = the cluster) runs four 1-GPU jobs; its
    2-GPU job waits. With 3 GPUs in use the 2-GPU job "would borrow", so the quota walk used
    to skip it and admit a's newer 1-GPU job into the freed GPU, every time: it never ran."""
    s = sched(sizes=(4,), tenants=[Tenant("a", 4)])
    first = [s.submit(spec(1, tenant="a"), 0.0) for _ in range(4)]
    run(s, 0.0)
    big = s.submit(spec(2, tenant="a"), 1.0)
    s.finished(first[0].id, 10.0, ok=True)
    small = s.submit(spec(1, tenant="a"), 10.0)
    assert run(s, 10.0) == [] and s.cluster.free_gpus == 1
    assert s.policy.reservations == {big.id: ("n0",)}
    s.finished(first[1].id, 20.0, ok=True)
    assert run(s, 20.0) == [big.id] and not big.borrowed
    assert small.state is S.QUEUED


def test_dynamic_a_job_larger_than_its_quota_only_borrows():
    s = sched(sizes=(4,), tenants=[Tenant("a", 2), Tenant("b", 2)])
    s.submit(spec(1, tenant="b"), 0.0)
    s.submit(spec(1, tenant="b"), 0.0)
    run(s, 0.0)
    big = s.submit(spec(3, tenant="a"), 1.0)  # 3 > a's quota: it can only borrow; a's newer jobs may pass it
    a_small = s.submit(spec(1, tenant="a"), 2.0)
    assert run(s, 2.0) == [a_small.id] and big.state is S.QUEUED


def test_dynamic_grants_a_job_larger_than_its_quota_a_run_after_waiting_one_at_a_time():
    """Rule 7's bound: once it has waited `oversize_grant_after`, the oldest job larger than its
    tenant's quota runs as if within it (it may reclaim, and is not reclaimable); one at a time."""
    s = sched(sizes=(4, 4), tenants=[Tenant("a", 2), Tenant("b", 4), Tenant("c", 2)], oversize_grant_after=100.0)
    b_jobs = [s.submit(spec(1, tenant="b"), 0.0) for _ in range(6)]
    run(s, 0.0)
    lent = [j for j in b_jobs if j.borrowed]
    assert len(lent) == 2 and s.cluster.free_gpus == 2
    big_a = s.submit(spec(3, tenant="a"), 1.0)
    big_c = s.submit(spec(3, tenant="c"), 2.0)
    assert run(s, 50.0) == []  # they can only borrow, and 2 GPUs are idle
    decisions = s.schedule(150.0)  # both have waited 100 s: the older is granted its run
    assert admitted(decisions) == [big_a.id] and preempted(decisions)  # reclaimed b's borrowers to make room
    assert set(preempted(decisions)) <= {j.id for j in lent}
    assert not big_a.borrowed and big_c.state is S.QUEUED
    assert "past tenant 'a''s quota of 2 GPUs after waiting 0.0 h" in s.events[-1].reason
    s.started(big_a.id, 150.0)
    assert run(s, 200.0) == []  # the grant is held while big_a runs
    s.finished(big_a.id, 300.0, ok=True)
    assert run(s, 300.0)[0] == big_c.id and not big_c.borrowed


def test_spot_hybrid_grants_no_run_past_a_quota():
    """spot-hybrid's small on-demand base is not given to a grant (SpotHybridPolicy._granted)."""
    for policy, grants in (("dynamic", True), ("spot-hybrid", False)):
        s = sched(sizes=(4, 4), tenants=[Tenant("a", 2), Tenant("b", 4)], policy=policy, oversize_grant_after=100.0)
        for _ in range(6):
            s.submit(spec(1, tenant="b"), 0.0)  # two of them borrow
        run(s, 0.0)
        big_a = s.submit(spec(3, tenant="a"), 1.0)
        assert (run(s, 150.0) == [big_a.id]) is grants, policy


def test_dynamic_does_not_reclaim_for_a_job_that_would_borrow():
    s = sched(tenants=[Tenant("a", 2), Tenant("b", 1)])
    for _ in range(4):
        s.submit(spec(1, tenant="a"), 0.0)
    run(s, 0.0)
    s.submit(spec(2, tenant="b"), 1.0)  # 2 > b's quota of 1
    assert s.schedule(1.0) == []


# --- dynamic: reservations and backfill ---------------------------------------------------------------------
def test_dynamic_backfill_only_before_the_reserved_start():
    s = sched(sizes=(4, 4, 1))
    s.submit(spec(4, est_runtime=100.0), 0.0)
    s.submit(spec(2, est_runtime=50.0), 0.0)
    run(s, 0.0)
    assert s.jobs["job-0"].nodes == ("n0",) and s.jobs["job-1"].nodes == ("n1",)
    big = s.submit(spec(4), 1.0)
    assert run(s, 1.0) == []
    # n1 frees its 4 GPUs at 50, before n0 (100); the 1-GPU node can never hold it
    assert s.policy.reservations == {big.id: ("n1",)}
    long_a = s.submit(spec(1, est_runtime=80.0), 2.0)
    short = s.submit(spec(1, est_runtime=30.0), 2.0)
    long_b = s.submit(spec(1, est_runtime=80.0), 2.0)
    unknown = s.submit(spec(1), 2.0)
    exact = s.submit(spec(1, est_runtime=48.0), 2.0)
    assert run(s, 2.0) == [long_a.id, short.id, exact.id]
    assert long_a.nodes == ("n2",)  # not reserved: any runtime may go there
    assert short.nodes == exact.nodes == ("n1",)  # they end by 50: they may use the reserved node
    assert long_b.state is unknown.state is S.QUEUED  # 1 GPU idle on n1, but they would delay big
    assert s.cluster.free_gpus == 0
    s.finished(short.id, 32.0, ok=True)
    assert run(s, 32.0) == [] and s.cluster.free_gpus == 1
    s.finished("job-1", 50.0, ok=True)
    s.finished(exact.id, 50.0, ok=True)
    assert run(s, 50.0) == [big.id] and big.nodes == ("n1",)
    assert s.policy.reservations == {}


@pytest.mark.parametrize("estimates", [True, False])
def test_dynamic_large_job_is_not_starved_by_a_stream_of_small_jobs(estimates):
    """A 4-GPU job waits on a 4-GPU node whose 1-GPU jobs end at 10, 20, 30, 40. Each time one
    ends, a new 1-GPU job (runtime 100) arrives. The big job starts at 40 with or without
    runtime estimates. Regression (estimates=False): when the reserved node's start was unknown
    (inf), a job without an estimate (end inf) passed the `end > start` test and backfilled."""
    est = (lambda r: dict(est_runtime=r)) if estimates else (lambda r: {})
    s = sched(sizes=(4,))
    first = [s.submit(spec(1, **est(10.0 * (i + 1))), 0.0) for i in range(4)]
    run(s, 0.0)
    big = s.submit(spec(4), 1.0)
    assert run(s, 1.0) == []
    for i, job in enumerate(first):
        t = 10.0 * (i + 1)
        s.finished(job.id, t, ok=True)
        s.submit(spec(1, **est(100.0)), t)
        got = run(s, t)
        if i < 3:
            assert got == [] and big.state is S.QUEUED
    assert got == [big.id]


def test_dynamic_reservation_does_not_hold_gpus_for_a_drain_days_away():
    """Issue 12 (alibaba-loaded): a reservation behind a job that has run for a day (no
    runtime estimate: expected to run about as long again) held 7 idle GPUs for 30 hours
    while 157 jobs queued. A reservation whose nodes are not expected to drain within one
    aging interval stays the job's, but leaves the free GPUs to other jobs."""
    s = sched(sizes=(4,), aging_interval=3600.0)
    old = s.submit(spec(1), 0.0)
    run(s, 0.0)
    big = s.submit(spec(4), 86_400.0)
    assert run(s, 86_400.0) == [] and s.policy.reservations == {big.id: ("n0",)}
    small = [s.submit(spec(1), 86_401.0) for _ in range(3)]
    assert run(s, 86_401.0) == [j.id for j in small]  # the 3 free GPUs are not held idle
    for j in small + [old]:
        s.finished(j.id, 90_000.0, ok=True)
    assert run(s, 90_000.0) == [big.id]


def test_dynamic_reservation_does_not_trust_an_estimate_its_job_has_outrun():
    """A job 1 minute into an estimated 1 hour is expected to end within the hour; one a day
    past that estimate is not (learned estimates are often short): the reservation stays open."""
    s = sched(sizes=(4,), aging_interval=3600.0)
    old = s.submit(spec(1, est_runtime=3600.0), 0.0)
    run(s, 0.0)
    big = s.submit(spec(4), 90_000.0)
    assert run(s, 90_000.0) == [] and big.id in s.policy.reservations
    small = s.submit(spec(1), 90_001.0)
    assert run(s, 90_001.0) == [small.id]
    s.finished(old.id, 95_000.0, ok=True)
    s.finished(small.id, 95_000.0, ok=True)
    assert run(s, 95_000.0) == [big.id]


def test_dynamic_open_reservation_holds_once_the_jobs_before_it_have_ended():
    """The no-starvation bound with open reservations: a reservation holds at the latest when
    the jobs that were on its node before it was made have ended, since every job started
    there later has run less than the reservation has waited."""
    s = sched(sizes=(4,), aging_interval=100.0)
    old = s.submit(spec(1), 0.0)
    run(s, 0.0)
    big = s.submit(spec(4), 10_000.0)
    fill = [s.submit(spec(1), 10_000.0) for _ in range(3)]
    assert run(s, 10_000.0) == [j.id for j in fill]  # open: the old job may run for hours
    s.finished(old.id, 20_000.0, ok=True)
    late = s.submit(spec(1), 20_000.0)
    assert run(s, 20_000.0) == [] and late.state is S.QUEUED  # held: its free GPU waits for big
    for j in fill:
        s.finished(j.id, 25_000.0, ok=True)
    assert run(s, 25_000.0) == [big.id]


def test_dynamic_reservation_that_holds_its_nodes_keeps_holding_them():
    """Once a reservation holds its nodes (their drain was near), it holds them until its
    job starts, however long the jobs there go on: were it let go when they grew old, small
    jobs would refill the node and the job would get a near drain only while they are young,
    i.e. never when it comes (a 4-GPU job of seed-3x8 waited 11 h that way)."""
    s = sched(sizes=(4,), aging_interval=3600.0)
    blocker = s.submit(spec(1), 0.0)
    run(s, 0.0)
    big = s.submit(spec(4), 60.0)
    assert run(s, 60.0) == []  # the blocker has run 1 min: expected to end soon
    small = s.submit(spec(1), 7_200.0)  # it has run 2 h: now expected 2 h more
    assert run(s, 7_200.0) == [] and small.state is S.QUEUED
    s.finished(blocker.id, 9_000.0, ok=True)
    assert run(s, 9_000.0) == [big.id]


def _long_run(s, gpus=1, at=0.0, **kw):
    """A preemptible run that checkpoints every 30 min, started at `at`."""
    job = s.submit(spec(gpus, preemptible=True, checkpoint_interval=1800.0, **kw), at)
    assert run(s, at) == [job.id]
    return job


def test_dynamic_pauses_a_long_run_right_after_its_checkpoint_for_a_job_that_has_not_run():
    """Least-attained service within the promises (issue 12): a job that has not run yet may
    pause a preemptible run of its own tenant that has run one aging interval, right after that
    run's checkpoint (nothing of it is lost); the paused run waits behind the jobs already queued."""
    s = sched(sizes=(1,), tenants=[Tenant("a", 1)], aging_interval=3600.0)
    long = _long_run(s, tenant="a")
    new = s.submit(spec(1, tenant="a"), 100.0)
    queued = s.submit(spec(1, tenant="a"), 200.0)
    s.checkpointed(long.id, 1800.0)
    assert run(s, 1850.0) == []  # at a checkpoint, but it has run less than an aging interval
    s.checkpointed(long.id, 3600.0)
    assert s.policy.next_wakeup(s, 3600.0) == 3600.0 + 150.0  # the pass that will pause it
    decisions = s.schedule(3700.0)
    assert preempted(decisions) == [long.id] and admitted(decisions) == [new.id]
    assert "paused at its checkpoint" in long.reason or long.state is S.QUEUED
    s.started(new.id, 3700.0)
    s.finished(new.id, 3800.0, ok=True)
    assert run(s, 3800.0) == [queued.id]  # the paused run's place counts from its pause


def test_dynamic_does_not_pause_between_checkpoints():
    """Paused 20 minutes after its checkpoint a run would lose 20 minutes: it is paused at the
    next one, and the driver is asked to wake the scheduler just after it."""
    s = sched(sizes=(1,), aging_interval=3600.0)
    long = _long_run(s)
    s.checkpointed(long.id, 3600.0)
    s.submit(spec(1), 4000.0)
    assert run(s, 4800.0) == [] and long.state is S.RUNNING
    assert s.policy.next_wakeup(s, 4800.0) == 3600.0 + 1800.0 + 150.0


@pytest.mark.parametrize(
    "victim, newcomer",
    [
        ({"preemptible": False}, {}),  # may not be preempted
        ({"checkpoint_interval": None}, {}),  # would lose all its work
        ({"priority": HIGH}, {"priority": NORMAL}),  # a higher class
        ({"tenant": "b"}, {"tenant": "a"}),  # another tenant's guaranteed share
    ],
)
def test_dynamic_pauses_only_what_its_promises_allow(victim, newcomer):
    s = sched(sizes=(1,), tenants=[Tenant("a", 1), Tenant("b", 1)], aging_interval=3600.0)
    kw = {"preemptible": True, "checkpoint_interval": 1800.0, "tenant": "a", **victim}
    long = s.submit(spec(1, **kw), 0.0)
    assert run(s, 0.0) == [long.id]
    s.checkpointed(long.id, 3600.0)
    s.submit(spec(1, **{"tenant": "a", **newcomer}), 100.0)
    assert run(s, 3610.0) == [] and long.state is S.RUNNING


def test_dynamic_job_that_has_run_does_not_pause_others():
    """Only a job that has not run yet pauses another: a paused job does not pause back."""
    s = sched(sizes=(1,), aging_interval=3600.0)
    long = _long_run(s)
    other = s.submit(spec(1, preemptible=True, checkpoint_interval=1800.0), 100.0)
    s.checkpointed(long.id, 3600.0)
    assert run(s, 3610.0) == [other.id] and long.state is S.QUEUED
    s.checkpointed(other.id, 3610.0 + 3600.0)
    assert run(s, 3620.0 + 3600.0) == [] and other.state is S.RUNNING


def test_dynamic_pausing_can_be_turned_off():
    s = sched(sizes=(1,), aging_interval=3600.0, pause_long_runs=False)
    long = _long_run(s)
    s.submit(spec(1), 100.0)
    s.checkpointed(long.id, 3600.0)
    assert run(s, 3610.0) == [] and s.policy.next_wakeup(s, 3610.0) is None


def test_dynamic_pause_that_frees_more_than_it_needs_keeps_the_aging_order():
    """A pause may free more GPUs than its job takes; the rest go to the jobs earlier in the
    aged order first, not to the next one visited (replay_scaling.py --quality 3000 found a
    low-priority job overtaken this way)."""
    s = sched(sizes=(4,), tenants=[Tenant("a", 2), Tenant("b", 2)], aging_interval=3600.0)
    held = s.submit(spec(2, tenant="a"), 0.0)  # a's quota, not preemptible
    long = s.submit(spec(2, tenant="b", preemptible=True, checkpoint_interval=1800.0), 0.0)
    assert run(s, 0.0) == [held.id, long.id]
    low = s.submit(spec(1, tenant="a", priority=LOW), 100.0)  # nothing it may pause
    new = s.submit(spec(1, tenant="b"), 7300.0)  # may pause its tenant's long run
    late = s.submit(spec(1, tenant="a"), 7400.0)  # more than the aging bound after `low`
    s.checkpointed(long.id, 7300.0)
    decisions = s.schedule(7450.0)
    assert preempted(decisions) == [long.id]
    assert admitted(decisions) == [new.id, low.id] and late.state is S.QUEUED


def test_dynamic_short_jobs_backfill_around_a_waiting_large_job():
    s = sched(sizes=(4,))
    first = [s.submit(spec(1, est_runtime=100.0), 0.0) for _ in range(2)]
    run(s, 0.0)
    big = s.submit(spec(4), 1.0)
    short = s.submit(spec(2, est_runtime=50.0), 2.0)
    assert run(s, 2.0) == [short.id]  # ends at 52, before big could start (100)
    for job in first + [short]:
        s.finished(job.id, 100.0, ok=True)
    assert run(s, 100.0) == [big.id]


def test_dynamic_reservation_is_dropped_when_its_job_leaves():
    s = sched(sizes=(4,))
    s.submit(spec(2, est_runtime=10.0), 0.0)
    run(s, 0.0)
    big = s.submit(spec(4), 1.0)
    run(s, 1.0)
    assert big.id in s.policy.reservations
    s.cancel(big.id, 2.0)
    small = s.submit(spec(1), 3.0)
    assert run(s, 3.0) == [small.id] and s.policy.reservations == {}


def test_dynamic_ages_low_priority_past_high():
    s = sched(sizes=(1,), aging_interval=100.0)
    s.submit(spec(priority=HIGH), 0.0)
    run(s, 0.0)
    low = s.submit(spec(priority=LOW), 0.0)
    h1 = s.submit(spec(priority=HIGH), 199.0)  # virtual time -1: ahead of low
    h2 = s.submit(spec(priority=HIGH), 200.0)  # virtual time 0, submitted after low: behind it
    assert [j.id for j in s.queue] == [h1.id, low.id, h2.id]
    order = []
    for t in (300.0, 400.0, 500.0):
        s.finished(next(iter(s.active)), t, ok=True)
        order += run(s, t)
    assert order == [h1.id, low.id, h2.id]


def test_validate_does_not_add_spot_and_on_demand_capacity():
    """A job is placed within one pool group, so a preemptible 6-GPU job on 4 spot + 4
    on-demand GPUs (4-GPU nodes) could never run and is refused at submit."""
    from jupyter_gpusched.core import Cluster, JobSpec, NodeSpec, Pool, Scheduler, SpecError

    cluster = Cluster(
        [NodeSpec("od", 4, "ondemand"), NodeSpec("sp", 4, "spot")],
        [Pool("ondemand"), Pool("spot", spot=True, price_per_gpu_hour=0.3)],
    )
    s = Scheduler(cluster, policy="dynamic")
    with pytest.raises(SpecError) as err:
        s.submit(JobSpec("x.ipynb", gpus=6, preemptible=True), 0.0)
    assert err.value.field == "gpus"
    s.submit(JobSpec("x.ipynb", gpus=4, preemptible=True), 0.0)


def test_priority_parse_accepts_names_and_class_numbers():
    from jupyter_gpusched.core import Priority

    assert Priority.parse("HIGH") is Priority.HIGH and Priority.parse(0) is Priority.LOW
    for bad in ("urgent", 7, True, 1.0):
        with pytest.raises(ValueError):
            Priority.parse(bad)
