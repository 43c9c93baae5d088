"""Fabrics of any shape: 3 and 6 named levels, both engines against brute force, and level
names checked against the fabric."""

from __future__ import annotations

import pytest

from scheduler.model import GangRequest, PlaceConfig
from scheduler.model.topology import HostSpec, LevelSpec, TopologySpec
from scheduler.placement import place, validate
from scheduler.topology import Fabric
from tests.conftest import fragmented
from tests.unit.placement.bruteforce import matches_brute_force


def three() -> Fabric:
    """Kueue-style: hosts in subblocks in blocks, no NVLink level."""
    levels = (LevelSpec(name="host", bandwidth_gbps=900), LevelSpec(name="subblock"))
    levels += (LevelSpec(name="block"),)
    hosts = tuple(
        HostSpec(name=f"n{i}", gpus=4, domains={"subblock": f"sb{i // 2}", "block": f"b{i // 4}"})
        for i in range(8)
    )
    return Fabric(TopologySpec(levels=levels, hosts=hosts))


def six() -> Fabric:
    """NVLink pairs, then rows, halls, zones and regions (some levels group as the one below:
    a level may add cost without adding structure)."""
    names = ("row", "hall", "zone", "region")
    levels = (LevelSpec(name="host", bandwidth_gbps=900), LevelSpec(name="nvl", nvlink=True))
    levels += tuple(LevelSpec(name=n) for n in names)
    groups = {"nvl": 2, "row": 4, "hall": 4, "zone": 8, "region": 8}
    hosts = tuple(
        HostSpec(
            name=f"n{i}", gpus=4, domains={lv: f"{lv}{i // size}" for lv, size in groups.items()}
        )
        for i in range(8)
    )
    return Fabric(TopologySpec(levels=levels, hosts=hosts))


FABRICS = {"three": three(), "six": six()}


@pytest.mark.parametrize("shape", FABRICS)
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("pods", [2, 3, 5, 9])
@pytest.mark.parametrize("engine", ["auto", "cp-sat"])
def test_both_engines_match_brute_force_on_any_levels(shape, seed, pods, engine):
    snapshot = fragmented(FABRICS[shape], busy=0.4, seed=seed)
    gang = GangRequest(name="g", pods=pods, gpus_per_pod=1)
    placement = matches_brute_force(snapshot, gang, engine)
    if placement.placed:
        assert set(placement.domains) == set(snapshot.fabric.levels)


@pytest.mark.parametrize("engine", ["auto", "cp-sat"])
def test_a_required_level_is_named_as_the_fabric_names_it(engine):
    fabric = FABRICS["three"]
    snapshot = fragmented(fabric, busy=0.0, seed=0)
    gang = GangRequest(name="g", pods=8, gpus_per_pod=1, required_level="subblock")
    [placement] = place(snapshot, [gang], PlaceConfig.of(engine=engine))
    validate(snapshot, gang, placement)
    assert placement.domains["subblock"] == 1
    too_big = gang.model_copy(update={"pods": 9})
    [refused] = place(snapshot, [too_big], PlaceConfig.of(engine=engine))
    assert not refused.placed
    assert "one subblock" in refused.reason


def test_an_unknown_level_is_refused_with_the_levels_there_are():
    snapshot = fragmented(FABRICS["three"], busy=0.0, seed=0)
    gang = GangRequest(name="g", pods=2, gpus_per_pod=1, required_level="rack")
    [placement] = place(snapshot, [gang])
    assert not placement.placed
    assert placement.reason == "unknown level 'rack'; levels are host, nvlink, subblock, block"
