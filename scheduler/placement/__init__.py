"""Placement: `place(snapshot, gangs, config)` and what it is built from."""

from scheduler.placement.api import POLICIES, RACKWISE, UnknownPolicy, place, place_one
from scheduler.placement.snapshot import Snapshot
from scheduler.placement.validate import InvalidPlacement, validate

__all__ = [
    "POLICIES",
    "RACKWISE",
    "InvalidPlacement",
    "Snapshot",
    "UnknownPolicy",
    "place",
    "place_one",
    "validate",
]
