"""Placement: `place(snapshot, gangs, config)` and what it is built from."""

from scheduler.placement.api import POLICIES, RACKWISE, UnknownPolicyError, place, place_one
from scheduler.placement.snapshot import Snapshot
from scheduler.placement.validate import InvalidPlacementError, validate

__all__ = [
    "POLICIES",
    "RACKWISE",
    "InvalidPlacementError",
    "Snapshot",
    "UnknownPolicyError",
    "place",
    "place_one",
    "validate",
]
