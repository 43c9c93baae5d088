"""Spare hosts of NVLink domains (placement/spares.py): which idle hosts are held back, and
that nothing placed through the queue, the CLI's placement or the counting proofs ever has more
than n - spares hosts of a domain in service."""

from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from scheduler.model import GangRequest, PlaceConfig
from scheduler.model.gang import ParallelShape
from scheduler.model.topology import LevelSpec, Tier, TopologySpec
from scheduler.placement import Snapshot, hints, place_one, spares
from scheduler.placement.fragments import Breakage
from scheduler.placement.reasons import never_fits
from scheduler.queue import Preemption, QueueConfig, Running, SchedulingQueue
from scheduler.topology import Fabric, generate

TRAYS = 6  # hosts (trays of 4 GPUs) per NVLink domain
SPARES = 2


def nvl(spare: int = SPARES, racks: int = 2) -> Fabric:
    """`racks` racks, each one NVLink domain of TRAYS trays of 4 GPUs, `spare` kept idle."""
    return Fabric(generate(1, racks, TRAYS, gpus=4, nvlink=TRAYS, spares=spare))


def in_service(fabric: Fabric, hosts: set[int]) -> list[int]:
    """Hosts in use per NVLink domain."""
    out = [0] * len(fabric.names[1])
    for h in hosts:
        out[fabric.domain[1][h]] += 1
    return out


def test_the_highest_numbered_idle_hosts_are_held_back():
    snap = Snapshot(nvl())
    assert spares.held_back(snap) == {4, 5, 10, 11}
    snap.use("h0-5", 4)  # busy: never held back, the next idle ones are
    snap.use("h0-4", 0, cpu_milli=1000)  # a CPU-only pod puts a tray in service too
    snap.down.add(11)  # a down tray is one of its domain's spares
    assert spares.held_back(snap) == {2, 3, 10}


def test_nothing_is_held_back_without_spares_or_from_hosts_alone():
    assert spares.held_back(Snapshot(nvl(spare=0))) == set()
    alone = Fabric(generate(1, 2, TRAYS, gpus=4))  # no NVLink domain: each host is alone
    assert alone.spares == 0
    assert spares.held_back(Snapshot(alone)) == set()


def test_a_full_domain_keeps_its_running_hosts():
    snap = Snapshot(nvl(racks=1))
    for i in range(TRAYS - 1):  # more in service than the spares allow: declared while it ran
        snap.use(f"h0-{i}", 4)
    assert spares.held_back(snap) == {TRAYS - 1}  # the one idle tray, nothing running


def test_only_the_nvlink_level_keeps_spares():
    with pytest.raises(ValidationError, match="only the NVLink level keeps spare hosts"):
        TopologySpec(
            levels=(LevelSpec(name="host"), LevelSpec(name="rack", spares=1)),
            hosts=generate(1, 1, 2).hosts,
        )


def test_a_domain_holds_its_trays_less_the_spares():
    fabric = nvl()
    assert fabric.largest_nvlink == {"training": 4 * (TRAYS - SPARES)}
    assert nvl(spare=0).largest_nvlink == {"training": 4 * TRAYS}


def test_a_gang_in_one_domain_fits_only_in_the_trays_in_service():
    fits = GangRequest(name="g", pods=TRAYS - SPARES, gpus_per_pod=4, required_level="nvlink")
    over = fits.model_copy(update={"name": "o", "pods": TRAYS - SPARES + 1})
    snap = spares.hold_back(Snapshot(nvl()))
    assert place_one(snap, fits, PlaceConfig()).placed
    assert not place_one(snap, over, PlaceConfig()).placed
    assert place_one(Snapshot(nvl(spare=0)), over, PlaceConfig()).placed
    # a proof by counting, not a wait: no domain can ever hold it
    assert never_fits(nvl(), over) is not None
    assert never_fits(nvl(spare=0), over) is None


def test_an_expert_block_is_stated_only_where_the_trays_in_service_hold_one():
    gang = GangRequest(
        name="moe", pods=TRAYS, gpus_per_pod=4, shape=ParallelShape(dp=6, tp=4, ep=6)
    )
    assert hints.expert_block(nvl(spare=0), gang) is not None  # 24 GPUs: a whole domain
    assert hints.expert_block(nvl(), gang) is None  # 16 in service: never a block


@pytest.mark.parametrize("seed", range(6))
def test_the_queue_never_puts_more_trays_in_service_than_allowed(seed: int):
    """Gangs of 1-5 trays arrive and end at random; after every cycle, the trays holding pods
    number at most TRAYS - SPARES per domain (fails with the queue's hold-back taken out)."""
    rng = random.Random(seed)
    fabric = nvl()
    snap = Snapshot(fabric)
    queue = SchedulingQueue(QueueConfig.of(preemption=Preemption.OFF))
    running: dict[str, Running] = {}
    asked: dict[str, GangRequest] = {}
    for step in range(40):
        for _ in range(rng.randint(0, 2)):
            key = f"g{step}-{rng.random():.6f}"
            asked[key] = GangRequest(name=key, pods=rng.randint(1, 5), gpus_per_pod=4)
            queue.add(key, asked[key], step)
        for key in [k for k in running if rng.random() < 0.3]:
            r = running.pop(key)
            snap.release(r.gang, r.placement)
        decisions = queue.cycle(float(step), snap, list(running.values()))
        for key, placement in decisions.starts:
            gang = asked[key]
            queue.remove(key)
            snap.apply(gang, placement)
            running[key] = Running(key, gang, placement, float(step))
        used = {fabric.host_index[h] for r in running.values() for h in r.placement.hosts()}
        assert max(in_service(fabric, used)) <= TRAYS - SPARES


def test_a_rack_whose_trays_in_service_are_all_free_is_whole():
    """The fragmentation price (fragments.py) keeps whole racks scarce under spares too: their
    held-back trays are down, yet a rack with every tray in service free is whole."""
    snap = spares.hold_back(Snapshot(nvl()))  # each rack is one NVLink domain here
    assert Breakage.of(snap, "training").whole[Tier.RACK].tolist() == [True, True]
    snap.use("h0-0", 4)
    assert Breakage.of(snap, "training").whole[Tier.RACK].tolist() == [False, True]
