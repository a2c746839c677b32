"""Cluster capacity and packing jobs onto nodes.

A job's GPUs go on one node (best fit: the node with the fewest free GPUs that still
holds it, so large holes stay open for large jobs). A job larger than any node takes
whole free nodes plus a best-fit remainder. Nodes are kept in buckets by free-GPU
count per pool, so finding a node costs O(GPUs per node), not O(nodes).

A node that reports its CPUs and memory (NodeSpec.cpus / .memory) also holds a job to
them: a job asking `cpus` / `memory` (MiB, per node it runs on) goes only where they are
free, and waits otherwise. A node that does not report them never refuses a job for them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from .model import Allocation, NodeSpec, Pool


def _counted(amount: float | None) -> float:
    return float("inf") if amount is None else float(amount)


class UnknownNode(KeyError):
    pass


class Cluster:
    def __init__(self, nodes: Iterable[NodeSpec] = (), pools: Iterable[Pool] = ()):
        self.pools: dict[str, Pool] = {p.name: p for p in pools}
        self._capacity: dict[str, int] = {}
        self._pool_of: dict[str, str] = {}
        self._free: dict[str, list[int]] = {}  # sorted free GPU indices per node
        self._busy: dict[str, set[int]] = {}
        self._fenced: dict[str, set[int]] = {}
        # pool -> list indexed by free count -> ordered set (dict) of node names
        self._buckets: dict[str, list[dict[str, None]]] = {}
        self._caps: dict[str, dict[int, int]] = {}  # pool -> node capacity -> how many nodes
        self._spare: dict[str, list[float]] = {}  # node -> [free CPUs, free MiB] (inf: not counted)
        self._size: dict[str, tuple[float, float]] = {}  # node -> (CPUs, MiB) (inf: not counted)
        self.total_gpus = 0
        self.free_gpus = 0
        for node in nodes:
            self.add_node(node)

    # --- inventory -------------------------------------------------------------------
    def add_node(self, node: NodeSpec) -> None:
        if node.name in self._capacity:
            raise ValueError(f"node {node.name!r} already in the cluster")
        if node.gpus < 0:
            raise ValueError(f"node {node.name!r} has a negative GPU count")
        if node.pool not in self.pools:
            self.pools[node.pool] = Pool(node.pool)
        self._capacity[node.name] = node.gpus
        self._pool_of[node.name] = node.pool
        self._free[node.name] = list(range(node.gpus))
        self._busy[node.name] = set()
        self._fenced[node.name] = set()
        self._size[node.name] = (_counted(node.cpus), _counted(node.memory))
        self._spare[node.name] = list(self._size[node.name])
        buckets = self._buckets.setdefault(node.pool, [])
        while len(buckets) <= node.gpus:
            buckets.append({})
        buckets[node.gpus][node.name] = None
        caps = self._caps.setdefault(node.pool, {})
        caps[node.gpus] = caps.get(node.gpus, 0) + 1
        self.total_gpus += node.gpus
        self.free_gpus += node.gpus

    def remove_node(self, name: str) -> None:
        """Drop a node (spot reclaim, scale-in). The caller first moves its jobs away."""
        self._require(name)
        if self._busy[name]:
            raise ValueError(f"node {name!r} still has GPUs allocated")
        free = len(self._free[name])
        del self._buckets[self._pool_of[name]][free][name]
        caps = self._caps[self._pool_of[name]]
        caps[self._capacity[name]] -= 1
        if not caps[self._capacity[name]]:
            del caps[self._capacity[name]]
        self.total_gpus -= self._capacity[name]
        self.free_gpus -= free
        for table in (self._capacity, self._pool_of, self._free, self._busy, self._fenced, self._spare, self._size):
            del table[name]

    def _require(self, name: str) -> None:
        if name not in self._capacity:
            raise UnknownNode(name)

    def __contains__(self, name: str) -> bool:
        return name in self._capacity

    @property
    def node_names(self) -> list[str]:
        return list(self._capacity)

    def capacity(self, name: str) -> int:
        return self._capacity[name]

    def pool_of(self, name: str) -> str:
        return self._pool_of[name]

    def preempt_grace(self, allocation: Allocation) -> float | None:
        """The grace period of the pool a job placed on `allocation` runs in (a job is placed within one pool);
        None: the pool sets none (or the node is gone), so the backend's own setting holds."""
        node = allocation[0][0] if allocation else None
        if node is None or node not in self._pool_of:
            return None
        pool = self.pools.get(self._pool_of[node])
        return None if pool is None else pool.preempt_grace

    def free_on(self, name: str) -> int:
        return len(self._free[name])

    def free_ids(self, name: str) -> tuple[int, ...]:
        return tuple(self._free[name])

    def fenced_on(self, name: str) -> tuple[int, ...]:
        return tuple(sorted(self._fenced[name]))

    def nodes_in(self, pool: str) -> list[str]:
        return [n for n, p in self._pool_of.items() if p == pool]

    # (from the per-pool capacity counts: O(pools), not O(nodes); submit calls these)
    def pool_gpus(self, pool: str) -> int:
        return sum(cap * count for cap, count in self._caps.get(pool, {}).items())

    def free_in_pool(self, pool: str) -> int:
        """Free GPUs on the nodes of `pool` (from the buckets: O(GPUs per node))."""
        return sum(free * len(nodes) for free, nodes in enumerate(self._buckets.get(pool) or ()))

    def max_node_gpus(self, pools: Iterable[str] | None = None) -> int:
        wanted = self._caps if pools is None else set(pools)
        return max((max(self._caps[p], default=0) for p in wanted if p in self._caps), default=0)

    def largest_placeable(self, exclude: Collection[str] = ()) -> int:
        """No job can be placed now, outside `exclude`, on more GPUs than this (`place`'s rules): all
        free GPUs when some node is wholly free (a job larger than a node takes whole free nodes),
        else the most free on one node (a job that fits a node is never split)."""
        hole = 0
        for pool, buckets in self._buckets.items():
            for cap in self._caps.get(pool, ()):
                if cap < len(buckets) and any(self._capacity[n] == cap and n not in exclude for n in buckets[cap]):
                    return self.free_gpus
            for free in range(len(buckets) - 1, hole, -1):
                if any(n not in exclude for n in buckets[free]):
                    hole = free
                    break
        return hole

    def could_ever_fit(self, gpus: int, pools: Iterable[str] | None = None) -> bool:
        """Would `gpus` fit on an empty cluster (restricted to `pools`)?"""
        total = self.total_gpus if pools is None else sum(self.pool_gpus(p) for p in set(pools))
        return 0 < gpus <= total

    def cpus_memory_problem(self, cpus: float, memory: int) -> tuple[str, str] | None:
        """(field, sentence) if `cpus` / `memory` are not a valid ask or fit on no node even when it is empty."""
        if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or not 0 <= cpus < float("inf"):
            return "cpus", "cpus must be a number of CPUs, 0 or more"
        if isinstance(memory, bool) or not isinstance(memory, int) or memory < 0:
            return "memory", "memory must be a whole number of MiB, 0 or more"
        most_cpus = max((size[0] for size in self._size.values()), default=0.0)
        most_memory = max((size[1] for size in self._size.values()), default=0.0)
        if cpus > most_cpus:
            return "cpus", f"{cpus:g} CPUs requested but no node has more than {most_cpus:g}"
        if memory > most_memory:
            return "memory", f"{memory} MiB of memory requested but no node has more than {most_memory:.0f}"
        return None

    def room_for(self, name: str, cpus: float = 0.0, memory: int = 0) -> bool:
        """Has node `name` `cpus` CPUs and `memory` MiB free (beside its GPUs)?"""
        spare = self._spare[name]
        return cpus <= spare[0] and memory <= spare[1]

    # --- finding room ----------------------------------------------------------------
    def best_fit(
        self,
        gpus: int,
        pools: Iterable[str] | None = None,
        exclude: frozenset[str] | set[str] = frozenset(),
        cpus: float = 0.0,
        memory: int = 0,
    ) -> str | None:
        """The node with the fewest free GPUs that still holds `gpus` (and `cpus`, `memory`), or None."""
        best: str | None = None
        best_free = 1 << 30
        for pool in self._buckets if pools is None else pools:
            buckets = self._buckets.get(pool)
            if not buckets:
                continue
            for free in range(gpus, min(len(buckets), best_free)):
                for name in buckets[free]:
                    if name not in exclude and self.room_for(name, cpus, memory):
                        best, best_free = name, free
                        break
                if best_free == free:
                    break
        return best

    def place(
        self,
        gpus: int,
        pools: Iterable[str] | None = None,
        exclude: frozenset[str] | set[str] = frozenset(),
        cpus: float = 0.0,
        memory: int = 0,
    ) -> Allocation | None:
        """Where `gpus` GPUs would go now (on nodes with `cpus` CPUs and `memory` MiB free), or None.
        Does not take them (see `take`)."""
        if gpus <= 0 or gpus > self.free_gpus:
            return None
        pool_list = list(self._buckets) if pools is None else list(pools)
        node = self.best_fit(gpus, pool_list, exclude, cpus, memory)
        if node is not None:
            return ((node, tuple(self._free[node][:gpus])),)
        # (the buckets list only grows, so ask the live capacities, not its length)
        if gpus <= max((max(self._caps.get(p) or (0,)) for p in pool_list), default=0):
            return None  # it fits one node's capacity: wait for one rather than split it
        # Larger than any node: whole free nodes, largest first, then a best-fit remainder.
        whole: list[str] = []
        remaining = gpus
        candidates = []
        for pool in pool_list:
            buckets = self._buckets.get(pool) or []
            for free in range(len(buckets) - 1, 0, -1):
                for name in buckets[free]:
                    if name not in exclude and free == self._capacity[name] and self.room_for(name, cpus, memory):
                        candidates.append((-free, name))
        candidates.sort()
        for neg_free, name in candidates:
            if remaining <= 0:
                break
            if -neg_free <= remaining:
                whole.append(name)
                remaining += neg_free
        if remaining > 0:
            tail = self.best_fit(remaining, pool_list, set(exclude) | set(whole), cpus, memory)
            if tail is None:
                return None
            whole.append(tail)
        if not whole or len(whole) == 1:
            return None  # a single node would have been found by best_fit
        alloc = []
        left = gpus
        for name in whole:
            n = min(left, len(self._free[name]))
            alloc.append((name, tuple(self._free[name][:n])))
            left -= n
        return tuple(alloc)

    # --- taking and giving back --------------------------------------------------------
    def _move(self, name: str, old_free: int) -> None:
        buckets = self._buckets[self._pool_of[name]]
        del buckets[old_free][name]
        buckets[len(self._free[name])][name] = None

    def take(self, allocation: Allocation, cpus: float = 0.0, memory: int = 0) -> None:
        """Take the GPUs of `allocation`, and `cpus` CPUs and `memory` MiB on each of its nodes. The CPUs and
        memory are not checked (a job restored after a restart keeps its place even if they no longer fit)."""
        for name, ids in allocation:  # check every node first: a refused take changes nothing
            self._require(name)
            missing = set(ids) - set(self._free[name])
            if missing:
                raise ValueError(f"GPUs {sorted(missing)} on {name!r} are not free")
        for name, ids in allocation:
            self._spare[name][0] -= cpus
            self._spare[name][1] -= memory
            free = self._free[name]
            old = len(free)
            wanted = set(ids)
            self._free[name] = [g for g in free if g not in wanted]
            self._busy[name].update(ids)
            self.free_gpus -= old - len(self._free[name])
            self._move(name, old)

    def release(self, allocation: Allocation, cpus: float = 0.0, memory: int = 0) -> None:
        for name, ids in allocation:
            if name not in self._capacity:
                continue  # the node is gone already (spot reclaim)
            self._spare[name][0] += cpus
            self._spare[name][1] += memory
            old = len(self._free[name])
            busy = self._busy[name]
            back = [g for g in ids if g in busy]
            busy.difference_update(back)
            returned = [g for g in back if g not in self._fenced[name]]
            if returned:
                self._free[name] = sorted(self._free[name] + returned)
                self.free_gpus += len(returned)
                self._move(name, old)

    # --- health fencing ----------------------------------------------------------------
    def fence(self, name: str, gpu: int) -> None:
        """Keep a GPU out of placement (e.g. it still holds memory after its job ended)."""
        self._require(name)
        if not 0 <= gpu < self._capacity[name]:
            raise ValueError(f"node {name!r} has no GPU {gpu}")
        fenced = self._fenced[name]
        if gpu in fenced:
            return
        fenced.add(gpu)
        if gpu in self._free[name]:
            old = len(self._free[name])
            self._free[name].remove(gpu)
            self.free_gpus -= 1
            self._move(name, old)

    def unfence(self, name: str, gpu: int) -> None:
        self._require(name)
        fenced = self._fenced[name]
        if gpu not in fenced:
            return
        fenced.discard(gpu)
        if gpu not in self._busy[name]:
            old = len(self._free[name])
            self._free[name] = sorted(self._free[name] + [gpu])
            self.free_gpus += 1
            self._move(name, old)
