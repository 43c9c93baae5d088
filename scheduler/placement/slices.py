"""Slices: every consecutive group of S pods of a gang inside one domain of a level.

Contract. Takes a fabric and a gang whose slices (level, size) are given, with the gang's
tensor-parallel group as a slice at the NVLink level. Decides the effective group size per
level (the largest slice at or below it: sizes nest, so it is a multiple of every smaller
one), how many pods each domain can take in whole groups (`budgets`, bottom-up), and a fill of
hosts in a given order that gives every domain at every sliced level a multiple of its size
(`fill`). Promises: with counts from `fill` and ranks in depth-first order, each consecutive
group of S ranks lies in one domain of its level; `problem` names what makes a request
impossible (unknown level, a slice above the required level, sizes that do not nest)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from scheduler.model.gang import GangRequest
from scheduler.model.topology import Tier
from scheduler.topology.fabric import Fabric


def requested(fabric: Fabric, gang: GangRequest) -> dict[int, int]:
    """level index -> the largest slice size asked for there (TP groups at the NVLink level)."""
    out: dict[int, int] = {}
    for s in gang.slices:
        level = fabric.index(s.level)
        out[level] = max(out.get(level, 1), s.size)
    if gang.tp_pods > 1 and not _inside_one_host(fabric, gang):
        out[Tier.NVLINK] = max(out.get(Tier.NVLINK, 1), gang.tp_pods)
    return out


def _inside_one_host(fabric: Fabric, gang: GangRequest) -> bool:
    """A gang required inside one host keeps its TP groups there without asking: the groups'
    NVLink slice is implied, not a slice above the required level."""
    return gang.required_level in fabric.levels and fabric.index(gang.required_level) == Tier.HOST


def problem(fabric: Fabric, gang: GangRequest) -> str | None:
    unknown = [s.level for s in gang.slices if s.level not in fabric.levels]
    if unknown:
        return f"slice level {unknown[0]!r} unknown; levels are {', '.join(fabric.levels)}"
    if gang.slices and gang.max_pods_per_rack is not None:
        return "slices and a per-rack cap cannot be combined"
    asked = sorted(requested(fabric, gang).items())
    if gang.required_level in fabric.levels and asked:
        top = fabric.index(str(gang.required_level))
        above = [lv for lv, _ in asked if lv > top]
        if above:
            return (
                f"a slice at {fabric.levels[above[0]]} is above the required level "
                f"{gang.required_level}: the whole gang is inside one {gang.required_level}"
            )
    for (low, small), (high, big) in itertools.pairwise(asked):
        if big % small:
            return (
                f"slices must nest: {big} pods per {fabric.levels[high]} is not a multiple of "
                f"{small} pods per {fabric.levels[low]}"
            )
    return None


def sizes(fabric: Fabric, gang: GangRequest) -> tuple[int, ...]:
    """Effective group size per level: the largest slice at or below it (1: none)."""
    asked = requested(fabric, gang)
    out, size = [], 1
    for level in range(fabric.depth):
        size = max(size, asked.get(level, 1))
        out.append(size)
    return tuple(out)


def budgets(fabric: Fabric, size: Sequence[int], slots: dict[int, int]) -> list[dict[int, int]]:
    """Per level, pods each domain can take in whole groups of that level's size, counting
    only what its sub-domains can take in whole groups of theirs."""
    out: list[dict[int, int]] = [{h: s - s % size[0] for h, s in slots.items()}]
    for level in range(1, fabric.depth):
        up = fabric.parent[level - 1]  # a level-(l-1) domain -> its level-l domain
        sums: dict[int, int] = {}
        for d, pods in out[level - 1].items():
            sums[up[d]] = sums.get(up[d], 0) + pods
        out.append({d: c - c % size[level] for d, c in sums.items()})
    return out


def fill(
    fabric: Fabric, size: Sequence[int], slots: dict[int, int], order: Iterable[int], need: int
) -> dict[int, int] | None:
    """Counts for `need` pods taken from hosts in `order`, a whole number of groups in every
    domain of every sliced level (each domain taken whole in turn); None if they fall short."""
    hosts = [h for h in dict.fromkeys(order) if h in slots]
    # budgets count only the hosts offered: a domain's budget over hosts not in `order` would
    # have it give a count it cannot make whole
    budget = budgets(fabric, size, {h: slots[h] for h in hosts})
    sliced = [lv for lv in range(fabric.top, 0, -1) if size[lv] > 1]
    counts: dict[int, int] = {}

    def go(i: int, hosts: list[int], target: int) -> int:
        if i == len(sliced):
            for h in hosts:
                got = min(budget[0][h], target)
                if got > 0:
                    counts[h] = got
                    target -= got
            return target
        level = sliced[i]
        groups: dict[int, list[int]] = {}
        for h in hosts:
            groups.setdefault(fabric.domain[level][h], []).append(h)
        for d, members in groups.items():
            if target == 0:
                break
            give = min(budget[level][d], target)
            target -= give - go(i + 1, members, give)
        return target

    left = go(0, hosts, need)
    return counts if left == 0 else None
