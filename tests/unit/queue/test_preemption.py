"""Preemption: who may be evicted, which victims are chosen, and what the preemptor holds."""

from __future__ import annotations

import itertools
import random

import pytest

from scheduler.placement import Snapshot
from scheduler.placement.capacity import Capacity
from scheduler.queue import Preemption, QueueConfig, SchedulingQueue, WaitReason
from scheduler.queue.holds import PIN_PATIENCE_S
from scheduler.queue.preemption import estimates, lowest_first, released, topology
from tests.unit.queue.helpers import fabric, gang, running

CONFIG = QueueConfig()


def full(snap: Snapshot, priority: int, tenant: str = "") -> list:
    return [
        running(snap, f"r{i}", [h.name], priority, tenant=tenant)
        for i, h in enumerate(snap.fabric.hosts)
    ]


@pytest.mark.parametrize(("priority", "evicts"), [(4, False), (5, False), (6, True)])
def test_only_strictly_lower_priorities_are_evicted(priority, evicts):
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=2))
    held = full(snap, priority=5)
    queue = SchedulingQueue(CONFIG)
    queue.add("p", gang("p", 1, priority=priority), arrival=0)
    decisions = queue.cycle(100, snap, held)
    assert bool(decisions.evictions) is evicts


def test_the_lowest_priority_goes_first():
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=2))
    low = running(snap, "low", ["h0-0"], priority=1, started=99)
    mid = running(snap, "mid", ["h0-1"], priority=3, started=0)  # would lose more, if it went
    queue = SchedulingQueue(CONFIG)
    queue.add("p", gang("p", 1, priority=5), arrival=0)
    [eviction] = queue.cycle(100, snap, [mid, low]).evictions
    assert eviction.victim == "low"
    assert eviction.preemptor == "p"


def test_other_tenants_are_out_of_reach_unless_allowed():
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=1))
    held = full(snap, priority=0, tenant="team-a")
    for cross, evicts in ((False, False), (True, True)):
        queue = SchedulingQueue(QueueConfig.of(preemption_scope="cluster" if cross else "tenant"))
        queue.add("p", gang("p", 1, priority=9), arrival=0, tenant="team-b")
        assert bool(queue.cycle(0, snap, held).evictions) is evicts


def racks_scene() -> tuple[Snapshot, list]:
    """Two racks of two hosts, each busy with a priority-0 gang of one 8-GPU pod. Rack 0
    holds A (started 0) and B (90); rack 1 holds C (50) and D (95). At t=100, without
    checkpoints, the GPU-seconds lost are A 800, B 80, C 400, D 40."""
    snap = Snapshot(fabric(blocks=1, racks=2, hosts=2))
    starts = {"A": ("h0-0", 0), "B": ("h0-1", 90), "C": ("h1-0", 50), "D": ("h1-1", 95)}
    return snap, [running(snap, k, [h], 0, started=t) for k, (h, t) in starts.items()]


def test_topology_frees_one_rack_at_the_least_loss():
    snap, held = racks_scene()
    found = topology(snap, gang("p", 2, priority=1), held, 100, CONFIG)
    assert found is not None
    assert sorted(r.key for r in found.running) == ["C", "D"]
    assert found.placement.domains["rack"] == 1
    assert found.score == (0, 440.0, 2)


def test_the_baseline_takes_the_newest_and_spans_racks():
    snap, held = racks_scene()
    found = lowest_first(snap, gang("p", 2, priority=1), held, 100, CONFIG)
    assert found is not None
    assert sorted(r.key for r in found.running) == ["B", "D"]
    assert found.placement.domains["rack"] == 2


def test_loss_counts_from_the_last_checkpoint():
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=1))
    [r] = full(snap, priority=0)
    r = r.__class__(r.key, r.gang, r.placement, started_s=0, checkpoint_s=30)
    assert r.lost_gpu_s(100) == 10 * 8  # checkpoints at 30, 60, 90


def test_the_preemptor_holds_its_hosts_until_the_victims_are_gone():
    snap, held = racks_scene()
    queue = SchedulingQueue(CONFIG)
    queue.add("p", gang("p", 2, priority=1), arrival=0)
    first = queue.cycle(100, snap, held)
    assert sorted(e.victim for e in first.evictions) == ["C", "D"]
    nominated = first.nominated["p"].hosts()
    # the operator's victims take a while to go: the next cycle still sees them running. A ends
    # meanwhile, so p is looked at again: it does not preempt a second time, and a newcomer of
    # its priority gets A's host, not the hosts held for p
    a = next(r for r in held if r.key == "A")
    snap.release(a.gang, a.placement)
    held = [r for r in held if r.key != "A"]
    queue.add("q", gang("q", 1, priority=1), arrival=1)
    second = queue.cycle(101, snap, held)
    assert not second.evictions
    assert second.waiting["p"].reason is WaitReason.PREEMPTING
    assert dict(second.starts)["q"].hosts() == {"h0-0": 1}
    # victims gone: p starts where it was nominated
    for r in held:
        if r.key in ("C", "D"):
            snap.release(r.gang, r.placement)
    rest = [r for r in held if r.key not in ("C", "D")]
    third = queue.cycle(102, snap, rest)
    started = dict(third.starts)
    assert started["p"].hosts() == nominated


def test_victims_that_left_before_their_hosts_freed_are_not_followed_by_more_victims():
    """The operator's case: a victim leaves the running list as soon as its pods are deleted,
    while the capacity it held is still counted until the cache sees them gone. Meanwhile the
    preemptor neither preempts again nor loses its hosts to a waiting gang of another tenant;
    once they are free it starts there. After `PIN_PATIENCE_S` without them it is an ordinary
    gang again."""
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=4))
    held = [running(snap, f"low{i}", [f"h0-{i}"], 0, tenant="default") for i in range(4)]
    queue = SchedulingQueue(QueueConfig.of(preemption_scope="cluster"))
    queue.add("p", gang("p", 1, priority=9), arrival=0, tenant="default")
    first = queue.cycle(100, snap, held)
    [eviction] = first.evictions
    [host] = first.nominated["p"].hosts()
    victim = next(r for r in held if r.key == eviction.victim)
    rest = [r for r in held if r is not victim]
    queue.add("other", gang("other", 1, priority=0), arrival=1, tenant="tenant-a")
    for now in (101, 130):  # its pods still counted: nothing more is preempted
        later = queue.cycle(now, snap, rest)
        assert not later.evictions
        assert later.waiting["p"].reason is WaitReason.PREEMPTING
        assert "other" not in dict(later.starts)
    snap.release(victim.gang, victim.placement)
    started = dict(queue.cycle(131, snap, rest).starts)
    assert started["p"].hosts() == {host: 1}
    assert "other" not in started


def test_a_preemptor_whose_hosts_never_free_is_an_ordinary_gang_after_its_patience():
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=2))
    held = [running(snap, f"low{i}", [f"h0-{i}"], 0) for i in range(2)]
    queue = SchedulingQueue(CONFIG)
    queue.add("p", gang("p", 1, priority=9), arrival=0)
    [eviction] = queue.cycle(0, snap, held).evictions
    rest = [r for r in held if r.key != eviction.victim]
    assert not queue.cycle(1, snap, rest).evictions
    assert not queue.cycle(1 + PIN_PATIENCE_S - 1, snap, rest).evictions
    assert queue.cycle(1 + PIN_PATIENCE_S, snap, rest).evictions


def test_with_a_domain_budget_the_cheapest_domains_by_estimate_are_examined():
    """Rack 0: A and B busy, little lost; rack 1: C busy (much lost) and one host free. Rack 1
    is the freest, but the estimate of what freeing each costs ranks rack 0 first: with one
    domain examined, the choice is the one every domain would give."""
    snap = Snapshot(fabric(blocks=1, racks=2, hosts=2))
    held = [
        running(snap, "A", ["h0-0"], started=99),
        running(snap, "B", ["h0-1"], started=99),
        running(snap, "C", ["h1-0"], started=0),
    ]
    p = gang("p", 2, priority=1)
    every = topology(snap, p, held, 100, CONFIG)
    one = topology(snap, p, held, 100, QueueConfig.of(preemption_domains=1))
    assert every is not None
    assert one is not None
    assert sorted(r.key for r in every.running) == ["A", "B"]
    assert sorted(r.key for r in one.running) == ["A", "B"]


def test_the_estimate_ranks_by_priority_then_loss_and_skips_domains_it_cannot_free():
    """Rack 0 is freed by evicting A (priority 0, much lost), rack 1 by evicting B (priority
    1, little lost); rack 2 has room already; rack 3 holds what the preemptor may not take."""
    snap = Snapshot(fabric(blocks=1, racks=4, hosts=1))
    held = [
        running(snap, "A", ["h0-0"], priority=0, started=0),
        running(snap, "B", ["h1-0"], priority=1, started=99),
    ]
    running(snap, "mine", ["h3-0"], priority=5)  # busy, not a candidate
    estimate = estimates(snap, gang("p", 1, priority=3), held, 2, 100)
    assert estimate == {0: (0, 800.0), 1: (1, 8.0), 2: (-1, 0.0)}


def test_no_preemption_when_off():
    snap, held = racks_scene()
    queue = SchedulingQueue(QueueConfig.of(preemption=Preemption.OFF))
    queue.add("p", gang("p", 2, priority=1), arrival=0)
    assert not queue.cycle(100, snap, held).evictions


def brute_force(snap, g, held, now):
    """Over every subset of candidates: the lowest level at which a domain can hold the gang
    with the subset gone, then the least (highest victim priority, GPU-seconds lost)."""
    best = None
    for n in range(len(held) + 1):
        for subset in itertools.combinations(held, n):
            cap = Capacity.of(released(snap, subset), g)
            fit = [max(c.values(), default=0) >= g.pods for c in cap.per_domain]
            levels = [lv for lv, ok in enumerate(fit) if ok]
            if not levels:
                continue
            score = (
                levels[0],
                max((r.gang.priority for r in subset), default=-1),
                sum(r.lost_gpu_s(now) for r in subset),
            )
            best = score if best is None or score < best else best
    return best


def scene(seed: int):
    rng = random.Random(seed)
    snap = Snapshot(fabric(blocks=2, racks=2, hosts=2))
    hosts = [h.name for h in snap.fabric.hosts]
    rng.shuffle(hosts)
    held, i = [], 0
    while hosts:
        take = min(len(hosts), rng.choice([1, 1, 2, 3]))
        mine, hosts = hosts[:take], hosts[take:]
        held.append(running(snap, f"r{i}", mine, rng.randint(0, 2), started=rng.uniform(0, 100)))
        i += 1
    return snap, held, gang("p", rng.choice([1, 2, 3, 4]), priority=3)


def test_topology_victims_against_brute_force():
    """On 200 random 8-host scenes: always the exhaustive search's lowest level and highest
    victim priority; the least lost work in at least 95% of scenes and never over 2x it (victims
    are added greedily and then spared: a heuristic, not a proof)."""
    exact, worst = 0, 1.0
    for seed in range(200):
        snap, held, g = scene(seed)
        found = topology(snap, g, held, 100, CONFIG)
        expected = brute_force(snap, g, held, 100)
        assert (found is None) == (expected is None)
        if found is None:
            continue
        caps = Capacity.of(released(snap, found.running), g).per_domain
        level = min(lv for lv, c in enumerate(caps) if max(c.values(), default=0) >= g.pods)
        assert (level, found.score[0]) == expected[:2], seed
        ratio = found.score[1] / expected[2] if expected[2] else 1.0
        exact += ratio <= 1 + 1e-9
        worst = max(worst, ratio)
    assert exact >= 190
    assert worst <= 2.0
