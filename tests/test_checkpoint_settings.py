"""Per-job checkpoint settings (issue 15, follow-up): a grace period per pool (`c.GPUSched.pools[name]
["preempt_grace"]`) on the local and Kubernetes backends, and `checkpoint_interval` chosen at submission."""

from __future__ import annotations

import pytest

from jupyter_gpusched.backends.kubernetes.config import KubernetesConfig
from jupyter_gpusched.backends.kubernetes.manifests import build_manifests
from jupyter_gpusched.backends.preemption import grace_for
from jupyter_gpusched.core import Cluster, JobSpec, NodeSpec, Pool
from jupyter_gpusched.testing.training import train_then_preempt

pytestmark = pytest.mark.timeout(240)


# --- the grace period of a pool --------------------------------------------------------------------------------
def test_a_job_gets_its_pools_grace_else_the_backends():
    cluster = Cluster(
        [NodeSpec("s1", 2, pool="spot"), NodeSpec("d1", 2, pool="demand")],
        [Pool("spot", spot=True, preempt_grace=20.0), Pool("demand")],
    )
    assert cluster.preempt_grace((("s1", (0, 1)),)) == 20.0
    assert cluster.preempt_grace((("d1", (0,)),)) is None  # the pool sets none
    assert cluster.preempt_grace(()) is None and cluster.preempt_grace((("gone", (0,)),)) is None
    assert grace_for(20.0, 30.0) == 20.0 and grace_for(0.0, 30.0) == 0.0  # 0 on a pool: killed at once there
    assert grace_for(None, 30.0) == 30.0


def test_the_pod_of_a_job_on_a_pool_with_a_grace_gets_that_grace():
    cfg = KubernetesConfig(preempt_grace=30.0)
    pool_job, _ = build_manifests("j1", JobSpec("t.ipynb"), "{}", {}, cfg, preempt_grace=12.5)
    plain_job, _ = build_manifests("j2", JobSpec("t.ipynb"), "{}", {}, cfg)
    assert pool_job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 13
    assert plain_job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 30


def test_the_pools_config_carries_the_grace_and_refuses_a_negative_one():
    from jupyter_gpusched.backends import LocalBackend
    from jupyter_gpusched.server.app import GPUSched

    gpusched = GPUSched()
    gpusched.pools = {"spot": {"spot": True, "preempt_grace": 20}, "demand": {}}
    pools = {p.name: p for p in gpusched._pools(LocalBackend(virtual_gpus=1))}
    assert pools["spot"].preempt_grace == 20.0 and pools["demand"].preempt_grace is None
    gpusched.pools = {"spot": {"preempt_grace": -1}}
    with pytest.raises(ValueError, match="preempt_grace of pool 'spot'"):
        gpusched._pools(LocalBackend(virtual_gpus=1))


def test_the_local_backend_gives_a_preempted_job_its_pools_grace(tmp_path):
    # The backend's own grace is 0 (killed at once); the pool's 20 s lets the 4 s last save finish.
    trace, seen = train_then_preempt(
        tmp_path,
        grace=0.0,
        pools=(Pool("local", preempt_grace=20.0),),
        steps=300,
        step_s=0.05,
        save_every=1.0,
        save_s=4.0,
    )
    assert seen["attempts"] == 2 and seen["preemptions"] == 1, seen
    preempted = [s for e, a, s in trace if e == "preempted" and a == 1]
    resumed = [s for e, a, s in trace if e == "start" and a == 2]
    assert preempted and resumed == preempted[-1:], trace  # the last save in the pool's grace is what resumes
    assert ("done", 2, 300) in trace


# --- checkpoint_interval at submission ---------------------------------------------------------------------------
def test_the_submitted_interval_is_a_ceiling_the_policy_may_only_shorten():
    from jupyter_gpusched.core import Scheduler, Tenant
    from jupyter_gpusched.core.model import Job
    from jupyter_gpusched.core.policies.base import Policy

    class Wants(Policy):
        def __init__(self, wanted):
            self.wanted = wanted

        def schedule(self, s, now):
            pass

        def checkpoint_interval(self, s, job, now):
            return self.wanted

    s = Scheduler(Cluster([NodeSpec("n", 1)]), [Tenant("default", 1)], "fifo")
    asked, plain = Job("a", JobSpec("t.ipynb", checkpoint_interval=120.0), 0.0, 0), Job("b", JobSpec("t.ipynb"), 0.0, 1)
    assert Wants(30.0).handed_interval(s, asked, 0.0) == 30.0  # shorter: the policy's (a spot pool)
    assert Wants(600.0).handed_interval(s, asked, 0.0) == 120.0  # longer: the owner's
    assert Wants(None).handed_interval(s, asked, 0.0) == 120.0
    assert Wants(30.0).handed_interval(s, plain, 0.0) is None  # asked for none: none


async def test_a_job_submitted_with_an_interval_gets_it_in_its_environment(api, jp_root_dir):
    import json

    from jupyter_gpusched.testing.notebooks import make_notebook
    from jupyter_gpusched.testing.waits import wait_for_state

    make_notebook(
        jp_root_dir / "ck.ipynb", "import os\nprint('interval', os.environ.get('GPUSCHED_CHECKPOINT_INTERVAL'))"
    )
    code, body = await api("POST", "jobs", {"notebook": "ck.ipynb", "checkpoint_interval": -5})
    assert code == 400 and body["field"] == "checkpoint_interval", body
    code, body = await api("POST", "jobs", {"notebook": "ck.ipynb", "checkpoint_interval": "often"})
    assert code == 400 and body["field"] == "checkpoint_interval", body
    code, job = await api("POST", "jobs", {"notebook": "ck.ipynb", "checkpoint_interval": 45})
    assert code == 201, job
    done = await wait_for_state(api, job["id"], {"SUCCEEDED", "FAILED"})
    assert done["state"] == "SUCCEEDED", done
    code, detail = await api("GET", f"jobs/{job['id']}")
    assert detail["checkpoint_interval"] == 45
    code, out = await api("GET", f"jobs/{job['id']}/output")
    assert "interval 45.0" in json.dumps(out)
