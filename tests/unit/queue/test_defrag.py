"""Defragmentation at checkpoints (checkpoints/defrag.py): hand-built cases where a move changes the
decision, each of its rules, and its off switch giving the old decisions back."""

from __future__ import annotations

import random

import pytest

import scheduler.queue.checkpoints.defrag as defrag_module
from scheduler.model import GangRequest
from scheduler.placement import Snapshot, place_one, validate
from scheduler.placement.api import j_floor, j_value
from scheduler.placement.capacity import Capacity
from scheduler.queue import Preemption, QueueConfig, Running, SchedulingQueue, WaitReason
from scheduler.queue.checkpoints.defrag import Defrag, own_plan
from scheduler.queue.holds import PIN_PATIENCE_S
from tests.unit.queue.helpers import fabric, running

ON = QueueConfig.of(preemption=Preemption.OFF, defrag_moves_per_hour=4)
OFF = QueueConfig.of(preemption=Preemption.OFF)
CKPT = 1800.0


def one_rack_gang(name: str = "b") -> GangRequest:
    return GangRequest(name=name, pods=2, gpus_per_pod=8, required_level="rack")


def checkpointing(r: Running) -> Running:
    return Running(r.key, r.gang, r.placement, r.started_s, checkpoint_s=CKPT)


def split_racks() -> tuple[Snapshot, list[Running]]:
    """One spine, racks r0 and r1 of two hosts: "g" (checkpoints every 30 min) on h0-0, "x"
    (no checkpoints) on h1-0. A 2-host gang that must stay in one rack cannot start, though
    two hosts are free."""
    snap = Snapshot(fabric(blocks=1, racks=2, hosts=2))
    g = checkpointing(running(snap, "g", ["h0-0"]))
    x = running(snap, "x", ["h1-0"])
    return snap, [g, x]


def test_marked_then_moved_at_its_checkpoint():
    snap, run = split_racks()
    queue = SchedulingQueue(ON)
    queue.add("b", one_rack_gang(), arrival=0)
    first = queue.cycle(100, snap, run)
    assert first.waiting["b"].reason is WaitReason.UNPLACEABLE
    assert first.marked == {"g": CKPT}
    assert first.wake_at == CKPT
    assert not first.moves
    assert not queue.cycle(1000, snap, run).moves  # no checkpoint since the mark yet
    at = queue.cycle(CKPT, snap, run)
    [move] = at.moves
    assert move.key == "g"
    assert move.waiting == "b"
    assert move.since_checkpoint_s == 0
    assert set(move.placement.hosts()) == {"h1-1"}
    assert not at.starts  # "b" gets the room once "g" is gone, as a preemptor would
    placement = at.nominated["b"]
    assert set(placement.hosts()) == {"h0-0", "h0-1"}
    assert at.waiting["b"].reason is WaitReason.PREEMPTING
    # the driver stops "g" and queues it again; with its pods gone both start where planned
    g, x = run
    gone = snap.copy()
    gone.release(g.gang, g.placement)
    queue.add("g", g.gang, arrival=-1)  # it arrived first: it is considered first
    after = queue.cycle(CKPT + 5, gone, [x])
    starts = dict(after.starts)
    assert starts == {"g": move.placement, "b": placement}
    work = gone.copy()
    for key, gang in (("g", g.gang), ("b", one_rack_gang())):
        validate(work, gang, starts[key])
        work.apply(gang, starts[key])


def test_pinned_hosts_wait_for_the_moved_pods_then_lapse():
    """While the moved gang's hosts are not free the gang waits for them (an operator's pods
    take time to go); after PIN_PATIENCE_S it is placed like any other."""
    snap, run = split_racks()
    queue = SchedulingQueue(ON)
    queue.add("b", one_rack_gang(), arrival=0)
    queue.cycle(100, snap, run)
    at = queue.cycle(CKPT, snap, run)
    [move] = at.moves
    g, x = run
    blocked = snap.copy()
    blocked.release(g.gang, g.placement)
    blocked.use("h1-1", 8)  # someone else's pod sits on g's new host
    queue.add("g", g.gang, arrival=-1)
    waiting = queue.cycle(CKPT + 1, blocked, [x])
    assert dict(waiting.starts).keys() == {"b"}  # "b" has its room; "g" waits for its hosts
    blocked.apply(one_rack_gang(), dict(waiting.starts)["b"])
    assert waiting.waiting["g"].reason is WaitReason.PREEMPTING
    assert waiting.wake_at == CKPT + 1 + PIN_PATIENCE_S
    lapsed = queue.cycle(CKPT + 1 + PIN_PATIENCE_S, blocked, [x])
    assert lapsed.waiting["g"].reason is WaitReason.UNPLACEABLE  # placed like any other now
    assert move.placement.hosts() == {"h1-1": 1}


def test_a_moved_gang_deleted_before_it_restarts_holds_nothing():
    """The operator's moved job is no queue entry while its pods are remade; when it is
    deleted then, `forget` gives its new hosts back (else they were held for ever)."""
    snap, run = split_racks()
    queue = SchedulingQueue(ON)
    queue.add("b", one_rack_gang(), arrival=0)
    queue.cycle(100, snap, run)
    [move] = queue.cycle(CKPT, snap, run).moves
    g, x = run
    gone = snap.copy()
    gone.release(g.gang, g.placement)
    queue.forget({"b", "x", "c"})  # "g" was deleted
    queue.add("c", GangRequest(name="c", pods=1, gpus_per_pod=8), arrival=1)
    starts = dict(queue.cycle(CKPT + 5, gone, [x]).starts)
    assert set(starts["c"].hosts()) == set(move.placement.hosts()) == {"h1-1"}
    assert set(starts["b"].hosts()) == {"h0-0", "h0-1"}


def test_switched_off_the_gang_waits():
    snap, run = split_racks()
    queue = SchedulingQueue(OFF)
    queue.add("b", one_rack_gang(), arrival=0)
    for now in (100, CKPT):
        d = queue.cycle(now, snap, run)
        assert not d.starts
        assert not d.moves
        assert not d.marked
        assert d.waiting["b"].reason is WaitReason.UNPLACEABLE


def test_gangs_without_checkpoints_are_never_moved():
    snap = Snapshot(fabric(blocks=1, racks=2, hosts=2))
    run = [running(snap, "g", ["h0-0"]), running(snap, "x", ["h1-0"])]
    queue = SchedulingQueue(ON)
    queue.add("b", one_rack_gang(), arrival=0)
    assert not queue.cycle(100, snap, run).marked


def test_a_mark_whose_reason_is_gone_is_dropped():
    snap, run = split_racks()
    queue = SchedulingQueue(ON)
    queue.add("b", one_rack_gang(), arrival=0)
    assert queue.cycle(100, snap, run).marked
    queue.remove("b")
    queue.add("other", GangRequest(name="other", pods=1, gpus_per_pod=8), arrival=1)
    at = queue.cycle(CKPT, snap, run)
    assert not at.moves


def test_moving_cannot_help_when_room_is_short():
    """Two free hosts in all, a 3-host gang: fragmentation is not what stops it."""
    snap, run = split_racks()
    queue = SchedulingQueue(ON)
    queue.add("b", GangRequest(name="b", pods=3, gpus_per_pod=8), arrival=0)
    assert not queue.cycle(100, snap, run).marked


@pytest.mark.parametrize(("budget", "marks"), [(1, 1), (2, 2)])
def test_the_hourly_budget_counts_marks(budget, marks):
    snap = Snapshot(fabric(blocks=1, racks=3, hosts=2))
    run = [
        checkpointing(running(snap, "g1", ["h0-0"])),
        checkpointing(running(snap, "g2", ["h1-0"])),
        running(snap, "x", ["h2-0"]),
    ]
    defrag = Defrag(QueueConfig.of(preemption=Preemption.OFF, defrag_moves_per_hour=budget))
    blocked = [("b1", one_rack_gang("b1")), ("b2", one_rack_gang("b2"))]
    _, _, marked = defrag.cycle(100, snap, run, blocked, frozenset(), {})
    assert len(marked) == marks


def test_a_move_for_its_own_traffic():
    """ "g" was placed when only h0-0 and h1-0 were free, so it spans racks r0 and r1; now rack
    r2 is free: moved there at its checkpoint, its J drops to the inside of one rack (with
    nothing queued). Asked to save all of its J, it is not marked."""
    f = fabric(blocks=1, racks=3, hosts=2)
    gang = GangRequest(name="g", pods=2, gpus_per_pod=8)
    then = Snapshot(f)
    for host in ("h0-1", "h1-1", "h2-0", "h2-1"):
        then.use(host, 8)
    spread = place_one(then, gang, ON.place)
    assert spread.domains["rack"] == 2
    snap = Snapshot(f)
    snap.apply(gang, spread)
    g = Running("g", gang, spread, 0.0, checkpoint_s=CKPT)
    queue = SchedulingQueue(ON)
    first = queue.cycle(100, snap, [g])
    assert first.marked == {"g": CKPT}
    [move] = queue.cycle(CKPT, snap, [g]).moves
    assert move.waiting is None
    assert move.placement.domains["rack"] == 1
    assert move.placement.objective <= 0.7 * spread.objective
    strict = SchedulingQueue(
        QueueConfig.of(preemption=Preemption.OFF, defrag_moves_per_hour=4, defrag_min_gain=1.0)
    )
    assert not strict.cycle(100, snap, [g]).marked


def test_a_move_for_its_own_traffic_needs_no_stored_j():
    """The operator's running gangs carry no J (it builds their placement from their pods): the
    gain is counted from where the gang runs, so the same move is found."""
    f = fabric(blocks=1, racks=3, hosts=2)
    gang = GangRequest(name="g", pods=2, gpus_per_pod=8)
    then = Snapshot(f)
    for host in ("h0-1", "h1-1", "h2-0", "h2-1"):
        then.use(host, 8)
    spread = place_one(then, gang, ON.place).model_copy(update={"objective": 0.0, "cost": 0.0})
    snap = Snapshot(f)
    snap.apply(gang, spread)
    g = Running("g", gang, spread, 0.0, checkpoint_s=CKPT)
    queue = SchedulingQueue(ON)
    assert queue.cycle(100, snap, [g]).marked == {"g": CKPT}
    [move] = queue.cycle(CKPT, snap, [g]).moves
    assert move.placement.domains["rack"] == 1


def _own_plan_solved(work, r, forbidden, config, min_gain):
    """own_plan as it was before its floor: every candidate solved again."""
    view = defrag_module._off(work, r, forbidden)
    index = work.fabric.host_index
    counts = {index[h]: n for h, n in r.placement.hosts("").items() if h in index}
    here = j_value(Capacity.of(view, r.gang), counts, config)
    if here <= 0:
        return None
    again = place_one(view, r.gang, config)
    return again if again.placed and again.objective <= (1 - min_gain) * here else None


@pytest.mark.parametrize("seed", range(80))
def test_a_candidate_is_solved_again_only_where_its_floor_allows_the_same_answer(seed):
    """own_plan skips the solve when J's lower bound (api.j_floor) already costs more than
    (1 - min gain) of the gang's J where it runs: on random gangs scattered over random
    occupancy, with random gains, it answers as solving every candidate does."""
    rng = random.Random(seed)
    f = fabric(blocks=2, racks=3, hosts=3)
    snap = Snapshot(f)
    names = [h.name for h in f.hosts]
    hosts = rng.sample(names, rng.randint(2, 5))
    r = running(snap, "g", hosts)
    busy = rng.choice([0.0, 0.3, 0.6])
    for name in set(names) - set(hosts):
        if rng.random() < busy:
            snap.use(name, rng.randint(1, 8))
    gain = rng.uniform(0.01, 1.0)
    forbidden = frozenset(rng.sample(range(len(names)), rng.randint(0, 3)))
    got = own_plan(snap, r, forbidden, ON.place, gain)
    want = _own_plan_solved(snap, r, forbidden, ON.place, gain)
    assert (got is None) == (want is None)
    if got is not None:
        assert got.hosts() == want.hosts()
        view = defrag_module._off(snap, r, forbidden)
        assert got.objective >= j_floor(Capacity.of(view, r.gang)) - 1e-9


def test_a_gang_no_placement_could_improve_enough_is_not_solved_again(monkeypatch):
    """Two hosts of one rack: no placement crosses less. Asked for a 30% gain, own_plan
    answers from the floor without a solve (fails when every candidate is solved)."""
    f = fabric(blocks=1, racks=2, hosts=2)
    snap = Snapshot(f)
    r = running(snap, "g", ["h0-0", "h0-1"])
    calls = []
    monkeypatch.setattr(defrag_module, "place_one", lambda *a: calls.append(a))
    assert own_plan(snap, r, frozenset(), ON.place, 0.3) is None
    assert calls == []
