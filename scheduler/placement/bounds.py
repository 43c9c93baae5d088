"""Lower bounds on the ring cost of any placement of a gang, computed exactly from capacities.

Per level, the fewest domains that can hold the gang is k* = the smallest k whose k largest
free capacities sum to n. Those bounds are weak together (the best hosts and the best racks may
sit in different spines), so the bound also descends the tree: if some domain D can hold the
whole gang alone, any placement either stays in one such D (bounded recursively inside it) or
spans at least two children of D's parent at that level and every level below.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scheduler.placement.capacity import Capacity

INFEASIBLE = 1 << 30


def kstar(capacities: Iterable[int], n: int) -> int:
    """Fewest domains whose capacities sum to n (INFEASIBLE when all of them cannot)."""
    total = 0
    for k, cap in enumerate(sorted(capacities, reverse=True), start=1):
        total += cap
        if total >= n:
            return k
    return INFEASIBLE


def ring_crossings(k: int) -> int:
    """Ring edges crossing a level whose domains the gang spans k of (0 when k == 1)."""
    return k if k >= 2 else 0


@dataclass(frozen=True)
class Bound:
    kstar: tuple[int, ...]  # per level, whole fabric
    value: float  # lower bound on sum(level weight x ring crossings)


def lower_bound(capacity: Capacity, weights: Sequence[float]) -> Bound:
    n = capacity.gang.pods
    caps = capacity.per_domain
    depth = capacity.snapshot.fabric.depth
    ks = tuple(kstar(caps[level].values(), n) for level in range(depth))
    if INFEASIBLE in ks:
        return Bound(ks, float("inf"))
    return Bound(ks, _Nested(capacity, weights).bound(depth, 0, ks))


def objective_bound(ring: Bound, preferences: Sequence[float]) -> float:
    """A lower bound on J (see scoring): the ring bound plus, per preferred level, the extra
    domains any placement needs there (k* - 1); the fresh-rack term is >= 0, bounded by 0."""
    extra = sum(p * max(k - 1, 0) for p, k in zip(preferences, ring.kstar, strict=True) if p)
    return ring.value + extra


def _cost(ks: Sequence[int], weights: Sequence[float], floor: int = 0) -> float:
    return sum(w * ring_crossings(max(k, floor)) for k, w in zip(ks, weights, strict=False))


class _Nested:
    def __init__(self, capacity: Capacity, weights: Sequence[float]) -> None:
        self.caps = capacity.per_domain
        self.up = capacity.snapshot.fabric.ancestor
        self.depth = capacity.snapshot.fabric.depth
        self.n = capacity.gang.pods
        self.weights = weights
        self._groups: dict[tuple[int, int], dict[int, list[tuple[int, int]]]] = {}

    def members(self, low: int, level: int, domain: int) -> list[tuple[int, int]]:
        """(domain, capacity) of the level-`low` domains inside `domain` of `level`."""
        if level == self.depth:
            return list(self.caps[low].items())
        key = (low, level)
        if key not in self._groups:
            groups: dict[int, list[tuple[int, int]]] = {}
            up = self.up[low][level]
            for d, c in self.caps[low].items():
                groups.setdefault(up[d], []).append((d, c))
            self._groups[key] = groups
        return self._groups[key].get(domain, [])

    def under(self, low: int, level: int, domain: int) -> list[int]:
        return [c for _, c in self.members(low, level, domain)]

    def bound(self, level: int, domain: int, ks: Sequence[int] | None = None) -> float:
        """Bound for placing the gang inside `domain` of `level` (level 5: the whole fabric)."""
        n = self.n
        if ks is None:
            ks = [kstar(self.under(low, level, domain), n) for low in range(level)]
        if ks[0] == 1:
            return 0.0  # one host holds the whole gang: no ring edge leaves it
        flat = _cost(ks, self.weights)
        child = level - 1
        if child == 0 or ks[child] != 1:
            return flat
        best = _cost(ks, self.weights, floor=2)  # spanning two or more children
        fits = sorted((d for d, c in self.members(child, level, domain) if c >= n))
        for d in fits:
            best = min(best, self.bound(child, d))
            if best <= flat:
                break  # the result is max(flat, best): it cannot go lower than flat
        return max(flat, best)
