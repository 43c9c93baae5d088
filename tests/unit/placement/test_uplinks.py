"""The uplinks' load (placement/uplinks.py) and J's load term (placement/scoring.py): counted
and priced by hand. Its labels against brute force: tests/unit/placement/test_exact_labels.py
(tiny fabrics with running gangs on their uplinks)."""

from __future__ import annotations

import random
from collections.abc import Iterable

import numpy as np
import pytest

from scheduler.model import GangRequest, PlaceConfig, Placement, PlacementStatus, PodAssignment
from scheduler.model.topology import TopologySpec
from scheduler.placement import Snapshot, place, validate
from scheduler.placement.api import j_value
from scheduler.placement.bounds import lower_bound
from scheduler.placement.capacity import Capacity
from scheduler.placement.cpsat.solve import model_solve
from scheduler.placement.scoring import level_weights
from scheduler.placement.uplinks import Crossings, crossings
from scheduler.simulation.profiles import FabricProfile, ProfileName
from scheduler.topology import Fabric, generate

# 2 spines x 2 racks x 2 hosts: racks r0, r1 under s0; r2, r3 under s1 (hosts h<rack>-<i>)


def shared_racks(spec: TopologySpec) -> Fabric:
    """The fabric with 2:1 rack uplinks: J prices the load only on oversubscribed uplinks."""
    return Fabric(FabricProfile(name=ProfileName.TOPOLOGY, ratios={"rack": 2.0}).provisioned(spec))


FABRIC = shared_racks(generate(blocks=2, racks=2, hosts=2, gpus=8))


def running(*hosts: str) -> Placement:
    pods = tuple(PodAssignment(rank=i, host=h) for i, h in enumerate(hosts))
    return Placement(gang="r", policy="test", status=PlacementStatus.PLACED, pods=pods)


def by_name(level: int, counts) -> dict[str, int]:
    return {FABRIC.names[level][d]: int(c) for d, c in enumerate(counts) if c}


def test_a_gang_crosses_the_uplink_of_every_domain_it_spans():
    rack, spine = FABRIC.index("rack"), FABRIC.index("spine")
    load = crossings(FABRIC, [running("h0-0", "h1-0"), running("h0-1", "h2-0"), running("h3-0")])
    racks, spines = by_name(rack, load[rack]), by_name(spine, load[spine])
    assert sum(racks.values()) == 4  # r0 twice, r1 and r2 once; the one-host gang crosses none
    assert sorted(racks.values()) == [1, 1, 2]
    assert sorted(spines.values()) == [1, 1]  # only the second gang leaves its spine


def taken(fabric: Fabric, *hosts: str) -> Snapshot:
    snapshot = Snapshot(fabric)
    for h in hosts:
        snapshot.use(h, 8)
    return snapshot


def loaded(snapshot: Snapshot, **gangs: int) -> None:
    """Running gangs crossing each named rack's uplink, by hand."""
    rack = snapshot.fabric.index("rack")
    load = {lv: np.zeros(len(snapshot.fabric.names[lv]), dtype=np.int64) for lv in (rack,)}
    for name, n in gangs.items():
        short = [full.rsplit("/", 1)[-1] for full in snapshot.fabric.names[rack]]
        load[rack][short.index(name)] = n
    snapshot.uplinks = lambda: load


def racks_of(snapshot: Snapshot, hosts: Iterable[str]) -> set[str]:
    rack = snapshot.fabric.index("rack")
    index = snapshot.fabric.host_index
    names = [full.rsplit("/", 1)[-1] for full in snapshot.fabric.names[rack]]
    return {names[snapshot.fabric.domain[rack][index[h]]] for h in hosts}


def blind_and_aware(
    fabric: Fabric, **gangs: int
) -> tuple[Snapshot, GangRequest, Placement, Placement]:
    """One free host per rack, a two-pod gang placed before and after running gangs are put
    on the named racks' uplinks."""
    snapshot = taken(fabric, "h0-0", "h1-0", "h2-0")
    gang = GangRequest(name="g", pods=2)
    [blind] = place(snapshot, [gang])
    loaded(snapshot, **gangs)
    [aware] = place(snapshot, [gang])
    return snapshot, gang, blind, aware


def test_of_placements_with_equal_rings_the_one_crossing_fewer_running_gangs_is_taken():
    """One free host per rack: a two-pod gang spans two racks whichever it takes (equal ring
    term). One running gang crosses the uplinks of r1 and r2: the gang takes r0 and one of
    them, and J counts that one gang once, at the rack weight (scoring.py's load term)."""
    fabric = shared_racks(generate(blocks=1, racks=3, hosts=2, gpus=8))
    snapshot, gang, blind, aware = blind_and_aware(fabric, r1=1, r2=1)
    validate(snapshot, gang, aware)
    assert "r0" in racks_of(snapshot, aware.hosts())
    w = level_weights(fabric, gang)[fabric.index("rack")]
    assert aware.objective == pytest.approx(blind.objective + w)
    assert aware.optimal
    assert aware.bound == pytest.approx(aware.objective)


@pytest.mark.parametrize("engine", ["tree-dp", "cp-sat model"])
@pytest.mark.parametrize(("gangs", "crosses_spines"), [(31, False), (33, True)])
def test_a_gang_leaves_loaded_racks_for_a_spine_crossing_only_when_their_load_outweighs_it(
    gangs, crosses_spines, engine
):
    """Free: one host in r0, r1 (spine s0) and r2 (s1). Inside s0 the gang crosses both loaded
    uplinks (2 w_r + 2 L w_r); across spines only one, but two spine crossings (2 w_r + 2 w_s +
    L w_r). With w_s = 16 w_r the spine pays off past L = 32 gangs, by hand. The tree DP proves
    it; the CP-SAT model alone (no warm start: its own load terms) finds the same."""
    snapshot = taken(FABRIC, "h0-0", "h1-0", "h2-0", "h3-0", "h3-1")
    gang = GangRequest(name="g", pods=2)
    loaded(snapshot, r0=gangs, r1=gangs)
    w = level_weights(FABRIC, gang)
    if engine == "tree-dp":
        [p] = place(snapshot, [gang])
        validate(snapshot, gang, p)
        assert p.optimal
        counts, value = p.hosts(), p.objective
    else:
        capacity = Capacity.of(snapshot, gang)
        config = PlaceConfig.of(work_limit=5)
        found = model_solve(capacity, lower_bound(capacity, w), w, config, None)
        assert found is not None
        names = [h.name for h in FABRIC.hosts]
        counts = {names[h]: n for h, n in found.counts.items() if n}
        value = j_value(capacity, found.counts, config)
    rack, spine = w[FABRIC.index("rack")], w[FABRIC.index("spine")]
    inside = 2 * rack + 2 * gangs * rack
    across = 2 * rack + 2 * spine + gangs * rack
    assert ("r2" in racks_of(snapshot, counts)) is crosses_spines
    below = 2 * (w[FABRIC.index("host")] + w[FABRIC.index("nvlink")])
    assert value == pytest.approx(below + min(inside, across))


@pytest.mark.parametrize("seed", range(10))
def test_counts_kept_between_cycles_equal_counts_made_afresh(seed):
    """Gangs start, end and move (same key, new placement) at random: what `Crossings` keeps
    is what counting every running gang again gives."""

    rng = random.Random(seed)
    names = [h.name for h in FABRIC.hosts]
    kept, now = Crossings(FABRIC), {}
    for _ in range(30):
        for key in list(now):
            if rng.random() < 0.3:
                del now[key]
        for _ in range(rng.randint(0, 3)):
            now[f"g{rng.randint(0, 6)}"] = running(*rng.sample(names, rng.randint(1, 4)))
        kept.update(now)
        fresh = crossings(FABRIC, now.values())
        assert all((kept.counts[lv] == fresh[lv]).all() for lv in fresh)


def test_the_load_on_a_one_to_one_uplink_costs_nothing():
    """A 1:1 rack uplink carries every host below it at its NIC rate: the gangs crossing it
    never slow each other there, and J does not price them (scoring.shared_uplinks)."""
    plain = Fabric(generate(blocks=1, racks=3, hosts=2, gpus=8))
    _, _, blind, aware = blind_and_aware(plain, r1=5, r2=5)
    assert aware.objective == pytest.approx(blind.objective)
    assert aware.hosts() == blind.hosts()


def test_a_gang_started_in_the_cycle_counts_for_the_next_placement_of_the_same_cycle():
    rack = FABRIC.index("rack")
    started: dict[str, Placement] = {}
    counts = Crossings(FABRIC).of(lambda: {"a": running("h0-0", "h1-0")}, lambda: started)
    assert by_name(rack, counts()[rack]) == {"c0/s0/r0": 1, "c0/s0/r1": 1}
    started["b"] = running("h1-1", "h2-0")
    assert by_name(rack, counts()[rack]) == {"c0/s0/r0": 1, "c0/s0/r1": 2, "c0/s1/r2": 1}
