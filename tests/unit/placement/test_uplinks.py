"""The uplinks' load (placement/uplinks.py) and rackwise's tie-break by it (cpsat/solve.py,
_less_loaded): counted by hand, and never traded for J."""

from __future__ import annotations

import random

import pytest

from scheduler.model import GangRequest, Placement, PlacementStatus, PodAssignment
from scheduler.placement import Snapshot, place, validate
from scheduler.placement.uplinks import crossings, meets
from scheduler.topology import Fabric, generate

# 2 spines x 2 racks x 2 hosts: racks r0, r1 under s0; r2, r3 under s1 (hosts h<rack>-<i>)
FABRIC = Fabric(generate(blocks=2, racks=2, hosts=2, gpus=8))


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


def counts(snapshot: Snapshot, placement: Placement) -> dict[int, int]:
    index = snapshot.fabric.host_index
    return {index[h]: n for h, n in placement.hosts("").items()}


def taken(*hosts: str) -> Snapshot:
    snapshot = Snapshot(Fabric(generate(blocks=1, racks=3, hosts=2, gpus=8)))
    for h in hosts:
        snapshot.use(h, 8)
    return snapshot


def test_of_equal_placements_the_one_meeting_fewer_running_gangs_is_taken():
    """One free host per rack: a two-pod gang spans two racks whichever it takes (equal J).
    A running gang crosses the uplinks of r1 and r2, the pair the gang takes when it does not
    look: it takes r0 and one of them."""
    snapshot = taken("h0-0", "h1-0", "h2-0")
    gang = GangRequest(name="g", pods=2)
    [blind] = place(snapshot, [gang])
    load = crossings(snapshot.fabric, [running("h1-0", "h2-0")])
    snapshot.uplinks = lambda: load
    [aware] = place(snapshot, [gang])
    validate(snapshot, gang, aware)
    assert meets(snapshot, counts(snapshot, aware)) == 1
    assert meets(snapshot, counts(snapshot, blind)) == 2
    assert (aware.objective, aware.bound, aware.optimal) == (
        blind.objective,
        blind.bound,
        blind.optimal,
    )


@pytest.mark.parametrize("seed", range(40))
def test_the_tie_break_never_costs_j_nor_changes_a_label(seed):
    rng = random.Random(seed)
    fabric = Fabric(generate(blocks=2, racks=2, hosts=3, gpus=8))
    snapshot = Snapshot(fabric)
    names = [h.name for h in fabric.hosts]
    for h in names:
        if rng.random() < 0.5:
            snapshot.use(h, rng.choice([4, 8]))
    others = [running(*rng.sample(names, rng.randint(2, 4))) for _ in range(rng.randint(1, 4))]
    gang = GangRequest(name="g", pods=rng.randint(2, 6), gpus_per_pod=rng.choice([4, 8]))
    [blind] = place(snapshot, [gang])
    load = crossings(fabric, others)
    snapshot.uplinks = lambda: load
    [aware] = place(snapshot, [gang])
    assert aware.placed == blind.placed
    if aware.placed:
        validate(snapshot, gang, aware)
        assert aware.objective <= blind.objective * (1 + 1e-12)
        assert (aware.bound, aware.optimal) == (blind.bound, blind.optimal)
        assert meets(snapshot, counts(snapshot, aware)) <= meets(snapshot, counts(snapshot, blind))


@pytest.mark.parametrize("seed", range(10))
def test_counts_kept_between_cycles_equal_counts_made_afresh(seed):
    """Gangs start, end and move (same key, new placement) at random: what `Crossings` keeps
    is what counting every running gang again gives."""
    from scheduler.placement.uplinks import Crossings

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
