"""Exact placement by dynamic programming over the fabric tree, for objectives that decompose
along it (training's "pack": weighted ring crossings, preferred levels, fresh-rack penalty).

For a domain d, F_d[x] is the least cost of holding at least x pods inside d, counting each
level below d as (weight x domains used). Hosts in a leaf are taken largest first (exact, as
they differ only in capacity); a parent is a 0/1 knapsack over its children, each child offered
as its Pareto frontier of (capacity, cost). Ring crossings are k for k >= 2 but 0 for k == 1,
so the optimum is min over every domain d of F_d[n]: a placement whose lowest single domain is
d pays exactly F_d for the levels below d and nothing above. Vectors have n + 1 entries, so a
100k-GPU fabric solves in a few hundred milliseconds of numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from scheduler.model.topology import Tier
from scheduler.placement import slices
from scheduler.placement.capacity import Capacity

Vector = npt.NDArray[np.float64]
HOST, NVLINK, RACK = Tier.HOST, Tier.NVLINK, Tier.RACK
INF = float("inf")


@dataclass
class Node:
    level: int
    domain: int
    cost: Vector  # F: least cost for capacity >= x, levels below this node only
    hosts: list[tuple[int, int]] = field(default_factory=list)  # leaf: (host, slots) largest first
    group: int = 1  # capacity counts whole groups of this many pods (slices, TP groups)
    children: list[Node] = field(default_factory=list)
    frontiers: list[list[tuple[int, float]]] = field(default_factory=list)
    choices: list[npt.NDArray[np.int32]] = field(default_factory=list)


@dataclass(frozen=True)
class DPResult:
    counts: dict[int, int]
    value: float  # exact optimum of the DP objective


def frontier(cost: Vector, extra: float) -> list[tuple[int, float]]:
    """(capacity, cost + extra) at each x where F steps up: the child's useful offers."""
    steps = np.isfinite(cost) & (cost < np.append(cost[1:], INF))
    steps[0] = False
    return [(int(x), float(cost[x]) + extra) for x in np.nonzero(steps)[0]]


def knapsack(
    n: int, items: list[list[tuple[int, float]]]
) -> tuple[Vector, list[npt.NDArray[np.int32]]]:
    """0/1 knapsack over children, each taken with at most one of its offers."""
    xs = np.arange(n + 1)
    cost = np.full(n + 1, INF)
    cost[0] = 0.0
    choices = []
    for offers in items:
        if not offers:
            choices.append(np.full(n + 1, -1, dtype=np.int32))
            continue
        caps = np.array([c for c, _ in offers], dtype=np.int64)
        prices = np.array([p for _, p in offers])
        cand = cost[np.maximum(xs[None, :] - caps[:, None], 0)] + prices[:, None]
        best = np.argmin(cand, axis=0)
        value = cand[best, xs]
        take = value < cost
        cost = np.where(take, value, cost)
        choices.append(np.where(take, best, -1).astype(np.int32))
    return cost, choices


class TreeDP:
    def __init__(self, capacity: Capacity, weights: list[float], fresh_rack: float) -> None:
        self.capacity = capacity
        self.fabric = capacity.snapshot.fabric
        self.n = capacity.gang.pods
        self.weights = weights
        self.fresh_rack = fresh_rack
        self.nodes: list[Node] = []
        # whole groups per domain at each level (slices, TP groups)
        self.size = slices.sizes(self.fabric, capacity.gang)

    def leaf(self, level: int, domain: int, hosts: list[tuple[int, int]], per_host: float) -> Node:
        hosts.sort(key=lambda hs: (-hs[1], hs[0]))
        group = self.size[level]
        cost = np.full(self.n + 1, INF)
        cost[0] = 0.0
        total = 0
        for j, (_, slots) in enumerate(hosts, start=1):
            total += slots
            usable = min(total - total % group, self.n)
            cost[: usable + 1] = np.minimum(cost[: usable + 1], j * per_host)
        node = Node(level, domain, cost, hosts=hosts, group=group)
        self.nodes.append(node)
        return node

    def parent(self, level: int, domain: int, children: list[Node], extras: list[float]) -> Node:
        frontiers = [frontier(c.cost, e) for c, e in zip(children, extras, strict=True)]
        cost, choices = knapsack(self.n, frontiers)
        group = self.size[min(level, self.fabric.top)]  # the root sits above the top level
        if group > 1:  # this domain offers whole groups: x pods need capacity for ceil(x)
            xs = np.arange(self.n + 1)
            cost = cost[np.minimum(-(-xs // group) * group, self.n)]
        node = Node(
            level,
            domain,
            cost,
            group=group,
            children=children,
            frontiers=frontiers,
            choices=choices,
        )
        self.nodes.append(node)
        return node

    def build(self) -> Node:
        fabric, w = self.fabric, self.weights
        nvlink, rack = fabric.domain[NVLINK], fabric.domain[RACK]
        real: dict[int, list[tuple[int, int]]] = {}
        lone: dict[int, list[tuple[int, int]]] = {}
        for h, slots in self.capacity.slots.items():
            if nvlink[h] in fabric.real_nvlink:
                real.setdefault(nvlink[h], []).append((h, slots))
            else:
                lone.setdefault(rack[h], []).append((h, slots))
        by_rack: dict[int, list[tuple[Node, float]]] = {}
        for v, hosts in real.items():
            node = self.leaf(NVLINK, v, hosts, w[HOST])
            by_rack.setdefault(fabric.parent[NVLINK][v], []).append((node, w[NVLINK]))
        for r, hosts in lone.items():
            # hosts outside NVLink are each their own NVLink domain: both crossings per host
            by_rack.setdefault(r, []).append((self.leaf(RACK, r, hosts, w[HOST] + w[NVLINK]), 0.0))
        level_nodes = {
            r: (
                kids[0][0]
                if len(kids) == 1 and kids[0][0].level == RACK
                else self.parent(RACK, r, [k for k, _ in kids], [e for _, e in kids])
            )
            for r, kids in by_rack.items()
        }
        fresh = self._fresh_racks()
        for level in range(RACK, fabric.depth):
            groups: dict[int, list[tuple[Node, float]]] = {}
            for d, node in level_nodes.items():
                up = fabric.parent[level][d] if level < fabric.top else 0
                extra = w[level] + (self.fresh_rack if level == RACK and d in fresh else 0.0)
                groups.setdefault(up, []).append((node, extra))
            level_nodes = {
                d: self.parent(level + 1, d, [k for k, _ in kids], [e for _, e in kids])
                for d, kids in groups.items()
            }
        return next(iter(level_nodes.values()))

    def _fresh_racks(self) -> set[int]:
        return set(range(len(self.fabric.names[RACK]))) - self.capacity.snapshot.busy_racks()

    def collect(self, node: Node, x: int, out: dict[int, int]) -> None:
        """Trace back the hosts chosen to give `node` capacity >= x."""
        if node.hosts:
            total = 0
            for h, slots in node.hosts:
                if total >= x:
                    break
                out[h] = slots
                total += slots
            return
        for i in range(len(node.children) - 1, -1, -1):
            j = int(node.choices[i][x])
            if j >= 0:
                cap, _ = node.frontiers[i][j]
                self.collect(node.children[i], cap, out)
                x = max(0, x - cap)


def solve_tree(
    capacity: Capacity,
    weights: list[float],
    allowed_top: int,
    fresh_rack: float,
    penalty: list[float],
) -> DPResult | None:
    """Best placement inside one domain of level <= allowed_top (the required level).

    `penalty[level]` is the preferred-level weight: added per domain used at that level, less
    one domain's worth, which a placement inside a single domain of that level never pays."""
    n = capacity.gang.pods
    fits = capacity.pods >= n
    if fits.any():
        return DPResult(
            {best_fit_host(capacity, capacity.hosts[fits], capacity.pods[fits]): n}, 0.0
        )
    dp = TreeDP(capacity, [w + p for w, p in zip(weights, penalty, strict=True)], fresh_rack)
    root = dp.build()
    best: tuple[float, Node] | None = None
    unrestricted = allowed_top == capacity.snapshot.fabric.top
    for node in dp.nodes:
        if node.level > allowed_top and not (node is root and unrestricted):
            continue
        value = float(node.cost[n]) - sum(penalty[: node.level])
        if best is None or value < best[0]:
            best = (value, node)
    if best is None or not np.isfinite(best[0]):
        return None
    hosts: dict[int, int] = {}
    dp.collect(best[1], n, hosts)
    counts = spread_pods(capacity, hosts)
    return None if counts is None else DPResult(counts, best[0])


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
