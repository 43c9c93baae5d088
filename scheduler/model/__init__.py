"""Pydantic types shared by every layer: topology, gangs, snapshots and placements."""

from scheduler.model.gang import GangRequest, ParallelShape, Pool, Slice, pool_objective
from scheduler.model.placement import PlaceConfig, Placement, PlacementStatus, PodAssignment
from scheduler.model.policy import Backfill, Preemption, PreemptionScope, SchedulingPolicy, Solver
from scheduler.model.topology import LEVELS, MAX_LEVELS, HostSpec, LevelSpec, Tier, TopologySpec

__all__ = [
    "LEVELS",
    "MAX_LEVELS",
    "Backfill",
    "GangRequest",
    "HostSpec",
    "LevelSpec",
    "ParallelShape",
    "PlaceConfig",
    "Placement",
    "PlacementStatus",
    "PodAssignment",
    "Pool",
    "Preemption",
    "PreemptionScope",
    "SchedulingPolicy",
    "Slice",
    "Solver",
    "Tier",
    "TopologySpec",
    "pool_objective",
]
