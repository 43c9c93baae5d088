"""The validator itself must catch every broken rule."""

from __future__ import annotations

import pytest

from scheduler.model import GangRequest, Placement, PlacementStatus, PodAssignment
from scheduler.placement import InvalidPlacementError, Snapshot, validate


def placement(*hosts: str) -> Placement:
    pods = tuple(PodAssignment(rank=i, host=h) for i, h in enumerate(hosts))
    return Placement(gang="g", policy="test", status=PlacementStatus.PLACED, pods=pods)


@pytest.mark.parametrize(
    ("hosts", "gang", "message"),
    [
        (("h0-0",), {"pods": 2}, "ranks"),
        (("h0-0", "nope"), {"pods": 2}, "unknown host"),
        (("h0-0", "h0-0"), {"pods": 2, "gpus_per_pod": 8}, "oversubscribed on GPUs"),
        (("h0-0", "h1-0"), {"pods": 2, "required_level": "rack"}, "more than one rack"),
        (("h0-0", "h0-1"), {"pods": 2, "max_pods_per_rack": 1}, "more than 1 pods in a rack"),
        (("h0-0",), {"pods": 1, "pool": "online-inference"}, "pool training"),
    ],
)
def test_rejects(small_fabric, hosts, gang, message):
    request = GangRequest(name="g", **({"gpus_per_pod": 4} | gang))
    with pytest.raises(InvalidPlacementError, match=message):
        validate(Snapshot(small_fabric), request, placement(*hosts))


def test_rejects_split_tp_group(small_fabric):
    from scheduler.model import ParallelShape

    gang = GangRequest(name="g", pods=2, gpus_per_pod=4, shape=ParallelShape(tp=8))
    with pytest.raises(InvalidPlacementError, match="TP group"):
        validate(Snapshot(small_fabric), gang, placement("h0-0", "h0-1"))


def test_unplaceable_needs_a_reason(small_fabric):
    empty = Placement(gang="g", policy="x", status=PlacementStatus.UNPLACEABLE)
    with pytest.raises(InvalidPlacementError, match="reason"):
        validate(Snapshot(small_fabric), GangRequest(name="g", pods=1), empty)
