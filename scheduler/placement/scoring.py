"""The ring cost that policies minimise: for each level, the ring edges that cross it (the gang's
domains at that level when it spans two or more, under depth-first rank order) times the level's
weight. It equals `cost.traffic()` for a pure data-parallel gang."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.model.gang import GangRequest
from scheduler.model.topology import LEVELS
from scheduler.placement.bounds import ring_crossings
from scheduler.placement.capacity import Capacity
from scheduler.topology.fabric import Fabric


def level_weights(fabric: Fabric, gang: GangRequest) -> list[float]:
    """Link seconds one ring edge costs at each level: GB per edge x seconds per GB."""
    n = gang.pods
    stages = gang.shape.pp if gang.shape and n % gang.shape.pp == 0 else 1
    per_stage = n // stages
    pod_gb = gang.gradient_gb * max(gang.gpus_per_pod, 1) / stages
    edge_gb = 2.0 * (per_stage - 1) / per_stage * pod_gb if per_stage > 1 else 0.0
    return [edge_gb * c for c in fabric.gb_cost]


def ring_cost(capacity: Capacity, counts: Mapping[int, int], weights: Sequence[float]) -> float:
    fabric = capacity.snapshot.fabric
    hosts = [h for h, n in counts.items() if n > 0]
    return sum(
        weights[level] * ring_crossings(len({fabric.domain[level][h] for h in hosts}))
        for level in range(len(LEVELS))
    )
