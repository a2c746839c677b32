"""Packing jobs onto nodes: best fit, spanning nodes, take/release, fencing, inventory."""

from __future__ import annotations

import random

import pytest

from jupyter_gpusched.core.model import NodeSpec, Pool
from jupyter_gpusched.core.placement import Cluster, UnknownNode


def cluster(*sizes: int, pool: str = "default") -> Cluster:
    return Cluster([NodeSpec(f"n{i}", g, pool) for i, g in enumerate(sizes)])


def occupy(c: Cluster, node: str, gpus: int) -> None:
    c.take(((node, c.free_ids(node)[:gpus]),))


def check(c: Cluster) -> None:
    """The counters agree with the per-node sets."""
    total = sum(c.capacity(n) for n in c.node_names)
    assert c.total_gpus == total
    assert c.free_gpus == sum(c.free_on(n) for n in c.node_names)
    for n in c.node_names:
        free = c.free_ids(n)
        assert list(free) == sorted(set(free))
        assert not set(free) & set(c.fenced_on(n))
        assert all(0 <= g < c.capacity(n) for g in free)


# --- best fit -------------------------------------------------------------------------------------
def test_best_fit_picks_the_fullest_node_that_fits():
    c = cluster(8, 8, 8, 8)
    occupy(c, "n0", 7)  # 1 free
    occupy(c, "n1", 5)  # 3 free
    occupy(c, "n2", 4)  # 4 free
    assert c.best_fit(1) == "n0"
    assert c.best_fit(2) == "n1"
    assert c.best_fit(3) == "n1"
    assert c.best_fit(4) == "n2"
    assert c.best_fit(5) == "n3"
    assert c.best_fit(9) is None
    assert c.place(2) == (("n1", (5, 6)),)
    assert c.best_fit(2, exclude={"n1"}) == "n2"


def test_best_fit_matches_brute_force_on_random_states():
    rng = random.Random(7)
    for _ in range(50):
        sizes = [rng.randint(1, 8) for _ in range(rng.randint(1, 12))]
        c = cluster(*sizes)
        for n in c.node_names:
            if rng.random() < 0.7:
                occupy(c, n, rng.randint(0, c.capacity(n)))
        for g in range(1, 10):
            fits = [c.free_on(n) for n in c.node_names if c.free_on(n) >= g]
            got = c.best_fit(g)
            if not fits:
                assert got is None
            else:
                assert got is not None and c.free_on(got) == min(fits)


def test_largest_placeable_bounds_every_placement_and_is_reached():
    # dynamic sets aside jobs larger than it: it must never be below a size place() finds room for
    rng = random.Random(11)
    for _ in range(200):
        sizes = [rng.choice([2, 4, 8, 8, 16]) for _ in range(rng.randint(1, 8))]
        c = Cluster([NodeSpec(f"n{i}", g, rng.choice(["a", "b"])) for i, g in enumerate(sizes)])
        for n in c.node_names:
            if rng.random() < 0.8:
                occupy(c, n, rng.randint(0, c.capacity(n)))
        exclude = frozenset(n for n in c.node_names if rng.random() < 0.3)
        bound = c.largest_placeable(exclude)
        placeable = [g for g in range(1, c.total_gpus + 1) if c.place(g, exclude=exclude) is not None]
        assert all(g <= bound for g in placeable)
        assert bound <= c.free_gpus and (bound in placeable or bound == 0 or bound == c.free_gpus)


def test_a_job_that_fits_one_node_is_never_split():
    c = cluster(8, 8)
    occupy(c, "n0", 4)
    occupy(c, "n1", 4)
    assert c.free_gpus == 8
    assert c.place(8) is None  # waits for a whole node rather than spanning two half-empty ones
    assert c.place(4) == (("n0", (4, 5, 6, 7)),)


def test_a_job_larger_than_any_node_takes_whole_nodes_plus_a_best_fit_tail():
    c = cluster(8, 8, 4, 8)
    occupy(c, "n3", 5)  # 3 free
    alloc = c.place(19)
    assert alloc == (("n0", tuple(range(8))), ("n1", tuple(range(8))), ("n3", (5, 6, 7)))
    assert c.place(20) == (("n0", tuple(range(8))), ("n1", tuple(range(8))), ("n2", (0, 1, 2, 3)))
    assert c.place(24) is None  # 23 free, but only fully free nodes may be combined
    c.take(alloc)
    assert c.free_gpus == 4
    check(c)


def test_spanning_needs_whole_free_nodes():
    c = cluster(4, 4, 4)
    for n in c.node_names:
        occupy(c, n, 1)
    assert c.free_gpus == 9
    assert c.place(6) is None


def test_place_respects_pools_and_exclusions():
    c = Cluster([NodeSpec("a", 4, "od"), NodeSpec("b", 4, "spot")], [Pool("spot", spot=True)])
    assert c.place(2, pools=["spot"]) == (("b", (0, 1)),)
    assert c.place(2, pools=["od"]) == (("a", (0, 1)),)
    assert c.place(2, pools=["nope"]) is None
    assert c.place(2, exclude={"a"}) == (("b", (0, 1)),)
    assert c.place(2, exclude={"a", "b"}) is None
    assert c.place(8, pools=["od"]) is None
    assert c.place(8) is not None
    assert c.pools["spot"].spot and not c.pools["od"].spot
    assert c.nodes_in("spot") == ["b"] and c.pool_gpus("od") == 4
    assert c.max_node_gpus() == 4 and c.max_node_gpus(["nope"]) == 0
    assert c.could_ever_fit(8) and not c.could_ever_fit(9) and not c.could_ever_fit(0)
    assert c.could_ever_fit(4, ["od"]) and not c.could_ever_fit(5, ["od"])


@pytest.mark.parametrize("gpus", [0, -1])
def test_place_nothing(gpus):
    assert cluster(4).place(gpus) is None


# --- take / release ----------------------------------------------------------------------------
def test_take_and_release_bookkeeping():
    c = cluster(4, 2)
    c.take((("n0", (1, 3)),))
    assert c.free_ids("n0") == (0, 2)
    assert c.free_gpus == 4
    with pytest.raises(ValueError, match="not free"):
        c.take((("n0", (0, 1)),))  # GPU 1 is taken: the whole take is refused
    assert c.free_ids("n0") == (0, 2) and c.free_gpus == 4
    with pytest.raises(UnknownNode):
        c.take((("zz", (0,)),))
    assert c.best_fit(2) == "n1"  # both have 2 free; n1 has been in that bucket longer
    c2 = cluster(2, 2)
    with pytest.raises(ValueError, match="not free"):
        c2.take((("n0", (0,)), ("n1", (0, 5))))  # one bad node: nothing is taken anywhere
    assert c2.free_gpus == 4 and c2.free_ids("n0") == (0, 1)
    c.release((("n0", (3, 1)),))
    assert c.free_ids("n0") == (0, 1, 2, 3) and c.free_gpus == 6
    c.release((("n0", (3,)),))  # releasing twice is harmless
    c.release((("gone", (0,)),))  # so is releasing on a node that left
    assert c.free_gpus == 6
    check(c)


def test_multi_node_take_and_release():
    c = cluster(2, 2)
    alloc = c.place(3)
    c.take(alloc)
    assert c.free_gpus == 1
    c.release(alloc)
    assert c.free_gpus == 4
    check(c)


# --- fencing ---------------------------------------------------------------------------------------
def test_fence_a_free_gpu():
    c = cluster(4)
    c.fence("n0", 2)
    c.fence("n0", 2)  # idempotent
    assert c.free_gpus == 3 and c.fenced_on("n0") == (2,) and 2 not in c.free_ids("n0")
    assert c.place(4) is None
    assert c.place(3) == (("n0", (0, 1, 3)),)
    c.unfence("n0", 2)
    c.unfence("n0", 2)
    assert c.free_gpus == 4 and c.fenced_on("n0") == () and c.free_ids("n0") == (0, 1, 2, 3)
    check(c)


def test_fence_a_busy_gpu_keeps_it_out_after_release():
    c = cluster(4)
    c.take((("n0", (0, 1)),))
    c.fence("n0", 1)
    assert c.free_gpus == 2
    c.release((("n0", (0, 1)),))
    assert c.free_gpus == 3 and c.free_ids("n0") == (0, 2, 3)
    c.unfence("n0", 1)
    assert c.free_gpus == 4
    check(c)


def test_unfence_a_busy_gpu_leaves_it_busy():
    c = cluster(2)
    c.take((("n0", (0,)),))
    c.fence("n0", 0)
    c.unfence("n0", 0)
    assert c.free_ids("n0") == (1,) and c.free_gpus == 1
    c.release((("n0", (0,)),))
    assert c.free_gpus == 2


@pytest.mark.parametrize("gpu", [-1, 4, 99])
def test_fence_rejects_a_gpu_the_node_does_not_have(gpu):
    c = cluster(4)
    with pytest.raises(ValueError, match="no GPU"):
        c.fence("n0", gpu)
    c.unfence("n0", gpu)  # nothing fenced, nothing to do
    assert c.free_gpus == 4 and c.fenced_on("n0") == ()
    with pytest.raises(UnknownNode):
        c.fence("zz", 0)


# --- inventory ---------------------------------------------------------------------------------------
def test_add_node_validation():
    c = cluster(4)
    with pytest.raises(ValueError, match="already"):
        c.add_node(NodeSpec("n0", 2))
    with pytest.raises(ValueError, match="negative"):
        c.add_node(NodeSpec("x", -1))
    c.add_node(NodeSpec("x", 2, "new"))
    assert "x" in c and c.pool_of("x") == "new" and "new" in c.pools
    assert c.total_gpus == 6 and c.free_gpus == 6


def test_remove_node():
    c = cluster(4, 4)
    occupy(c, "n0", 1)
    with pytest.raises(ValueError, match="still has GPUs"):
        c.remove_node("n0")
    c.fence("n1", 0)
    c.remove_node("n1")
    assert "n1" not in c and c.node_names == ["n0"]
    assert c.total_gpus == 4 and c.free_gpus == 3
    assert c.best_fit(1) == "n0"
    with pytest.raises(UnknownNode):
        c.remove_node("n1")
    with pytest.raises(KeyError):
        c.free_on("n1")
    check(c)


def test_after_the_largest_node_leaves_a_job_may_span_the_rest():
    """Regression: `place` used the length of the free-count buckets (which never shrink) as
    the largest node size, so after the 8-GPU node left, a 6-GPU job on two 4-GPU nodes was
    treated as 'fits one node' and never placed."""
    c = cluster(8, 4, 4)
    c.remove_node("n0")
    alloc = c.place(6)
    assert alloc == (("n1", (0, 1, 2, 3)), ("n2", (0, 1)))
    c.add_node(NodeSpec("n3", 8))
    assert c.place(6) == (("n3", tuple(range(6))),)
