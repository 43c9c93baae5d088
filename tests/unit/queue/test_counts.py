"""Counting proofs (queue/counts.py): the room of a plain request equals what placement counts,
so a gang with more pods than its room is unplaceable under every policy; shapes that group or
cap their pods are never counted."""

from __future__ import annotations

import random

import numpy as np
import pytest

from scheduler.model.constraints import Taint, TaintEffect, Toleration
from scheduler.model.gang import GangRequest, ParallelShape, Slice
from scheduler.model.topology import HostSpec, TopologySpec
from scheduler.placement import Snapshot, place_one
from scheduler.placement.api import POLICIES
from scheduler.placement.capacity import Capacity
from scheduler.queue.counts import Fits, fit_of, held_room, per_host, room
from scheduler.queue.cycle import Cycle
from scheduler.queue.holds import Holds
from scheduler.queue.order import Known
from scheduler.queue.running import RunningGangs
from scheduler.queue.shapes import ShapeIds
from scheduler.queue.types import QueueConfig, WaitReason
from scheduler.queue.views import Views
from scheduler.topology import Fabric

TAINT = Taint(key="accel", value="h200", effect=TaintEffect.NO_SCHEDULE)


def fabric(rng: random.Random) -> Fabric:
    """Two pools over 3 racks of 4 hosts with 4 or 8 GPUs; some hosts tainted or labelled."""
    hosts = []
    for r in range(3):
        for h in range(4):
            tainted = rng.random() < 0.2
            hosts.append(
                HostSpec(
                    name=f"h{r}{h}",
                    gpus=rng.choice([4, 8]),
                    cpu_milli=64_000,
                    memory_mib=512_000,
                    max_pods=rng.choice([2, 8, 110]),
                    domains={"rack": f"r{r}", "spine": f"s{r % 2}"},
                    labels={"zone": "b"} if rng.random() < 0.5 else {},
                    taints=(TAINT,) if tainted else (),
                    pool="training" if h < 3 else "batch-inference",
                )
            )
    return Fabric(TopologySpec(hosts=tuple(hosts)))


def state(rng: random.Random, f: Fabric) -> Snapshot:
    """Random free GPUs, CPU, memory and pod slots (one host overcommitted), hosts down."""
    snap = Snapshot(f)
    n = len(f.hosts)
    snap.free_gpus[:] = [rng.randint(0, h.gpus) for h in f.spec.hosts]
    snap.free_cpu[:] = [rng.choice([0, 8_000, 32_000, 64_000]) for _ in range(n)]
    snap.free_mem[:] = [rng.choice([0, 64_000, 512_000]) for _ in range(n)]
    snap.free_pods[:] = [rng.randint(0, 4) for _ in range(n)]
    snap.free_gpus[rng.randrange(n)] = -2
    snap.down = {rng.randrange(n) for _ in range(rng.randint(0, 2))}
    return snap


def plain(rng: random.Random, name: str) -> GangRequest:
    constraints: dict[str, object] = {}
    if rng.random() < 0.3:
        constraints["selector"] = (("zone", "b"),)
    if rng.random() < 0.3:
        constraints["tolerations"] = (Toleration(key="accel", value="h200"),)
    return GangRequest.model_validate(
        {
            "name": name,
            "pods": rng.randint(1, 12),
            "gpus_per_pod": rng.choice([0, 1, 2, 4, 8]),
            "cpu_milli_per_pod": rng.choice([0, 0, 4_000, 16_000]),
            "memory_mib_per_pod": rng.choice([0, 0, 32_000]),
            "pool": rng.choice(["training", "batch-inference"]),
            "constraints": constraints,
        }
    )


def six_shapes(seed: int) -> tuple[random.Random, Fabric, Snapshot, list[GangRequest], Fits]:
    """A random fabric and state, and six plain gangs, each its own shape."""
    rng = random.Random(seed)
    f = fabric(rng)
    snap = state(rng, f)
    gangs = [plain(rng, f"g{i}") for i in range(6)]
    fits = Fits()
    for shape, gang in enumerate(gangs):
        fits.shape(shape, gang.pool, gang)
    return rng, f, snap, gangs, fits


@pytest.mark.parametrize("seed", range(40))
def test_room_is_what_placement_counts(seed):
    _, _, snap, gangs, fits = six_shapes(seed)
    for shape, gang in enumerate(gangs):
        at = int(fits.of_shape[shape])
        counted = room(snap, gang.pool, fits.by_pool[gang.pool])[at]
        assert counted == Capacity.of(snap, gang).total


@pytest.mark.parametrize("seed", range(40))
def test_a_held_views_room_is_its_versions_less_the_held_hosts(seed):
    """Hosts held from a view are down in it: its room is the whole view's less what they take
    (held hosts down already, off the pool or not admitting the request take nothing)."""
    rng, f, snap, _, fits = six_shapes(seed)
    held = frozenset([*rng.sample(range(len(f.hosts)), rng.randint(0, 6)), *snap.down])
    view = snap.copy()
    view.down |= held
    for pool, wanted in fits.by_pool.items():
        pods = per_host(snap, pool, wanted)
        got = held_room(pods, pods.sum(axis=1), held)
        assert got.tolist() == room(view, pool, wanted).tolist()


@pytest.mark.parametrize("seed", range(20))
def test_a_kept_table_reads_as_the_requests_do_as_they_grow_and_the_fabric_changes(seed):
    """per_host with the pool's kept Table (what the requests ask, read once) equals per_host
    reading the requests anew, after more requests come and on another fabric."""
    rng, f, snap, _, fits = six_shapes(seed)
    for step, fabric_now in enumerate((f, f, fabric(rng))):
        view = snap if fabric_now is f else state(rng, fabric_now)
        if step == 1:  # requests come: a cpu-only one and one asking every resource
            fits.shape(6, "training", plain(rng, "a").model_copy(update={"gpus_per_pod": 0}))
            fits.shape(7, "training", plain(rng, "b").model_copy(update={"cpu_milli_per_pod": 1}))
        for pool, wanted in fits.by_pool.items():
            kept = per_host(view, pool, wanted, fits.table(pool, fabric_now))
            assert kept.tolist() == per_host(view, pool, wanted).tolist(), (step, pool)


@pytest.mark.parametrize("seed", range(25))
def test_a_gang_with_more_pods_than_its_room_is_unplaceable_under_every_policy(seed):
    rng = random.Random(seed)
    f = fabric(rng)
    snap = state(rng, f)
    gang = plain(rng, "g")
    fits = Fits()
    fits.shape(0, gang.pool, gang)
    fits_in = int(room(snap, gang.pool, fits.by_pool[gang.pool])[0])
    short = gang.model_copy(update={"pods": fits_in + 1})
    for policy in POLICIES:
        config = QueueConfig.of(policy=policy).place
        assert not place_one(snap, short, config).placed, policy


@pytest.mark.parametrize(
    "update",
    [
        {"slices": (Slice(level="rack", size=2),)},
        {"preferred_slices": (Slice(level="rack", size=2),)},
        {"shape": ParallelShape(tp=8)},  # 2 pods of 4 GPUs per tensor-parallel group
        {"max_pods_per_host": 1},
        {"extended_per_pod": {"rdma/ib": 1}},
    ],
)
def test_a_shape_that_groups_or_caps_its_pods_is_not_counted(update):
    gang = GangRequest(name="g", pods=2, gpus_per_pod=4).model_copy(update=update)
    assert fit_of(gang) is None
    fits = Fits()
    fits.shape(3, gang.pool, gang)
    assert fits.of_shape[3] < 0
    assert np.all(fits.of_shape[:3] < 0)  # ids not given yet are no plain request


@pytest.mark.parametrize("seed", range(10))
def test_a_views_room_counts_a_lent_host_held_from_it(seed):
    """Hosts of another pool lent to this one and held from a view (not among the pool's own
    held hosts, `View.held`) take their pods out of its room too."""
    rng = random.Random(seed)
    f = fabric(rng)
    snap = state(rng, f)
    snap.down = set()
    lent = [h for h, host in enumerate(f.hosts) if host.pool == "batch-inference"][:3]
    snap.lent = {"training": frozenset(lent)}
    for h in lent:
        snap.free_gpus[h], snap.free_pods[h], snap.free_cpu[h], snap.free_mem[h] = 4, 4, 0, 0
    gang = GangRequest(name="g", pods=1, gpus_per_pod=1, pool="training")
    views = Views(QueueConfig(), {}, Holds(), ShapeIds())
    views.fits.shape(0, "training", gang)
    c = Cycle(0.0, snap, [], RunningGangs())
    own = [h for h, host in enumerate(f.hosts) if host.pool == "training"][:2]
    v = views.view_for(c, "training", frozenset([*lent[:2], *own]))
    wanted = views.fits.by_pool["training"]
    assert views.room(c, v).tolist() == room(v.snapshot, "training", wanted).tolist()


def test_an_empty_memo_is_looked_up_without_the_views_digest():
    """The memo is keyed by a digest of the view; with nothing learnt the look-up answers
    nothing and the digest is left uncomputed, and once something is learnt on the view it is
    found there (and on no other view)."""
    rng = random.Random(7)
    f = fabric(rng)
    snap = state(rng, f)
    views = Views(QueueConfig(), {}, Holds(), ShapeIds())
    c = Cycle(0.0, snap, [], RunningGangs())
    v = views.view_for(c, "training", frozenset())
    assert views.known_on(v) == {}
    assert v.fingerprint is None
    found = Known(4, WaitReason.UNPLACEABLE, "no room", "k")
    views.memo.learn((v.seen(), v.held), 3, found)
    assert views.known_on(v) == {3: found}
    own = next(h for h, host in enumerate(f.hosts) if host.pool == "training")
    other = views.view_for(c, "training", frozenset([own]))
    assert views.known_on(other) == {}
