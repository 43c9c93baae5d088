"""Joint placement (queue/checkpoints/joint.py): hand-built cycles where placing the starts together
changes the decision, and its off switch giving the one-by-one decisions back."""

from __future__ import annotations

import random

import pytest

from scheduler.model import PlaceConfig
from scheduler.model.topology import HostSpec, TopologySpec
from scheduler.placement import Snapshot, place, validate
from scheduler.queue import Preemption, QueueConfig, SchedulingQueue, WaitReason
from scheduler.queue.checkpoints import joint
from scheduler.topology import Fabric
from tests.unit.queue.helpers import fabric, gang

ON = QueueConfig.of(preemption=Preemption.OFF)
OFF = QueueConfig.of(preemption=Preemption.OFF, joint_gangs=0)


def two_racks() -> Snapshot:
    """One spine, racks r0 (two empty hosts) and r1 (two hosts with 4 GPUs free each)."""
    snap = Snapshot(fabric(blocks=1, racks=2, hosts=2))
    snap.use("h1-0", 4)
    snap.use("h1-1", 4)
    return snap


def queued(config: QueueConfig) -> SchedulingQueue:
    queue = SchedulingQueue(config)
    queue.add("a", gang("a", 2, gpus=4), arrival=0)  # fits one empty host: it takes one
    queue.add("b", gang("b", 2, gpus=8), arrival=1)  # needs both empty hosts
    return queue


def test_one_by_one_the_later_gang_waits():
    decisions = queued(OFF).cycle(0, two_racks(), [])
    [(key, placement)] = decisions.starts
    assert key == "a"
    assert len(placement.hosts()) == 1
    assert decisions.waiting["b"].reason is WaitReason.UNPLACEABLE


def test_placed_together_both_start():
    snap = two_racks()
    decisions = queued(ON).cycle(0, snap, [])
    starts = dict(decisions.starts)
    assert set(starts) == {"a", "b"}
    assert decisions.joint_joined == ["b"]
    assert decisions.joint_moved == ["a"]
    assert set(starts["b"].hosts()) == {"h0-0", "h0-1"}
    assert set(starts["a"].hosts()) == {"h1-0", "h1-1"}  # 4 GPUs on each half-used host
    assert "b" not in decisions.waiting
    work = snap.copy()
    for key, g in (("a", gang("a", 2, gpus=4)), ("b", gang("b", 2, gpus=8))):
        validate(work, g, starts[key])
        work.apply(g, starts[key])


def spine_split() -> Snapshot:
    """Spine s0: racks r0, r1 with two empty hosts each. Spine s1: racks r2, r3 with one
    empty host each (the other busy)."""
    snap = Snapshot(fabric(blocks=2, racks=2, hosts=2))
    snap.use("h2-1", 8)
    snap.use("h3-1", 8)
    return snap


@pytest.mark.parametrize("share", [0.0, 0.05])
def test_placed_together_the_large_gang_keeps_its_spine(share):
    """One-by-one, the 2-host gang takes a rack of s0 (inside a rack is cheapest for it) and
    the 4-host gang must span spines; together, the 4-host gang takes s0 and the 2-host one
    spans two racks of s1: less J in total."""
    config = QueueConfig.of(preemption=Preemption.OFF, fragmentation_share=share)

    def cycle(c: QueueConfig):
        queue = SchedulingQueue(c)
        queue.add("small", gang("small", 2), arrival=0)
        queue.add("large", gang("large", 4), arrival=1)
        return queue.cycle(0, spine_split(), [])

    alone_config = QueueConfig.of(
        preemption=Preemption.OFF, fragmentation_share=share, joint_gangs=0
    )
    alone = dict(cycle(alone_config).starts)
    assert alone["large"].domains["spine"] == 2
    together = cycle(config)
    starts = dict(together.starts)
    assert starts["large"].domains["spine"] == 1
    assert starts["small"].domains["rack"] == 2
    before = sum(p.objective for p in alone.values())
    after = sum(p.objective for p in starts.values())
    assert together.joint_gain == pytest.approx(before - after)
    assert together.joint_gain > 0
    assert together.joint_joined == []


def test_hosts_held_for_others_stay_off_limits():
    """The alternative that starts "b" needs h0-0; held for another gang, it is not taken (but
    a gang that already holds a forbidden host may stay on it)."""
    snap = two_racks()
    a, b = gang("a", 2, gpus=4), gang("b", 2, gpus=8)
    [placed] = place(snap, [a])
    work = snap.copy()
    work.apply(a, placed)
    index = snap.fabric.host_index
    config = PlaceConfig()
    free = joint.improve(work, [("a", a, placed)], [("b", b)], {}, config, 8)
    assert free is not None
    assert free.joined == ["b"]
    h00 = frozenset({index["h0-0"]})
    held = joint.improve(work, [("a", a, placed)], [("b", b)], {"b": h00}, config, 8)
    assert held is None
    own = frozenset(index[h] for h in placed.hosts())
    mine = joint.improve(work, [("a", a, placed)], [("b", b)], {"a": own}, config, 8)
    assert mine is not None
    assert mine.joined == ["b"]


def test_switched_off_it_is_one_by_one():
    """joint_gangs 0 gives the decisions the queue made before joint placement existed."""
    for config in (OFF, QueueConfig.of(preemption=Preemption.OFF, joint_gangs=1)):
        decisions = queued(config).cycle(0, two_racks(), [])
        assert [k for k, _ in decisions.starts] == ["a"]
        assert decisions.joint_gain == 0.0
        assert decisions.joint_moved == decisions.joint_joined == []


def _random_cycle(seed: int):  # type: ignore[no-untyped-def]
    """A small busy fabric, one to three one-pod starts placed one by one on it, and a gang
    of one to three pods that waits (it may or may not fit with the starts released)."""
    rng = random.Random(seed)
    snap = Snapshot(fabric(blocks=rng.randint(1, 2), racks=rng.randint(1, 2), hosts=2))
    for host in snap.fabric.hosts[1:]:  # the first left free: the first start always fits
        snap.use(host.name, rng.choice((0, 2, 4, 6, 8)))
    work, starts = snap.copy(), []
    for i in range(rng.randint(1, 3)):
        g = gang(f"s{i}", 1, gpus=rng.choice((1, 2, 4)))
        [placed] = place(work, [g])
        if placed.placed:
            work.apply(g, placed)
            starts.append((g.name, g, placed))
    waiting = gang("w", rng.randint(1, 3), gpus=rng.choice((4, 8)))
    return work, starts, [("w", waiting)]


def _decided(found: joint.Joint | None) -> object:
    """What a joint placement decides (its placements' solve times are the clock's)."""
    if found is None:
        return None
    hosts = {k: p.hosts() for k, p in found.placements.items()}
    return hosts, found.joined, found.gain


@pytest.mark.parametrize("seed", range(60))
def test_nothing_to_gain_and_no_one_to_join_is_known_without_placing(seed, monkeypatch):
    """Starts of J 0 (one pod each) leave nothing to gain, and a waiting gang without whole-pod
    GPU room on everything the starts free cannot join: `improve` answers None without placing
    anyone, as it did placing them all (the path it skips, run with the room check off)."""
    work, starts, waiting = _random_cycle(seed)
    config = PlaceConfig()
    quick = joint.improve(work, starts, waiting, {}, config, 8)
    calls = []
    kept = joint.place_one
    monkeypatch.setattr(joint, "place_one", lambda *a: calls.append(1) or kept(*a))
    monkeypatch.setattr(joint, "_room", lambda *_: True)
    assert _decided(joint.improve(work, starts, waiting, {}, config, 8)) == _decided(quick)
    calls.clear()
    monkeypatch.undo()
    monkeypatch.setattr(joint, "place_one", lambda *a: calls.append(1) or kept(*a))
    base = work.copy()
    for _, g, p in starts:
        base.release(g, p)
    room = joint._room(base, waiting[0][1])
    assert _decided(joint.improve(work, starts, waiting, {}, config, 8)) == _decided(quick)
    assert bool(calls) == room  # placed only when the waiting gang may fit


def test_a_gang_that_fits_only_on_a_lent_host_may_still_join():
    """The room that decides whether a blocked gang may join counts the hosts lent to its pool
    (Snapshot.pool_hosts), as its placement does: h0 of its own pool is nearly full, h1 of
    another pool is lent to it and free."""
    spec = TopologySpec(
        hosts=(
            HostSpec(name="h0", gpus=8, domains={"rack": "r0"}),
            HostSpec(name="h1", gpus=8, domains={"rack": "r0"}, pool="batch-inference"),
        )
    )
    snap = Snapshot(Fabric(spec))
    snap.use("h0", 7)
    snap.lent = {"training": frozenset({1})}
    start = gang("s", 1, gpus=1)
    [placed] = place(snap, [start])
    assert placed.hosts() == {"h0": 1}  # its own pool's host first
    work = snap.copy()
    work.apply(start, placed)
    found = joint.improve(work, [("s", start, placed)], [("w", gang("w", 1))], {}, PlaceConfig(), 8)
    assert found is not None
    assert found.joined == ["w"]
