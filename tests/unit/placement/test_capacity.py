"""Capacity per domain (placement/capacity.py): each domain holds what its hosts hold, summed
level by level in whole groups, whether a fabric numbers parents in their children's order (runs
summed) or not (counted into a table), with rack caps, whichever level is read first. And a
gang on one host: J and traffic nothing, term by term."""

from __future__ import annotations

import pytest

from scheduler.model import PlaceConfig
from scheduler.model.topology import Tier
from scheduler.placement import cost, scoring, slices
from scheduler.placement.api import j_value
from scheduler.placement.capacity import Capacity
from scheduler.placement.ranks import assign_ranks
from scheduler.placement.scoring import level_weights, objective
from tests.unit.placement.tinyfabric import case

RACK = Tier.RACK


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


def capped_from_scratch(capacity: Capacity, cap: int) -> list[dict[int, int]]:
    """As `from_scratch` up to the racks, each rack holding at most `cap`; every level above
    sums its racks' capped pods as they are (no group rounding above a capped rack)."""
    fabric = capacity.snapshot.fabric
    out = from_scratch(capacity)[: RACK + 1]
    out[RACK] = {d: min(p, cap) for d, p in out[RACK].items()}
    for level in range(RACK + 1, fabric.depth):
        up: dict[int, int] = {}
        for rack, pods in out[RACK].items():
            parent = int(fabric.ancestor[RACK][level][rack])
            up[parent] = up.get(parent, 0) + pods
        out.append(up)
    return out


@pytest.mark.parametrize("seed", range(60))
def test_per_domain_with_a_rack_cap_whatever_level_is_read_first(seed):
    """Levels are summed when first read: reading the top first, or the racks, gives what
    reading them in order gives."""
    c = case(seed)
    gang = c.gang.model_copy(update={"max_pods_per_rack": 1 + seed % 3})
    cap = gang.max_pods_per_rack
    assert cap is not None
    want = capped_from_scratch(Capacity.of(c.snapshot, gang), cap)
    for first in (-1, RACK, 0):
        levels = Capacity.of(c.snapshot, gang).per_domain
        assert dict(levels[first]) == want[first]
        assert [dict(level) for level in levels] == [dict(w) for w in want]


@pytest.mark.parametrize("seed", range(60))
def test_a_placement_on_one_host_costs_nothing_by_every_term_of_j(seed):
    """J and traffic answer 0 for a gang on one host without walking their terms; walked, the
    terms give 0 too: the gang spans one domain at every level (preferred levels and fresh
    racks pay only for a second one), its ring and uplink-load terms are 0, and every flow
    between its pods stays on the host (preferred levels, fresh racks and uplink load in play)."""
    c = case(seed)
    fabric = c.snapshot.fabric
    gang = c.gang.model_copy(update={"preferred_levels": {"rack": 1.0}})
    capacity = Capacity.of(c.snapshot, gang)
    weights = level_weights(fabric, gang)
    for host in capacity.hosts.tolist()[:4]:
        counts = {host: gang.pods}
        spans = scoring._spans(fabric, [host])
        assert spans == [1] * fabric.depth
        assert scoring._traffic(c.snapshot, [host], spans, weights) == 0.0
        assert objective(capacity, counts, weights, fresh=1.0) == 0.0
        assert j_value(capacity, counts, PlaceConfig.of()) == 0.0
        pods = assign_ranks(fabric, counts)
        workers = [fabric.host_index[p.host] for p in pods]
        flows = cost._flows(gang, workers, [(h, "") for h in workers], {})
        assert all(fabric.lowest_common_level(a, b) == 0 for a, b, _ in flows)
        flow = cost.traffic(fabric, gang, pods)
        assert flow.cost == 0.0
        assert set(flow.gb) == {0.0}
