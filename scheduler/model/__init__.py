"""Pydantic types shared by every layer: topology, gangs, snapshots and placements."""

from scheduler.model.gang import GangRequest, ParallelShape, Pool, Slice, pool_objective
from scheduler.model.placement import PlaceConfig, Placement, PlacementStatus, PodAssignment
from scheduler.model.topology import LEVELS, MAX_LEVELS, HostSpec, LevelSpec, Tier, TopologySpec

__all__ = [
    "LEVELS",
    "MAX_LEVELS",
    "GangRequest",
    "HostSpec",
    "LevelSpec",
    "ParallelShape",
    "PlaceConfig",
    "Placement",
    "PlacementStatus",
    "PodAssignment",
    "Pool",
    "Slice",
    "Tier",
    "TopologySpec",
    "pool_objective",
]
