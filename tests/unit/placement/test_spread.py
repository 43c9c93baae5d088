"""Topology spread (DoNotSchedule) and one pod per host: the spread placer's choices, checked
by the independent validator and, on small cases, against brute force over every split."""

from __future__ import annotations

import itertools
import random

import pytest

from scheduler.model import GangRequest
from scheduler.model.constraints import MatchOperator, NodeConstraints, Requirement, Spread
from scheduler.model.topology import TopologySpec
from scheduler.placement import Snapshot, place, validate
from scheduler.placement.validate import InvalidPlacementError
from scheduler.topology import Fabric, generate


def zoned(racks: int, hosts: int, gpus: int = 8) -> Fabric:
    """Each rack its own zone (`zone: z<rack>`)."""
    spec: TopologySpec = generate(blocks=1, racks=racks, hosts=hosts, gpus=gpus)
    labelled = tuple(
        h.model_copy(update={"labels": {**h.labels, "zone": "z" + h.name[1:].split("-")[0]}})
        for h in spec.hosts
    )
    return Fabric(spec.model_copy(update={"hosts": labelled}))


def spread(pods: int, skew: int = 1, **counts: int) -> GangRequest:
    rule = Spread(key="zone", max_skew=skew, counts=tuple(counts.items()), name="spread[0]")
    return GangRequest(name="g", pods=pods, gpus_per_pod=8, spread=(rule,))


def per_zone(fabric: Fabric, placement) -> dict[str, int]:
    labels = {h.name: h.labels["zone"] for h in fabric.hosts}
    found: dict[str, int] = {}
    for p in placement.pods:
        found[labels[p.host]] = found.get(labels[p.host], 0) + 1
    return found


def test_pods_are_spread_evenly_over_the_zones():
    fabric = zoned(racks=4, hosts=2)
    gang = spread(8)
    [placement] = place(Snapshot(fabric), [gang])
    validate(Snapshot(fabric), gang, placement)
    assert per_zone(fabric, placement) == {"z0": 2, "z1": 2, "z2": 2, "z3": 2}
    assert placement.engine == "spread"
    assert not placement.optimal


def test_pods_already_running_count():
    """z0 holds two matching pods: six more go to the other three zones."""
    fabric = zoned(racks=4, hosts=2)
    gang = spread(6, z0=2)
    [placement] = place(Snapshot(fabric), [gang])
    validate(Snapshot(fabric), gang, placement)
    assert per_zone(fabric, placement) == {"z1": 2, "z2": 2, "z3": 2}


def test_a_spread_the_room_cannot_keep_says_which_constraint():
    """Only z0 has room: four pods there and none elsewhere is a skew of 4."""
    fabric = zoned(racks=2, hosts=4)
    snapshot = Snapshot(fabric)
    for h in ("h1-0", "h1-1", "h1-2", "h1-3"):
        snapshot.use(h, 8)
    [placement] = place(snapshot, [spread(4)])
    assert not placement.placed
    assert placement.reason.startswith("spread[0]: the most even placement")


def test_the_validator_catches_an_uneven_placement():
    fabric = zoned(racks=2, hosts=2)
    gang = spread(2)
    [placement] = place(Snapshot(fabric), [gang])
    lopsided = placement.model_copy(
        update={
            "pods": tuple(p.model_copy(update={"host": f"h0-{p.rank}"}) for p in placement.pods)
        }
    )
    with pytest.raises(InvalidPlacementError, match="skew 2 > 1"):
        validate(Snapshot(fabric), gang, lopsided)


def test_one_pod_per_host():
    fabric = zoned(racks=1, hosts=4)
    gang = GangRequest(name="g", pods=4, gpus_per_pod=1, max_pods_per_host=1)
    [placement] = place(Snapshot(fabric), [gang])
    validate(Snapshot(fabric), gang, placement)
    assert len({p.host for p in placement.pods}) == 4
    five = gang.model_copy(update={"pods": 5})
    [none] = place(Snapshot(fabric), [five])
    assert not none.placed
    packed = placement.model_copy(
        update={"pods": tuple(p.model_copy(update={"host": "h0-0"}) for p in placement.pods)}
    )
    with pytest.raises(InvalidPlacementError, match="more than 1 pods on a host"):
        validate(Snapshot(fabric), gang, packed)


def possible(room: list[int], before: list[int], n: int, skew: int) -> bool:
    """Brute force: some split of n pods within each zone's room keeps the skew."""
    for split in itertools.product(*(range(r + 1) for r in room)):
        if sum(split) == n:
            after = [b + x for b, x in zip(before, split, strict=True)]
            if max(after) - min(after) <= skew:
                return True
    return False


@pytest.mark.parametrize("seed", range(60))
def test_the_spread_placer_finds_a_placement_exactly_when_one_exists(seed):
    rng = random.Random(seed)
    zones, hosts = rng.randint(2, 3), 2
    fabric = zoned(racks=zones, hosts=hosts)
    snapshot = Snapshot(fabric)
    for h in fabric.hosts:
        if rng.random() < 0.4:
            snapshot.use(h.name, 8)
    before = [rng.randint(0, 2) for _ in range(zones)]
    skew, n = rng.randint(1, 2), rng.randint(1, 5)
    gang = spread(n, skew, **{f"z{i}": c for i, c in enumerate(before)})
    room = [
        sum(
            1
            for i, h in enumerate(fabric.hosts)
            if h.labels["zone"] == f"z{z}" and snapshot.free_gpus[i] == 8
        )
        for z in range(zones)
    ]
    [placement] = place(snapshot, [gang])
    assert placement.placed == possible(room, before, n, skew), (room, before, n, skew)
    if placement.placed:
        validate(snapshot, gang, placement)


def labelled(**by_host: dict[str, str]) -> Fabric:
    spec: TopologySpec = generate(blocks=1, racks=2, hosts=2, gpus=8)
    hosts = tuple(
        h.model_copy(update={"labels": {**h.labels, **by_host.get(h.name.replace("-", "_"), {})}})
        for h in spec.hosts
    )
    return Fabric(spec.model_copy(update={"hosts": hosts}))


SSD = ((10, (Requirement(key="disk", operator=MatchOperator.IN, values=("ssd",)),)),)


def test_preferred_node_affinity_breaks_a_tie():
    """One 8-GPU pod costs nothing anywhere: it goes to a preferred host."""
    fabric = labelled(h1_0={"disk": "ssd"}, h1_1={"disk": "ssd"})
    gang = GangRequest(name="g", pods=1, constraints=NodeConstraints(preferred=SSD))
    plain = gang.model_copy(update={"constraints": NodeConstraints()})
    [without] = place(Snapshot(fabric), [plain])
    assert without.pods[0].host.startswith("h0")  # the first choice without it
    [liked] = place(Snapshot(fabric), [gang])
    assert liked.pods[0].host.startswith("h1")


def test_preferred_node_affinity_never_costs_traffic():
    """The preferred hosts are one per rack: two pods there would cross racks; they stay in
    one rack, whatever the preference."""
    fabric = labelled(h0_0={"disk": "ssd"}, h1_0={"disk": "ssd"})
    gang = GangRequest(name="g", pods=2, constraints=NodeConstraints(preferred=SSD))
    [placement] = place(Snapshot(fabric), [gang])
    validate(Snapshot(fabric), gang, placement)
    assert placement.domains["rack"] == 1
    assert placement.optimal


def test_a_host_without_the_key_of_a_second_spread_is_not_used():
    """Two spreads, over zone and over row; the hosts of z1 carry no row label. A node without
    a DoNotSchedule spread's key is no candidate (kube-scheduler's rule): the pods go to z0
    alone, and the zone spread then cannot hold (it raised KeyError)."""
    fabric = zoned(racks=2, hosts=2)
    rows = tuple(
        h.model_copy(update={"labels": {**h.labels, "row": "a"}}) if h.name.startswith("h0") else h
        for h in fabric.spec.hosts
    )
    fabric = Fabric(fabric.spec.model_copy(update={"hosts": rows}))
    rules = (
        Spread(key="zone", max_skew=1, name="spread[0]"),
        Spread(key="row", max_skew=1, name="spread[1]"),
    )
    gang = GangRequest(name="g", pods=2, gpus_per_pod=8, spread=rules)
    [placement] = place(Snapshot(fabric), [gang])
    assert not placement.placed
    assert placement.reason.startswith("spread[0]")
