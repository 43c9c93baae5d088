"""Capacity per domain (placement/capacity.py): each domain holds what its hosts hold, summed
level by level in whole groups, whether a fabric numbers parents in their children's order (runs
summed) or not (counted into a table)."""

from __future__ import annotations

import pytest

from scheduler.placement import slices
from scheduler.placement.capacity import Capacity
from tests.unit.placement.tinyfabric import case


def from_scratch(capacity: Capacity) -> list[dict[int, int]]:
    """Each level's domains with their pods, by walking the hosts: a domain is there when a
    host under it has room, and holds its children's pods rounded down to whole groups."""
    fabric = capacity.snapshot.fabric
    size = slices.sizes(fabric, capacity.gang)
    out = [dict(zip(capacity.hosts.tolist(), capacity.pods.tolist(), strict=True))]
    for level in range(1, fabric.depth):
        up: dict[int, int] = {}
        for child, pods in out[-1].items():
            parent = int(fabric.parent_columns[level - 1][child])
            up[parent] = up.get(parent, 0) + pods
        out.append({d: p - p % size[level] for d, p in sorted(up.items())})
    return out


@pytest.mark.parametrize("seed", range(120))
def test_per_domain_sums_each_domains_hosts(seed):
    c = case(seed)
    capacity = Capacity.of(c.snapshot, c.gang)
    got = [dict(level) for level in capacity.per_domain]
    assert got == from_scratch(capacity)
    assert all(list(level) == sorted(level) for level in capacity.per_domain)


def test_both_numberings_are_among_the_cases():
    ascending = {all(case(seed).snapshot.fabric.parents_ascend) for seed in range(120)}
    assert ascending == {True, False}
