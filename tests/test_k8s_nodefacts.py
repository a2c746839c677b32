"""Reading GPU node facts: GPU feature discovery's labels, MIG resources, the pools they make (no cluster)."""

from __future__ import annotations

from jupyter_gpusched.backends.kubernetes import KubernetesConfig, build_manifests
from jupyter_gpusched.backends.kubernetes.gang import make_gang
from jupyter_gpusched.backends.kubernetes.manifests import placement_patch
from jupyter_gpusched.backends.kubernetes.nodefacts import (
    gpu_limits,
    gpu_slots,
    mig_memory_mib,
    mig_profile,
    resource_for,
    split_node,
)
from jupyter_gpusched.backends.kubernetes.status import eligible_nodes, placement_of, pools_of
from jupyter_gpusched.core import JobSpec, NodeSpec
from jupyter_gpusched.testing.kwok import fake_gpu_node

CFG = KubernetesConfig()
GFD = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.count": "8"}


def nodes(*objs):
    return {o["metadata"]["name"]: o for o in objs}


def test_mig_names_and_resources():
    assert mig_profile("nvidia.com/mig-1g.10gb") == "mig-1g.10gb"
    assert mig_profile("nvidia.com/gpu") is None and mig_profile("nvidia.com/mig-") is None
    assert resource_for("mig-3g.40gb", CFG) == "nvidia.com/mig-3g.40gb"
    assert resource_for("NVIDIA-A100-SXM4-80GB", CFG) == resource_for(None, CFG) == "nvidia.com/gpu"
    assert split_node("gpu-7/mig-1g.10gb") == ("gpu-7", "mig-1g.10gb") and split_node("gpu-7") == ("gpu-7", None)
    assert mig_memory_mib("mig-1g.10gb", {}) == 10240
    assert mig_memory_mib("mig-1g.10gb", {"nvidia.com/mig-1g.10gb.memory": "9856"}) == 9856
    assert mig_memory_mib("mig-odd", {}) is None


def test_gpu_feature_discovery_labels_give_the_pool_its_facts():
    a = fake_gpu_node("h-1", "h100", 8, labels=GFD)
    b = fake_gpu_node("h-2", "h100", 8, labels=GFD)
    (pool,) = pools_of(nodes(a, b), CFG)
    assert (pool.name, pool.gpu_type, pool.gpu_memory_mib, pool.node_gpus) == (
        "h100",
        "NVIDIA-H100-80GB-HBM3",
        81559,
        8,
    )
    # Nodes that disagree: the pool keeps what they share, nothing else.
    c = fake_gpu_node("h-3", "h100", 4, labels={**GFD, "nvidia.com/gpu.count": "4", "nvidia.com/gpu.memory": "x"})
    (pool,) = pools_of(nodes(a, c), CFG)
    assert pool.gpu_type == "NVIDIA-H100-80GB-HBM3" and pool.gpu_memory_mib is None and pool.node_gpus is None
    # Unlabelled nodes: no facts (as before).
    (pool,) = pools_of(nodes(fake_gpu_node("x", "plain", 8)), CFG)
    assert pool.gpu_type is None and pool.gpu_memory_mib is None and pool.node_gpus is None


def test_a_mixed_mig_node_is_one_core_node_per_resource():
    node = fake_gpu_node(
        "mig-1",
        "a100",
        4,
        labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        extra_resources={"nvidia.com/mig-1g.10gb": 7, "nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-2g.20gb": 0},
    )
    slots = {s.name: s for s in gpu_slots(node, CFG)}
    assert set(slots) == {"mig-1", "mig-1/mig-1g.10gb", "mig-1/mig-3g.40gb"}  # a profile with 0 left out
    assert slots["mig-1/mig-1g.10gb"].resource == "nvidia.com/mig-1g.10gb"
    assert eligible_nodes(nodes(node), CFG) == {
        "mig-1": NodeSpec("mig-1", 4, "a100"),
        "mig-1/mig-1g.10gb": NodeSpec("mig-1/mig-1g.10gb", 7, "a100/mig-1g.10gb"),
        "mig-1/mig-3g.40gb": NodeSpec("mig-1/mig-3g.40gb", 2, "a100/mig-3g.40gb"),
    }
    pools = {p.name: p for p in pools_of(nodes(node), CFG)}
    assert pools["a100"].gpu_type == "NVIDIA-A100-SXM4-80GB"
    assert (pools["a100/mig-1g.10gb"].gpu_type, pools["a100/mig-1g.10gb"].gpu_memory_mib) == ("mig-1g.10gb", 10240)
    assert pools["a100/mig-3g.40gb"].gpu_type == "mig-3g.40gb"
    # Placement: the Kubernetes node and its pool label value, not the core's names.
    assert placement_of("mig-1/mig-1g.10gb", nodes(node), {}, CFG) == ("mig-1", "a100", False)
    # A node all in MIG slices offers no whole GPUs.
    only_mig = fake_gpu_node("mig-2", "a100", 0, extra_resources={"nvidia.com/mig-1g.10gb": 7})
    assert [s.name for s in gpu_slots(only_mig, CFG)] == ["mig-2/mig-1g.10gb"]
    # allowed_pools names the nodes' own pools.
    assert gpu_slots(node, KubernetesConfig(pools=("other",))) == []
    assert len(gpu_slots(node, KubernetesConfig(pools=("a100",)))) == 3


def test_a_mig_job_requests_its_slice_and_every_pod_tolerates_the_gpu_taint():
    cfg = KubernetesConfig(tolerations=({"key": "dedicated", "operator": "Equal", "value": "ml"},))
    spec = JobSpec(notebook="a.ipynb", gpus=2, gpu_type="mig-1g.10gb")
    job, _ = build_manifests("j1", spec, "{}", {}, cfg)
    assert gpu_limits(job) == {"nvidia.com/mig-1g.10gb": "2"}
    # The resource of the slot the core chose wins (a job without gpu_type placed on a MIG node).
    job, _ = build_manifests(
        "j2", JobSpec(notebook="a.ipynb", gpus=1), "{}", {}, cfg, gpu_resource="nvidia.com/mig-3g.40gb"
    )
    assert gpu_limits(job) == {"nvidia.com/mig-3g.40gb": "1"}
    gpu_taint = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    extra = {"key": "dedicated", "operator": "Equal", "value": "ml"}
    assert job["spec"]["template"]["spec"]["tolerations"] == [gpu_taint, extra]
    patch = placement_patch("mig-1", "a100", False, 1, cfg)
    assert patch["spec"]["template"]["spec"]["tolerations"] == [gpu_taint, extra]
    assert placement_patch("s", "spot", True, 1, KubernetesConfig(gpu_taint=""))["spec"]["template"]["spec"][
        "tolerations"
    ] == [{"key": "gpusched.io/spot", "operator": "Exists"}]
    # A gang of MIG slices keeps its resource (one pod per node, the node's share each).
    job, _ = build_manifests("j3", JobSpec(notebook="a.ipynb", gpus=14, gpu_type="mig-1g.10gb"), "{}", {}, cfg)
    make_gang(job, 2, 7, cfg)
    assert gpu_limits(job) == {"nvidia.com/mig-1g.10gb": "7"}


def test_manifest_command_shows_a_mig_jobs_resource(tmp_path, capsys):
    import yaml

    from jupyter_gpusched.cli.manifest import manifest_main
    from jupyter_gpusched.testing.notebooks import make_notebook

    nb = make_notebook(tmp_path / "a.ipynb", "print(1)")
    assert manifest_main([str(nb), "--gpus", "3", "--gpu-type", "mig-1g.10gb", "--no-configmap"]) == 0
    (job,) = list(yaml.safe_load_all(capsys.readouterr().out))
    assert gpu_limits(job) == {"nvidia.com/mig-1g.10gb": "3"}
