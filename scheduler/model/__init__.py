"""Pydantic types shared by every layer: topology, gangs, snapshots and placements."""

from scheduler.model.gang import GangRequest, ParallelShape, Pool, pool_objective
from scheduler.model.placement import PlaceConfig, Placement, PlacementStatus, PodAssignment
from scheduler.model.topology import LEVELS, HostSpec, LevelSpec, TopologySpec

__all__ = [
    "LEVELS",
    "GangRequest",
    "HostSpec",
    "LevelSpec",
    "ParallelShape",
    "PlaceConfig",
    "Placement",
    "PlacementStatus",
    "PodAssignment",
    "Pool",
    "TopologySpec",
    "pool_objective",
]
