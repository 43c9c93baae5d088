"""What a tree solve (treedp.py) keeps of the domains it builds, and which are worth building.

Contract. Takes the fabric, the DP's per-level weights (ring weight + preferred-level penalty)
and penalties, the required level, the breakage prices and the gang's size n; optionally what
an earlier solve of the same gang on the same capacity found (Prior). Decides, as nodes come in
build order: the cheapest eligible node (the first of equal value), a valid lower bound over
all of them, whether a level is worth building at all, and, with a Prior, which domains above
the racks are. Promises: nothing it skips can hold a placement cheaper than the best it keeps:
- a placement whose lowest single domain is at level L uses >= 2 domains of every level below,
  so it is worth at least the sum there of 2 w + p (`floor`); once something cheaper is found,
  L and the levels above are not built;
- prices only add, so with a Prior a domain whose earlier lower bound exceeds the ceiling (the
  earlier answer's value with the prices) cannot hold the new optimum; it is built only when an
  ancestor is (its vector feeds the ancestor's).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from scheduler.model.topology import Tier
from scheduler.placement.fragments import Prices
from scheduler.placement.knapsack import INF, Ints, Merged, Vector
from scheduler.topology.fabric import Fabric

NVLINK, RACK = Tier.NVLINK, Tier.RACK


@dataclass
class Node:
    level: int
    domain: int
    cost: Vector  # F: least cost for capacity >= x, levels below this node only; inf past its end
    hosts: tuple[Ints, Ints] | None = None  # a leaf's (hosts, slots), largest first
    group: int = 1  # capacity counts whole groups of this many pods (slices, TP groups)
    children: list[Node] = field(default_factory=list)
    merged: Merged | None = None  # a parent's knapsack, to trace back
    floor: Vector | None = None  # a lower bound on F where `cost` is not exact

    @property
    def low(self) -> Vector:
        return self.cost if self.floor is None else self.floor


@dataclass(frozen=True)
class Prior:
    """What an earlier solve of the same gang on the same capacity knows, for a solve that only
    adds prices: a lower bound per domain (level -> per domain) on any placement whose lowest
    single domain it is, and a ceiling the new optimum cannot exceed (the earlier answer's value
    with the prices added). A domain whose bound is above the ceiling cannot hold the optimum;
    it is built only when an ancestor can."""

    lows: dict[int, Vector]
    ceiling: float


class Judge:
    def __init__(
        self,
        fabric: Fabric,
        weights: list[float],
        penalty: list[float],
        allowed_top: int,
        breaks: Prices,
        n: int,
        prior: Prior | None = None,
    ) -> None:
        self.fabric = fabric
        self.weights = weights  # ring weight + preferred-level penalty, per level
        self.penalty = penalty
        self.allowed_top = allowed_top
        self.breaks = breaks
        self.n = n
        # the cheapest eligible node so far (value, node) and the least lower bound of any
        self.best: tuple[float, Node] | None = None
        self.bound = INF
        self.lows = {
            level: np.full(self._count(level), self._floor(level)) for level in self._above
        }
        self.keep = self._keep(prior) if prior is not None else None
        self._tables: dict[int, Vector] = {}  # level -> `_chain_table`

    def eligible(self, level: int) -> bool:
        """Within the required level; the root (above the top level) only when unrestricted."""
        top = self.fabric.top
        return level <= self.allowed_top or (level > top and self.allowed_top == top)

    def worth(self, level: int) -> bool:
        """Whether a domain of `level` or above can still beat the best found. A placement whose
        lowest single domain is there uses >= 2 domains of every level below, each paying its
        ring weight and penalty, less the one domain's penalty it is relieved of: at least
        2 w + p per level (scoring.py). Prices and the fresh-rack weight only add to that."""
        if not self.eligible(level):
            return False
        return self.best is None or self._floor(level) < self.best[0]

    def _floor(self, level: int) -> float:
        """The least a placement whose lowest single domain is at `level` can be worth."""
        return sum(2 * wp - p for wp, p in zip(self.weights[:level], self.penalty, strict=False))

    @property
    def _above(self) -> range:
        """The levels built by merging (above the racks), the root (depth) last."""
        return range(RACK + 1, self.fabric.depth + 1)

    def _count(self, level: int) -> int:
        return len(self.fabric.names[level]) if level <= self.fabric.top else 1

    def _keep(self, prior: Prior) -> dict[int, npt.NDArray[np.bool_]]:
        """Per level above the racks, the domains worth building: those whose bound does not
        exceed the ceiling, and every domain below one that is kept (its vector feeds it)."""
        fabric, keep = self.fabric, {}
        margin = prior.ceiling + 1e-9 * (1 + abs(prior.ceiling))  # sums in another order
        above: npt.NDArray[np.bool_] = np.zeros(1, dtype=bool)
        for level in reversed(self._above):
            mine = prior.lows[level] <= margin
            if level < fabric.depth:
                up = fabric.parent_columns[level] if level < fabric.top else 0
                mine |= above[up]
            keep[level], above = mine, mine
        return keep

    def judge(self, nodes: list[Node]) -> None:
        """Fold `nodes` (in build order: the first of equal value wins) into best and bound.
        A node's value is F[n], less the penalties of the levels below it (one domain there
        never pays them), plus what touching it and its ancestors is priced (`_chains`)."""
        levels = np.fromiter((node.level for node in nodes), dtype=np.int64, count=len(nodes))
        eligible = [self.eligible(level) for level in range(self.fabric.depth + 1)]
        if not all(eligible[lv] for lv in np.unique(levels).tolist()):
            nodes = [node for node in nodes if eligible[node.level]]
            levels = levels[np.asarray(eligible)[levels]]
        if not nodes:
            return
        n = self.n
        relief = np.cumsum([0.0, *self.penalty])
        adjust = self._chains(nodes, levels) - relief[np.minimum(levels, len(self.penalty))]
        values = _column(nodes, n, low=False) + adjust
        lows = _column(nodes, n, low=True) + adjust
        self.bound = min(self.bound, float(lows.min()))
        self._remember(nodes, levels, lows)
        i = int(values.argmin())
        if self.best is None or values[i] < self.best[0]:
            self.best = (float(values[i]), nodes[i])

    def _remember(self, nodes: list[Node], levels: Ints, lows: Vector) -> None:
        """Each merged domain's lower bound, for a later solve that adds prices (Prior)."""
        for level in np.unique(levels[levels > RACK]).tolist():
            at = np.flatnonzero(levels == level)
            domains = np.fromiter((nodes[i].domain for i in at), dtype=np.int64, count=len(at))
            self.lows[level][domains] = lows[at]

    def _chains(self, nodes: list[Node], levels: Ints) -> Vector:
        """`chain` of every node: what touching it and its ancestors is priced."""
        out = np.zeros(len(nodes))
        if not self.breaks:
            return out
        domains = np.fromiter((node.domain for node in nodes), dtype=np.int64, count=len(nodes))
        for level in np.unique(levels).tolist():
            if level <= self.fabric.top:
                at = levels == level
                out[at] = self._chain_table(level)[domains[at]]
        return out

    def _chain_table(self, level: int) -> Vector:
        """Per domain of `level`: the prices of it and its ancestors up to the top (each level's
        is made once, from the one above it)."""
        table = self._tables.get(level)
        if table is None:
            fabric = self.fabric
            if level < RACK:  # an NVLink domain: its rack is the first priced ancestor
                table = self._chain_table(RACK)[fabric.parent_columns[NVLINK]]
            elif level == fabric.top:
                table = self.prices(level)
            else:
                table = (
                    self.prices(level) + self._chain_table(level + 1)[fabric.parent_columns[level]]
                )
            self._tables[level] = table
        return table

    def prices(self, level: int) -> Vector:
        """What touching each domain of `level` is priced (0 where nothing is)."""
        prices = self.breaks.get(level)
        return np.zeros(len(self.fabric.names[level])) if prices is None else prices


def _column(nodes: list[Node], x: int, low: bool) -> Vector:
    """Each node's F[x] (its lower bound on it, if `low`); inf where its vector ends first
    (most nodes of a wide fabric: their domains cannot hold the gang alone)."""
    vectors = [node.low for node in nodes] if low else [node.cost for node in nodes]
    out = np.full(len(vectors), INF)
    reach = [i for i, v in enumerate(vectors) if len(v) > x]
    if reach:
        out[reach] = [vectors[i][x] for i in reach]
    return out
