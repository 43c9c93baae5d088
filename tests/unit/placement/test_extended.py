"""Extended resources: every countable resource a pod requests limits where it goes."""

from __future__ import annotations

import pytest

from scheduler.model import GangRequest, PlaceConfig
from scheduler.model.topology import HostSpec, TopologySpec
from scheduler.placement import InvalidPlacementError, Snapshot, place, validate
from scheduler.topology import Fabric

IB = "rdma/ib"


def fabric() -> Fabric:
    """Four 8-GPU hosts in two racks; only h0 and h2 have RDMA ports (two each)."""
    hosts = tuple(
        HostSpec(
            name=f"h{i}",
            gpus=8,
            domains={"rack": f"r{i // 2}"},
            extended={IB: 2} if i % 2 == 0 else {},
        )
        for i in range(4)
    )
    return Fabric(TopologySpec(hosts=hosts))


@pytest.mark.parametrize("engine", ["auto", "cp-sat"])
def test_pods_go_only_where_the_resource_is_and_never_past_it(engine):
    snapshot = Snapshot(fabric())
    gang = GangRequest(name="g", pods=4, gpus_per_pod=1, extended_per_pod={IB: 1})
    [placement] = place(snapshot, [gang], PlaceConfig.of(engine=engine))
    validate(snapshot, gang, placement)
    assert placement.hosts() == {"h0": 2, "h2": 2}
    more = gang.model_copy(update={"pods": 5})
    [refused] = place(snapshot, [more], PlaceConfig.of(engine=engine))
    assert not refused.placed


def test_usage_by_others_counts_and_the_validator_checks_it():
    snapshot = Snapshot(fabric())
    snapshot.use("h0", 0, extended={IB: 2})
    gang = GangRequest(name="g", pods=2, gpus_per_pod=1, extended_per_pod={IB: 1})
    [placement] = place(snapshot, [gang])
    assert placement.hosts() == {"h2": 2}
    moved = placement.model_copy(
        update={"pods": tuple(p.model_copy(update={"host": "h0"}) for p in placement.pods)}
    )
    with pytest.raises(InvalidPlacementError, match="oversubscribed on rdma/ib"):
        validate(snapshot, gang, moved)


def test_a_placed_gang_takes_its_units():
    snapshot = Snapshot(fabric())
    gangs = [
        GangRequest(name=f"g{i}", pods=2, gpus_per_pod=1, extended_per_pod={IB: 1})
        for i in range(3)
    ]
    placed = [p.placed for p in place(snapshot, gangs)]
    assert placed == [True, True, False]
