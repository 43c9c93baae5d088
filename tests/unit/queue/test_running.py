"""The running gangs' indexes (queue/running.py), kept one change at a time, against the same
answers computed from scratch over seeded sequences of starts, ends and whole-list syncs; and
the queue's decisions with a driver's index against those with its plain list."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from scheduler.model.gang import GangRequest
from scheduler.model.placement import Placement, PlacementStatus, PodAssignment
from scheduler.placement import Snapshot
from scheduler.placement.snapshot import usage_of
from scheduler.queue import Backfill, Running, RunningGangs, reservation
from scheduler.queue.cycle import Cycle, fingerprint, free_digest
from scheduler.queue.holds import Holds
from scheduler.queue.released import Flat
from scheduler.queue.reservation import _first_possible, _release_first
from scheduler.queue.running import key_hash, release_key
from scheduler.queue.shapes import ShapeIds
from scheduler.queue.types import QueueConfig
from scheduler.queue.views import Views
from scheduler.simulation.config import Failures, SimConfig
from scheduler.simulation.engine import Simulation
from scheduler.topology import Fabric, generate
from tests.unit.simulation.overload import two_pools
from tests.unit.simulation.test_quiet import FABRIC, overload

POOLS = ("training", "inference")
TENANTS = ("", "a", "b")


def gang(rng: random.Random, n: int) -> Running:
    request = GangRequest(
        name=f"g{n}", pods=1, gpus_per_pod=1, pool=rng.choice(POOLS), priority=rng.randint(0, 3)
    )
    end = None if rng.random() < 0.2 else float(rng.randint(0, 50))  # ties on purpose
    started = float(rng.randint(0, 5))
    placement = Placement(gang=request.name, policy="test", status=PlacementStatus.PLACED)
    return Running(f"k{n}", request, placement, started, rng.choice(TENANTS), None, end)


def changes(seed: int, steps: int = 300):
    """Yield (index kept by changes, the gangs as a dict) after every change."""
    rng = random.Random(seed)
    index, now, n = RunningGangs(), {}, 0
    for _ in range(steps):
        move = rng.random()
        if move < 0.55 or not now:
            n += 1
            r = gang(rng, n)
            index.add(r)
            now[r.key] = r
        elif move < 0.95:
            key = rng.choice(sorted(now))
            index.discard(key)
            del now[key]
        else:  # a driver's whole list, some gangs replaced by changed ones
            for key in rng.sample(sorted(now), min(3, len(now))):
                n += 1
                r = gang(rng, n)
                now[key] = Running(key, r.gang, r.placement, r.started_s, r.tenant, None, r.end_s)
            index.sync(list(now.values()))
        yield index, now


def release_order(running) -> list[str]:
    ends = sorted(
        running, key=lambda r: (math.inf if r.end_s is None else r.end_s, r.started_s, r.key)
    )
    return [r.key for r in ends]


def digest(keys) -> tuple[int, int]:
    xor = 0
    for key in keys:
        xor ^= key_hash(key)
    return xor, len(keys)


@pytest.mark.parametrize("seed", range(20))
def test_every_answer_is_the_one_computed_from_scratch(seed):
    rng = random.Random(1000 + seed)
    for index, now in changes(seed):
        assert set(index.gangs) == set(now)
        for pool in POOLS:
            mine = [r for r in now.values() if r.gang.pool == pool]
            assert index.lowest(pool) == min((r.gang.priority for r in mine), default=math.inf)
            extra = [gang(rng, 10_000 + i) for i in range(rng.randint(0, 3))]
            extra = [r for r in extra if r.gang.pool == pool]
            order = index.releases(pool, extra)
            assert [r.key for r in order] == release_order(mine + extra)
            for priority in range(5):
                for tenant in (None, *TENANTS):
                    keys = [
                        r.key
                        for r in mine
                        if r.gang.priority < priority and tenant in (None, r.tenant)
                    ]
                    assert index.below(pool, priority, tenant) == digest(keys)


def test_the_release_order_reads_alike_by_position_slice_and_from_the_end():
    rng = random.Random(7)
    index = RunningGangs(gang(rng, n) for n in range(200))
    order = index.releases("training", [gang(rng, 500)])
    first = order[0]
    assert order[:3][0] is first
    assert order[-1] is list(order)[-1]


def placed(rng: random.Random, n: int) -> Running:
    """A gang of 1-4 pods of 1-8 GPUs on hosts of FABRIC."""
    r = gang(rng, n)
    pods, gpus = rng.randint(1, 4), rng.choice([1, 2, 4, 8])
    request = r.gang.model_copy(update={"pods": pods, "gpus_per_pod": gpus, "pool": "training"})
    hosts = [rng.choice(FABRIC.hosts).name for _ in range(pods)]
    assignments = tuple(PodAssignment(rank=i, host=h) for i, h in enumerate(hosts))
    placement = Placement(
        gang=request.name, policy="test", status=PlacementStatus.PLACED, pods=assignments
    )
    return Running(r.key, request, placement, r.started_s, r.tenant, None, r.end_s)


def flat_fields(flat: Flat) -> list[list[int]]:
    return [a.tolist() for a in (flat.hosts, flat.gpus, flat.amounts, flat.pods, flat.totals)]


@pytest.mark.parametrize("seed", range(10))
def test_the_flat_release_arrays_stay_those_made_from_scratch(seed):
    rng = random.Random(seed)
    index, now = RunningGangs(), {}
    index.flat("training", FABRIC)  # kept up to date from here on
    for n in range(150):
        if rng.random() < 0.6 or not now:
            r = placed(rng, n)
            index.add(r)
            now[r.key] = r
        else:
            key = rng.choice(sorted(now))
            index.discard(key)
            del now[key]
        extra = [placed(rng, 1000 + i) for i in range(rng.randint(0, 2))]
        order = index.releases("training", extra)
        ordered = sorted([*now.values(), *extra], key=release_key)
        usages = [(usage_of(FABRIC, r.gang, r.placement), r.gang.all_gpus) for r in ordered]
        assert flat_fields(order.flat(FABRIC)) == flat_fields(Flat.of(usages))


def first_possible_by_walking(view: Snapshot, gang: GangRequest, ordered: list[Running]) -> int:
    """The definition, one release at a time, everything recomputed: on the up hosts a
    training gang may use (its pool's, and those lent to it)."""
    counted = view.pool_hosts("training") & view.up_mask()
    free = view.copy()
    for k in range(len(ordered) + 1):
        if k:
            free.release(ordered[k - 1].gang, ordered[k - 1].placement)
        gpus = int(free.free_gpus[counted].sum())
        room = int((free.free_gpus[counted] // max(gang.gpus_per_pod, 1)).sum())
        if k >= 1 and gpus >= gang.all_gpus and room >= gang.pods:
            return k
    return len(ordered) + 1


TWO_POOLS = two_pools(FABRIC)  # its second spine lends to training


@pytest.mark.parametrize("lending", [False, True])
@pytest.mark.parametrize("prefix", [0, 1, reservation.PREFIX])  # walked pods, then at once
@pytest.mark.parametrize("seed", range(40))
def test_the_first_possible_release_is_the_one_a_walk_finds(seed, prefix, lending, monkeypatch):
    """Also where another pool lends some of its hosts to training (counted as training's)."""
    monkeypatch.setattr(reservation, "PREFIX", prefix)
    rng = random.Random(seed)
    running = [placed(rng, n) for n in range(rng.randint(0, 40))]
    fabric = TWO_POOLS if lending else FABRIC
    view = Snapshot(fabric)
    for r in running:
        view.apply(r.gang, r.placement)
    view.down |= set(rng.sample(range(len(FABRIC.hosts)), 3))
    if lending:
        theirs = np.flatnonzero(~fabric.pool_mask["training"]).tolist()
        view.lent = {"training": frozenset(rng.sample(theirs, rng.randint(1, len(theirs))))}
    wanted = GangRequest(name="w", pods=rng.randint(1, 12), gpus_per_pod=rng.choice([2, 4, 8]))
    index = RunningGangs(running)
    order = index.releases("training")
    expected = first_possible_by_walking(view, wanted, list(order))
    assert _first_possible(view, wanted, order.flat(fabric)) == expected


def test_two_different_sets_of_gangs_have_different_digests():
    seen = {}
    for n in range(2000):
        keys = frozenset(f"k{i}" for i in range(n % 50) if (i * 7 + n) % 3)
        found = digest(sorted(keys))
        assert seen.setdefault(found, keys) == keys


def run(seed: int, plain: bool, **rules: object):
    failures = Failures(mtbf_hours=200, mttr_hours=1)
    config = SimConfig.of(
        seed=seed, failures=failures, checkpoint_minutes=20, defrag_moves_per_hour=6, **rules
    )
    sim = Simulation(FABRIC, overload(seed), "rackwise", config)
    if plain:  # the operator's way: its whole list each cycle, indexed by the queue
        cycle = sim.queue.cycle
        sim.queue.cycle = lambda now, snapshot, running: cycle(now, snapshot, list(running))  # type: ignore[method-assign]
    result = sim.run()
    return result.starts, result.evictions, [(t, m.key) for t, m in result.moves]


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("backfill", [Backfill.EASY, Backfill.GREEDY])
def test_a_driver_list_and_a_driver_index_give_the_same_decisions(seed, backfill):
    indexed = run(seed, plain=False, backfill=backfill, preemption="topology")
    listed = run(seed, plain=True, backfill=backfill, preemption="topology")
    assert len(indexed[0]) > 100
    assert indexed[1]  # it preempted
    assert indexed == listed


@pytest.mark.parametrize("seed", range(20))
def test_a_cycle_counts_its_starts_and_not_its_evictions(seed):
    rng = random.Random(seed)
    index = RunningGangs(gang(rng, n) for n in range(rng.randint(0, 30)))
    started = [gang(rng, 100 + n) for n in range(rng.randint(0, 4))]
    c = Cycle(0.0, Snapshot(FABRIC), [*index, *started], index, started=list(started))
    everyone = [*index, *started]
    c.evicted = {r.key for r in everyone if rng.random() < 0.3}
    for pool in POOLS:
        for priority in range(5):
            for tenant in (None, *TENANTS):
                keys = [
                    r.key
                    for r in everyone
                    if r.gang.pool == pool
                    and r.gang.priority < priority
                    and tenant in (None, r.tenant)
                    and r.key not in c.evicted
                ]
                assert c.below(pool, priority, tenant) == digest(keys)


@pytest.mark.parametrize("asked", [0, 1, 3])
def test_a_cycle_lists_what_runs_when_asked_and_keeps_it_whole(asked):
    """The driver's gangs, then the cycle's starts, whether first asked before, between or
    after the starts (listing is put off until asked), and counted alike without listing."""
    rng = random.Random(asked)
    index = RunningGangs(gang(rng, n) for n in range(6))
    starts = [gang(rng, 100 + n) for n in range(3)]
    c = Cycle(0.0, Snapshot(FABRIC), None, index)
    for n, r in enumerate(starts):
        if n == asked:
            assert c.running == [*index, *starts[:n]]
        assert c.counted() == len(index) + n
        c.start(r)
    assert c.running == [*index, *starts]
    assert c.counted() == len(index) + len(starts)
    assert c.started == starts


def test_the_lowest_priority_is_fixed_at_the_first_question_of_a_cycle():
    rng = random.Random(3)
    index = RunningGangs([gang(rng, 1)])
    low = gang(rng, 2).gang.model_copy(update={"priority": -5, "pool": "training"})
    first = Running("s1", low, index.gangs["k1"].placement, 0.0)
    c = Cycle(0.0, Snapshot(FABRIC), list(index), index, started=[first])
    assert c.lowest("training") == -5  # a start made before the question counts
    later = Running("s2", low.model_copy(update={"priority": -9}), first.placement, 0.0)
    c.started.append(later)
    assert c.lowest("training") == -5  # one made after it does not


@pytest.mark.parametrize("extended", [False, True])
def test_the_first_releases_are_given_back_as_gang_by_gang(extended):
    rng = random.Random(11)
    running = [placed(rng, n) for n in range(30)]
    if extended:  # extended resources are not in the flat rows: given back gang by gang
        running = [
            Running(
                r.key,
                r.gang.model_copy(update={"extended_per_pod": {"example.com/nic": 1}}),
                r.placement,
                r.started_s,
                r.tenant,
                None,
                r.end_s,
            )
            for r in running
        ]
    view = Snapshot(FABRIC)
    for r in running:
        view.apply(r.gang, r.placement)
    order = RunningGangs(running).releases("training")
    fast, slow = view.copy(), view.copy()
    _release_first(fast, order, order.flat(FABRIC), 12)
    for r in list(order)[:12]:
        slow.release(r.gang, r.placement)
    assert order.flat(FABRIC).extended == (30 if extended else 0)
    for column in ("free_gpus", "free_cpu", "free_mem", "free_pods"):
        assert getattr(fast, column).tolist() == getattr(slow, column).tolist()
    assert {k: v.tolist() for k, v in fast.free_ext.items()} == {
        k: v.tolist() for k, v in slow.free_ext.items()
    }


def on_hosts(key: str, hosts: list[str], priority: int = 1) -> Running:
    """A training gang of one 8-GPU pod per host, of tenant `a`."""
    request = GangRequest(
        name=key, pods=len(hosts), gpus_per_pod=8, pool="training", priority=priority
    )
    assignments = tuple(PodAssignment(rank=i, host=h) for i, h in enumerate(hosts))
    placement = Placement(gang=key, policy="test", status=PlacementStatus.PLACED, pods=assignments)
    return Running(key, request, placement, 0.0, "a")


def test_gangs_on_a_new_fabric_keep_every_count_whole():
    """The operator's nodes change (a cluster relabelled, nodes replaced) while the release
    arrays were made on the old fabric: gangs on hosts the old one lacks join, leave, and every
    count stays the one computed from scratch (a half-made change left 16 GPUs charged to a
    queue with no gang running, and a README example waited for quota forever)."""
    other = Fabric(generate(blocks=3, racks=3, hosts=4, gpus=8))
    fresh = [h.name for h in other.hosts if h.name not in FABRIC.host_index]
    old = on_hosts("old", [FABRIC.hosts[0].name])
    index = RunningGangs([old])
    index.flat("training", FABRIC)
    new, third = on_hosts("new", fresh[:2]), on_hosts("third", fresh[2:4])
    index.sync([old, new])
    index.sync([new])
    index.flat("training", other)
    index.sync([new, third])
    assert index.demands() == {("training", "a", "", ""): [32, 0, 0]}
    usages = [(usage_of(other, r.gang, r.placement), r.gang.all_gpus) for r in (new, third)]
    assert flat_fields(index.flat("training", other)) == flat_fields(Flat.of(usages))
    index.sync([])
    assert (index.demands(), index.lowest("training"), len(index)) == ({}, math.inf, 0)


def test_views_of_one_version_share_its_free_digest_and_differ_by_what_they_hold():
    """A fingerprint is the pool's free resources (digested once per version of the cycle's
    work) and its unavailable hosts: a held view differs from the whole one, a view made
    after a start sees the start, and a pool's fingerprint is its own hosts' alone."""
    c = Cycle(0.0, Snapshot(FABRIC), None, RunningGangs())
    views = Views(QueueConfig(), {}, Holds(), ShapeIds())
    whole = views.view_for(c, "training", frozenset())
    held = views.view_for(c, "training", frozenset({0}))
    assert whole.free is held.free
    assert whole.seen() != held.seen()
    assert whole.seen() == fingerprint(c.work, "training", free_digest(c.work, "training"))
    before = whole.seen()
    c.work.use(FABRIC.hosts[0].name, 1)
    c.version += 1
    after = views.view_for(c, "training", frozenset())
    assert after.free is not whole.free
    assert after.seen() != before
    spec = generate(blocks=1, racks=2, hosts=3, gpus=8)
    pools = ["training", "inference", "training", "inference", "training", "training"]
    hosts = [h.model_copy(update={"pool": p}) for h, p in zip(spec.hosts, pools, strict=True)]
    mixed = Fabric(spec.model_copy(update={"hosts": hosts}))
    assert isinstance(mixed.pool_span["training"], np.ndarray)  # not consecutive: indexes
    assert mixed.pool_span["inference"] is not None
    inference, training = Snapshot(mixed), Snapshot(mixed)
    inference.use(hosts[1].name, 1)  # another pool's host: not in training's digest
    assert free_digest(inference, "training") == free_digest(Snapshot(mixed), "training")
    training.use(hosts[5].name, 1)
    assert free_digest(training, "training") != free_digest(Snapshot(mixed), "training")
