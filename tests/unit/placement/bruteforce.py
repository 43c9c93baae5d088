"""Exhaustive search over every way to spread a gang over hosts (tiny instances only)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scheduler.model import GangRequest, PlaceConfig, Placement
from scheduler.placement import InvalidPlacementError, Snapshot, place, validate
from scheduler.placement.capacity import Capacity
from scheduler.placement.cost import traffic
from scheduler.placement.ranks import assign_ranks
from scheduler.placement.scoring import fresh_rack_weight, level_weights, objective


def spreads(slots: list[tuple[int, int]], n: int) -> Iterator[dict[int, int]]:
    if n == 0:
        yield {}
        return
    if not slots:
        return
    (host, cap), rest = slots[0], slots[1:]
    for take in range(min(cap, n), -1, -1):
        for tail in spreads(rest, n - take):
            yield {host: take, **tail} if take else tail


def matches_brute_force(snapshot: Snapshot, gang: GangRequest, engine: str) -> Placement:
    """rackwise's placement, checked: valid, as cheap as the exhaustive optimum, and proven
    optimal; unplaced exactly when no spread exists."""
    [placement] = place(snapshot, [gang], PlaceConfig.of(engine=engine, work_limit=5))
    best = optimum(snapshot, gang)
    if best is None:
        assert not placement.placed
        return placement
    validate(snapshot, gang, placement)
    assert placement.cost == pytest.approx(best, abs=1e-9)
    assert placement.optimal
    return placement


def optimum(snapshot: Snapshot, gang: GangRequest) -> float | None:
    capacity = Capacity.of(snapshot, gang)
    best = None
    for counts in spreads(sorted(capacity.slots.items()), gang.pods):
        pods = assign_ranks(snapshot.fabric, counts)
        cost = traffic(snapshot.fabric, gang, pods).cost
        best = cost if best is None else min(best, cost)
    return best


def j_of(snapshot: Snapshot, gang: GangRequest, counts: dict[int, int]) -> float:
    capacity = Capacity.of(snapshot, gang)
    weights = level_weights(snapshot.fabric, gang)
    fresh = fresh_rack_weight(capacity, weights, PlaceConfig().scheduling.fragmentation_weight)
    return objective(capacity, counts, weights, fresh)


def minimum(snapshot: Snapshot, gang: GangRequest) -> float | None:
    capacity = Capacity.of(snapshot, gang)
    best = None
    for counts in spreads(sorted(capacity.slots.items()), gang.pods):
        candidate = Placement(
            gang=gang.name,
            policy="brute-force",
            status="placed",
            pods=assign_ranks(snapshot.fabric, counts),
        )
        try:
            validate(snapshot, gang, candidate)
        except InvalidPlacementError:
            continue
        value = j_of(snapshot, gang, counts)
        best = value if best is None else min(best, value)
    return best
