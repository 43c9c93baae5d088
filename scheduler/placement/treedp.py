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
The same answer, faster: each level's exact merges run as one batch (knapsack.merge_many), and
levels or domains that cannot hold anything cheaper than the best found are not built
(treejudge.py).
"""

from __future__ import annotations

from dataclasses import dataclass

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
    Vector,
    frontier,
    merge,
    merge_many,
    scale_for,
)
from scheduler.placement.treejudge import Judge, Node, Prior

HOST, NVLINK, RACK = Tier.HOST, Tier.NVLINK, Tier.RACK
TOLERANCE = 0.01  # a coarse solve is kept when within this share of its own lower bound


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
    lows: dict[int, Vector] | None = None  # per level above racks, per domain (Prior.lows)


class TreeDP:
    def __init__(
        self,
        capacity: Capacity,
        weights: list[float],
        fresh_rack: float,
        allowed_top: int,
        penalty: list[float],
        work: float = WORK,
        breaks: Prices | None = None,
        racks: Racks | None = None,
        prior: Prior | None = None,
        crossing: Prices | None = None,
    ) -> None:
        self.work = work  # knapsack cells a parent solves exactly (knapsack.scale_for)
        self.capacity = capacity
        self.fabric = capacity.snapshot.fabric
        self.n = capacity.gang.pods
        self.weights = weights  # ring weight + preferred-level penalty, per level
        # what is kept of the nodes built, with the prices of touching domains (fragments.py)
        self.judge = Judge(self.fabric, weights, penalty, allowed_top, breaks or {}, self.n, prior)
        self.fresh_rack = fresh_rack
        self.nodes: list[Node] = []
        # whole groups per domain at each level (slices, TP groups)
        self.size = slices.sizes(self.fabric, capacity.gang)
        self.racks = racks if racks is not None and racks.work == work else None
        # what crossing each domain's uplink costs beyond its ring weight (scoring.py: the
        # running gangs that cross it), paid per child of a merge like the ring weight
        self.crossing = crossing or {}

    def leaves(self) -> list[Node]:
        """Every leaf's vector at once: F[x] = (hosts needed for x) x the per-host weight, its
        hosts taken largest first (j hosts never hold more than the j largest)."""
        key, hosts, slots, starts = self._leaves()
        sizes = np.diff(np.append(starts, len(key)))
        nvlink = key[starts] >= 0
        group = np.where(self._whole_rack(key[starts]), self.size[RACK], self.size[NVLINK])
        total = np.cumsum(slots)
        total -= np.repeat(total[starts] - slots[starts], sizes)  # per leaf
        total -= total % np.repeat(group, sizes)
        usable = np.minimum(total, self.n)  # capacity of the j largest hosts, per leaf
        ends = usable[starts + sizes - 1]
        width = int(ends.max()) + 1
        # hosts needed for x = usable entries below x, + 1: one search over all leaves, each
        # leaf's entries shifted into a range of its own
        shift = np.arange(len(starts)) * (self.n + 2)
        queries = shift[:, None] + np.arange(width)
        needed = np.searchsorted(usable + np.repeat(shift, sizes), queries)
        needed -= starts[:, None] - 1
        w = self.weights
        per_host = np.where(nvlink, w[HOST], w[HOST] + w[NVLINK])
        cost = np.asarray(needed * per_host[:, None], dtype=np.float64)
        cost[:, 0] = 0.0
        nodes = []
        for i, (a, b) in enumerate(zip(starts.tolist(), (starts + sizes).tolist(), strict=True)):
            k = int(key[a])
            level, domain = (NVLINK, k) if k >= 0 else (RACK, -1 - k)
            found = Node(level, domain, cost[i, : int(ends[i]) + 1], group=int(group[i]))
            found.hosts = (hosts[a:b], slots[a:b])
            nodes.append(found)
        self.nodes += nodes
        return nodes

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

    def parents(self, level: int, families: dict[int, list[tuple[Node, float]]]) -> dict[int, Node]:
        """`parent` for every domain of a level, the exact merges done together (merge_many);
        one whose children carry lower bounds, or whose knapsack is wide, is merged alone."""
        keeping = self.judge.keep
        if keeping is not None and level in keeping:  # racks are always built
            keep = keeping[level]
            families = {d: kids for d, kids in families.items() if keep[d]}
        group = self.size[min(level, self.fabric.top)]
        plain = [d for d, kids in families.items() if all(k.floor is None for k, _ in kids)]
        work = self.work if group == 1 else INF  # sliced domains are always merged exactly
        batch = merge_many(self.n, [[(k.cost, e) for k, e in families[d]] for d in plain], work)
        merged = dict(zip(plain, batch, strict=True))
        out = {}
        for d, kids in families.items():
            m = merged.get(d)
            if m is None:
                out[d] = self.parent(level, d, [k for k, _ in kids], [e for _, e in kids])
                continue
            children = [k for k, _ in kids]
            out[d] = Node(level, d, self._whole(m.cost, group), group=group, children=children)
            out[d].merged = m
            self.nodes.append(out[d])
        return out

    def _whole(self, cost: Vector, group: int) -> Vector:
        """A domain that offers whole groups: x pods need the capacity for ceil_group(x)."""
        if group == 1:
            return cost
        rounded = np.minimum(-(-np.arange(len(cost)) // group) * group, self.n)
        return cost[rounded[rounded < len(cost)]]

    def solve(self) -> tuple[float, float, Node] | None:
        """(value, lower bound, node) of the cheapest domain of level <= allowed_top, if any.

        Levels are built from the bottom up while a domain there could still beat the best
        found below (treejudge.py). A coarse merge may miss a placement its lower bound allows:
        then the value is inf."""
        fabric, w = self.fabric, self.weights
        if self.racks is None:
            self.racks = self._up_to_racks()
        self.nodes = list(self.racks.nodes)
        self.judge.judge(self.nodes)
        level_nodes = self.racks.tops
        fresh = self._fresh_racks()
        for level in range(RACK, fabric.depth):
            if not self.judge.worth(level + 1):
                break
            groups: dict[int, list[tuple[Node, float]]] = {}
            prices, load = self.judge.prices(level), self.crossing.get(level)
            for d, node in level_nodes.items():
                up = fabric.parent[level][d] if level < fabric.top else 0
                extra = w[level] + (self.fresh_rack if level == RACK and d in fresh else 0.0)
                extra += float(prices[d]) + (float(load[d]) if load is not None else 0.0)
                groups.setdefault(up, []).append((node, extra))
            level_nodes = self.parents(level + 1, groups)
            self.judge.judge(list(level_nodes.values()))
        best, bound = self.judge.best, self.judge.bound
        if best is None or not np.isfinite(bound):
            return None
        return best[0], bound, best[1]

    def _up_to_racks(self) -> Racks:
        fabric, w = self.fabric, self.weights
        by_rack: dict[int, list[tuple[Node, float]]] = {}
        for node in self.leaves():
            if node.level == NVLINK:
                by_rack.setdefault(fabric.parent[NVLINK][node.domain], []).append((node, w[NVLINK]))
            else:  # hosts outside NVLink are each their own NVLink domain: both crossings
                by_rack.setdefault(node.domain, []).append((node, 0.0))
        alone = {r for r, kids in by_rack.items() if len(kids) == 1 and kids[0][0].level == RACK}
        merged = self.parents(RACK, {r: k for r, k in by_rack.items() if r not in alone})
        level_nodes = {r: by_rack[r][0][0] if r in alone else merged[r] for r in by_rack}
        return Racks(list(self.nodes), level_nodes, self.work)

    def _leaves(self) -> tuple[Ints, Ints, Ints, Ints]:
        """Hosts grouped by leaf, largest first in each, with where each leaf starts: a leaf is
        an NVLink domain of several hosts (key >= 0, its index) or the rack's hosts outside any
        (key -1 - rack)."""
        fabric, hosts, slots = self.fabric, self.capacity.hosts, self.capacity.pods
        nvlink = fabric.columns[NVLINK][hosts]
        real = np.isin(nvlink, np.fromiter(fabric.real_nvlink, dtype=np.int64))
        key = np.where(real, nvlink, -1 - fabric.columns[RACK][hosts])
        order = np.lexsort((hosts, -slots, key))
        key, hosts, slots = key[order], hosts[order], slots[order]
        return key, hosts, slots, np.flatnonzero(np.diff(key, prepend=key[0] - 1))

    def _whole_rack(self, keys: Ints) -> npt.NDArray[np.bool_]:
        """Which leaves are all their rack offers: the hosts outside NVLink of a rack with no
        NVLink domain in the capacity. Only such a leaf may count whole rack slices; where a rack
        has both, its outside hosts are a part of it, and the rack's merge rounds their sum with
        its NVLink domains' (rounding each part alone loses the slice they make together)."""
        mixed = np.unique(self.fabric.parent_columns[NVLINK][keys[keys >= 0]])
        return (keys < 0) & ~np.isin(-1 - keys, mixed)

    def _fresh_racks(self) -> set[int]:
        return set(range(len(self.fabric.names[RACK]))) - self.capacity.snapshot.busy_racks()

    def collect(self, node: Node, x: int, out: dict[int, int]) -> None:
        """Trace back the hosts chosen to give `node` capacity >= x."""
        merged = node.merged
        if merged is None:  # a leaf
            total = 0
            hosts, pods = node.hosts or (np.zeros(0, np.int64), np.zeros(0, np.int64))
            for h, slots in zip(hosts.tolist(), pods.tolist(), strict=True):
                if total >= x:
                    break
                out[h] = slots
                total += slots
            return
        units = -(-x // merged.scale)
        for i in range(len(node.children) - 1, -1, -1):
            j = merged.taken(i, units)
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
    prior: Prior | None = None,
    crossing: Prices | None = None,
) -> DPResult | None:
    """Best placement inside one domain of level <= allowed_top (the required level).

    `penalty[level]` is the preferred-level weight: added per domain used at that level, less
    one domain's worth, which a placement inside a single domain of that level never pays.
    Parents wider than `work` knapsack cells are merged coarse (knapsack.py); when the result
    is not within TOLERANCE of its own lower bound, the whole tree is solved again exactly.
    `breaks` adds each touched domain's price (fragments.py) to what is minimised; `value` and
    `bound` then include it. `crossing` adds, per domain of the rack level and above, what
    crossing its uplink costs beyond the ring weight, paid where the ring weight is (J's load
    term, scoring.py): `value` and `bound` are then J's. `racks`, from an earlier solve of the
    same gang on the same capacity, saves building the tree up to the rack level again;
    `prior`, from that solve, skips the domains that cannot hold the new optimum."""
    n = capacity.gang.pods
    fits = capacity.pods >= n
    if fits.any():
        host = best_fit_host(capacity, capacity.hosts[fits], capacity.pods[fits])
        return DPResult({host: n}, 0.0, 0.0)
    weighted = [w + p for w, p in zip(weights, penalty, strict=True)]
    args = (capacity, weighted, fresh_rack, allowed_top, penalty)
    dp = TreeDP(*args, work, breaks, racks, prior, crossing)
    found = dp.solve()
    if found is not None and found[0] > found[1] * (1 + TOLERANCE):  # coarse and too loose
        dp = TreeDP(*args, INF, breaks, None, prior, crossing)
        found = dp.solve()
    if found is None:
        return None
    value, bound, node = found
    hosts: dict[int, int] = {}
    dp.collect(node, n, hosts)
    counts = spread_pods(capacity, hosts)
    return None if counts is None else DPResult(counts, value, bound, dp.racks, dp.judge.lows)


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
