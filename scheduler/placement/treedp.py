"""Exact placement by dynamic programming over the fabric tree, for objectives that decompose
along it (training's "pack": weighted ring crossings, preferred levels, fresh-rack penalty).

For a domain d, F_d[x] is the least cost of holding at least x pods inside d, counting each
level below d as (weight x domains used). Hosts in a leaf are taken largest first (exact, as
they differ only in capacity); a parent is a 0/1 knapsack over its children, each child offered
as its Pareto frontier of (capacity, cost). Ring crossings are k for k >= 2 but 0 for k == 1,
so the optimum is min over every domain d of F_d[n]: a placement whose lowest single domain is
d pays exactly F_d for the levels below d and nothing above. A vector ends where its domain's
capacity does (at most n + 1 entries), so low levels work on short vectors.

Promises: the optimum of that objective, exactly, with `bound == value`; except where a parent's
knapsack is wider than `work` cells (the top levels, gangs of thousands of pods), whose merge is
solved in units of several pods (knapsack.py): then `value` is a feasible placement's and
`bound` a valid lower bound within TOLERANCE of it, or the whole tree is solved again exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from scheduler.model.topology import Tier
from scheduler.placement import slices
from scheduler.placement.capacity import Capacity
from scheduler.placement.fragments import Prices
from scheduler.placement.knapsack import (
    INF,
    WORK,
    Ints,
    Merged,
    Vector,
    frontier,
    merge,
    scale_for,
)

HOST, NVLINK, RACK = Tier.HOST, Tier.NVLINK, Tier.RACK
TOLERANCE = 0.01  # a coarse solve is kept when within this share of its own lower bound


@dataclass
class Node:
    level: int
    domain: int
    cost: Vector  # F: least cost for capacity >= x, levels below this node only; inf past its end
    hosts: list[tuple[int, int]] = field(default_factory=list)  # leaf: (host, slots) largest first
    group: int = 1  # capacity counts whole groups of this many pods (slices, TP groups)
    children: list[Node] = field(default_factory=list)
    merged: Merged | None = None  # a parent's knapsack, to trace back
    floor: Vector | None = None  # a lower bound on F where `cost` is not exact

    @property
    def low(self) -> Vector:
        return self.cost if self.floor is None else self.floor


@dataclass(frozen=True)
class Racks:
    """The tree up to the rack level: every node built there, and the rack-level ones. Prices
    for breaking domains start at the rack level and go in as merge extras above it, so a solve
    with other prices (same gang, capacity, weights and work) starts from these."""

    nodes: list[Node]
    tops: dict[int, Node]  # rack -> its node
    work: float


@dataclass(frozen=True)
class DPResult:
    counts: dict[int, int]
    value: float  # the DP objective of `counts`
    bound: float  # a valid lower bound on it: equal where every merge was exact
    racks: Racks | None = None  # what a solve with other breakage prices can start from


class TreeDP:
    def __init__(
        self,
        capacity: Capacity,
        weights: list[float],
        fresh_rack: float,
        work: float = WORK,
        breaks: Prices | None = None,
        racks: Racks | None = None,
    ) -> None:
        self.work = work  # knapsack cells a parent solves exactly (knapsack.scale_for)
        self.capacity = capacity
        self.fabric = capacity.snapshot.fabric
        self.n = capacity.gang.pods
        self.weights = weights
        self.fresh_rack = fresh_rack
        self.breaks = breaks or {}  # level -> price per domain touched (fragments.py)
        self.nodes: list[Node] = []
        # whole groups per domain at each level (slices, TP groups)
        self.size = slices.sizes(self.fabric, capacity.gang)
        self.racks = racks if racks is not None and racks.work == work else None

    def leaf(self, level: int, domain: int, hosts: Ints, slots: Ints, per_host: float) -> Node:
        """Hosts come largest first: j hosts never hold more than the j largest."""
        group = self.size[level]
        total = np.cumsum(slots)
        usable = np.minimum(total - total % group, self.n)  # capacity of the j largest hosts
        xs = np.arange(int(usable[-1]) + 1)
        hosts_needed = np.searchsorted(usable, xs) + 1
        cost = np.asarray(hosts_needed * per_host, dtype=np.float64)
        cost[0] = 0.0
        node = Node(
            level,
            domain,
            cost,
            hosts=list(zip(hosts.tolist(), slots.tolist(), strict=True)),
            group=group,
        )
        self.nodes.append(node)
        return node

    def parent(self, level: int, domain: int, children: list[Node], extras: list[float]) -> Node:
        ups = [frontier(c.cost, e) for c, e in zip(children, extras, strict=True)]
        group = self.size[min(level, self.fabric.top)]  # the root sits above the top level
        scale = 1 if group > 1 else scale_for(self.n, ups, self.work)
        merged = merge(self.n, ups, scale)
        floor = None
        if scale > 1 or any(c.floor is not None for c in children):
            lows = [frontier(c.low, e) for c, e in zip(children, extras, strict=True)]
            floor = self._whole(merge(self.n, lows, scale, up=True).cost, group)
        cost = self._whole(merged.cost, group)
        node = Node(level, domain, cost, group=group, children=children, merged=merged)
        node.floor = floor
        self.nodes.append(node)
        return node

    def _whole(self, cost: Vector, group: int) -> Vector:
        """A domain that offers whole groups: x pods need the capacity for ceil_group(x)."""
        if group == 1:
            return cost
        rounded = np.minimum(-(-np.arange(len(cost)) // group) * group, self.n)
        return cost[rounded[rounded < len(cost)]]

    def build(self) -> Node:
        fabric, w = self.fabric, self.weights
        if self.racks is None:
            self.racks = self._up_to_racks()
        self.nodes = list(self.racks.nodes)
        level_nodes = self.racks.tops
        fresh = self._fresh_racks()
        for level in range(RACK, fabric.depth):
            groups: dict[int, list[tuple[Node, float]]] = {}
            for d, node in level_nodes.items():
                up = fabric.parent[level][d] if level < fabric.top else 0
                extra = w[level] + (self.fresh_rack if level == RACK and d in fresh else 0.0)
                extra += self._price(level, d)
                groups.setdefault(up, []).append((node, extra))
            level_nodes = {
                d: self.parent(level + 1, d, [k for k, _ in kids], [e for _, e in kids])
                for d, kids in groups.items()
            }
        return next(iter(level_nodes.values()))

    def _up_to_racks(self) -> Racks:
        fabric, w = self.fabric, self.weights
        by_rack: dict[int, list[tuple[Node, float]]] = {}
        for key, hosts, slots in self._leaves():
            if key >= 0:
                node = self.leaf(NVLINK, key, hosts, slots, w[HOST])
                by_rack.setdefault(fabric.parent[NVLINK][key], []).append((node, w[NVLINK]))
            else:  # hosts outside NVLink are each their own NVLink domain: both crossings
                node = self.leaf(RACK, -1 - key, hosts, slots, w[HOST] + w[NVLINK])
                by_rack.setdefault(-1 - key, []).append((node, 0.0))
        level_nodes = {
            r: (
                kids[0][0]
                if len(kids) == 1 and kids[0][0].level == RACK
                else self.parent(RACK, r, [k for k, _ in kids], [e for _, e in kids])
            )
            for r, kids in by_rack.items()
        }
        return Racks(list(self.nodes), level_nodes, self.work)

    def _leaves(self) -> Iterator[tuple[int, Ints, Ints]]:
        """Per leaf, its hosts largest first: an NVLink domain of several hosts (key >= 0, its
        index) or the rack's hosts outside any (key -1 - rack)."""
        fabric, hosts, slots = self.fabric, self.capacity.hosts, self.capacity.pods
        nvlink = fabric.columns[NVLINK][hosts]
        real = np.isin(nvlink, np.fromiter(fabric.real_nvlink, dtype=np.int64))
        key = np.where(real, nvlink, -1 - fabric.columns[RACK][hosts])
        order = np.lexsort((hosts, -slots, key))
        key, hosts, slots = key[order], hosts[order], slots[order]
        starts = np.flatnonzero(np.diff(key, prepend=key[0] - 1))
        for a, b in zip(starts.tolist(), [*starts[1:].tolist(), len(key)], strict=True):
            yield int(key[a]), hosts[a:b], slots[a:b]

    def _price(self, level: int, domain: int) -> float:
        prices = self.breaks.get(level)
        return 0.0 if prices is None else float(prices[domain])

    def chain(self, node: Node) -> float:
        """What a placement whose lowest single domain is `node` pays for touching that domain
        and its ancestors (children below it pay theirs as merge extras)."""
        if not self.breaks or node.level > self.fabric.top:
            return 0.0
        level, domain, total = node.level, node.domain, 0.0
        if level < RACK:  # an NVLink domain: its rack is the first priced ancestor
            level, domain = RACK, self.fabric.parent[NVLINK][domain]
        while True:
            total += self._price(level, domain)
            if level >= self.fabric.top:
                return total
            level, domain = level + 1, self.fabric.parent[level][domain]

    def _fresh_racks(self) -> set[int]:
        return set(range(len(self.fabric.names[RACK]))) - self.capacity.snapshot.busy_racks()

    def collect(self, node: Node, x: int, out: dict[int, int]) -> None:
        """Trace back the hosts chosen to give `node` capacity >= x."""
        merged = node.merged
        if merged is None:  # a leaf
            total = 0
            for h, slots in node.hosts:
                if total >= x:
                    break
                out[h] = slots
                total += slots
            return
        units = -(-x // merged.scale)
        for i in range(len(node.children) - 1, -1, -1):
            j = int(merged.choices[i][units])
            if j >= 0:
                self.collect(node.children[i], int(merged.caps[i][j]), out)
                units = max(0, units - int(merged.units[i][j]))


def solve_tree(
    capacity: Capacity,
    weights: list[float],
    allowed_top: int,
    fresh_rack: float,
    penalty: list[float],
    work: float = WORK,
    breaks: Prices | None = None,
    racks: Racks | None = None,
) -> DPResult | None:
    """Best placement inside one domain of level <= allowed_top (the required level).

    `penalty[level]` is the preferred-level weight: added per domain used at that level, less
    one domain's worth, which a placement inside a single domain of that level never pays.
    Parents wider than `work` knapsack cells are merged coarse (knapsack.py); when the result
    is not within TOLERANCE of its own lower bound, the whole tree is solved again exactly.
    `breaks` adds each touched domain's price (fragments.py) to what is minimised; `value` and
    `bound` then include it. `racks`, from an earlier solve of the same gang on the same
    capacity, saves building the tree up to the rack level again."""
    n = capacity.gang.pods
    fits = capacity.pods >= n
    if fits.any():
        host = best_fit_host(capacity, capacity.hosts[fits], capacity.pods[fits])
        return DPResult({host: n}, 0.0, 0.0)
    weighted = [w + p for w, p in zip(weights, penalty, strict=True)]
    dp = TreeDP(capacity, weighted, fresh_rack, work, breaks, racks)
    found = _best(dp, allowed_top, penalty)
    if found is not None and found[0] > found[1] * (1 + TOLERANCE):  # coarse and too loose
        dp = TreeDP(capacity, weighted, fresh_rack, INF, breaks)
        found = _best(dp, allowed_top, penalty)
    if found is None:
        return None
    value, bound, node = found
    hosts: dict[int, int] = {}
    dp.collect(node, n, hosts)
    counts = spread_pods(capacity, hosts)
    return None if counts is None else DPResult(counts, value, bound, dp.racks)


def _best(dp: TreeDP, allowed_top: int, penalty: list[float]) -> tuple[float, float, Node] | None:
    """(value, lower bound, node) of the cheapest domain of level <= allowed_top, if any.

    A coarse merge may miss a placement its lower bound allows: then the value is inf."""
    n = dp.n
    root = dp.build()
    unrestricted = allowed_top == dp.fabric.top
    best: tuple[float, Node] | None = None
    bound = INF
    for node in dp.nodes:
        if node.level > allowed_top and not (node is root and unrestricted):
            continue
        relief = sum(penalty[: node.level]) - dp.chain(node)
        bound = min(bound, _at(node.low, n) - relief)
        value = _at(node.cost, n) - relief
        if best is None or value < best[0]:
            best = (value, node)
    if best is None or not np.isfinite(bound):
        return None
    return best[0], bound, best[1]


def _at(cost: Vector, x: int) -> float:
    return float(cost[x]) if len(cost) > x else INF


def best_fit_host(
    capacity: Capacity, hosts: npt.NDArray[np.int64], slots: npt.NDArray[np.int64]
) -> int:
    """Among hosts that hold the gang alone: keep fresh racks and hosts whole, fit tightly."""
    snapshot = capacity.snapshot
    fabric = snapshot.fabric
    busy = snapshot.free_gpus != fabric.gpus
    busy_rack = np.zeros(len(fabric.names[RACK]), dtype=bool)
    busy_rack[fabric.columns[RACK][busy]] = True
    fresh_rack = ~busy_rack[fabric.columns[RACK][hosts]]
    empty_host = ~busy[hosts]
    # lexsort sorts by the last key first: fresh rack, then empty host, then slots, then index
    order = np.lexsort((hosts, slots, empty_host, fresh_rack))
    return int(hosts[order[0]])


def spread_pods(capacity: Capacity, hosts: dict[int, int]) -> dict[int, int] | None:
    """Fill the chosen hosts in depth-first order, whole groups in every sliced domain."""
    fabric = capacity.snapshot.fabric
    size = slices.sizes(fabric, capacity.gang)
    order = sorted(hosts, key=lambda h: fabric.dfs_position[h])
    return slices.fill(fabric, size, hosts, order, capacity.gang.pods)
