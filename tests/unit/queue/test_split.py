"""Wait or split (queue/split.py): a gang whose expert-parallel block no placement keeps now
waits for one that does when the wait costs less than the split, and starts split when the
wait would cost more, by the numbers in its reason; peers keep their fixed readings."""

from __future__ import annotations

import math
import re

import pytest

from scheduler.model import GangRequest, ParallelShape
from scheduler.model.training import Model
from scheduler.placement import Snapshot, stretch
from scheduler.queue import Backfill, Preemption, QueueConfig, SchedulingQueue, WaitReason, split
from scheduler.queue.split import Behind, borne, pool_gpus, span
from scheduler.topology import Fabric, generate
from tests.unit.queue.helpers import running

# two racks, each one NVLink domain of 4 trays of 4 GPUs (a small NVL72)
NVL = Fabric(generate(blocks=1, racks=2, hosts=4, gpus=4, nvlink=4))
MOE = Model(params_b=16, active_params_b=3, hidden=4096, layers=16, seq=4096, micro_batches=8,
            moe_share=1.0, topk=8)  # fmt: skip
# 16 GPUs, EP blocks of 8 (two trays each)
GANG = GangRequest(name="moe", pods=4, gpus_per_pod=4, shape=ParallelShape(dp=16, ep=8), model=MOE)
HOURS = 3600.0
RUN = 6 * HOURS


def queue(policy: str = "rackwise", backfill: Backfill = Backfill.EASY) -> SchedulingQueue:
    return SchedulingQueue(
        QueueConfig.of(policy=policy, preemption=Preemption.OFF, backfill=backfill)
    )


def tight(ends_in: float) -> tuple[Snapshot, list]:
    """One tray taken in the first domain (for good), three in the second until `ends_in`:
    now only 3 + 1 trays are free, which splits a block; once the three end, a domain is free."""
    snap = Snapshot(NVL)
    rest = running(snap, "rest", ["h0-0"], gpus=4)
    short = running(snap, "short", ["h1-0", "h1-1", "h1-2"], gpus=4, end=ends_in)
    return snap, [rest, short]


def test_it_waits_when_the_split_costs_more_than_the_wait():
    snap, gangs = tight(ends_in=600)
    q = queue()
    q.add("moe", GANG, arrival=0, estimate_s=RUN)
    decisions = q.cycle(0.0, snap, gangs)
    assert not decisions.starts
    wait = decisions.waiting["moe"]
    assert wait.reason is WaitReason.PRICED
    assert decisions.reservations["training"].at == 600
    # the reason's numbers: ~10 min of wait against a 1.84x stretch over 6 h
    assert "waits ~10 min" in wait.message
    factor = float(re.search(r"stretch it ([0-9.]+)x", wait.message).group(1))
    assert factor > 1.5
    assert "over 6.0 h" in wait.message


def test_a_wait_for_gangs_past_their_estimated_ends_says_so_not_a_negative_time():
    snap, gangs = tight(ends_in=-30)  # the three have overrun their estimates by 30 s
    q = queue()
    q.add("moe", GANG, arrival=0, estimate_s=RUN)
    wait = q.cycle(0.0, snap, gangs).waiting["moe"]
    assert wait.reason is WaitReason.PRICED
    assert "~-" not in wait.message
    assert "past their ends" in wait.message


def test_a_kept_placement_no_faster_than_the_split_is_not_waited_for(monkeypatch):
    """The gangs it would wait for are past their ends (a wait below zero), but keeping the
    block would run no faster (both priced 1.2x here): nothing is lost by splitting, so it
    starts now instead of waiting for nothing."""
    monkeypatch.setattr(split.stretch, "lone", lambda *_: 1.2)
    snap, gangs = tight(ends_in=-30)
    q = queue()
    q.add("moe", GANG, arrival=0, estimate_s=RUN)
    assert q.cycle(0.0, snap, gangs).starts


def test_it_starts_split_when_the_wait_costs_more():
    snap, gangs = tight(ends_in=20 * HOURS)
    q = queue()
    q.add("moe", GANG, arrival=0, estimate_s=RUN)
    [(key, placement)] = q.cycle(0.0, snap, gangs).starts
    assert key == "moe"
    assert placement.unkept
    assert stretch.lone(NVL, GANG, placement) > 1.5


def test_the_break_even_is_the_stretch_times_the_run():
    """Just under the split's cost the gang waits, just over it starts split."""
    q = queue()
    q.add("probe", GANG, arrival=0, estimate_s=RUN)
    [(_, split)] = q.cycle(0.0, _split_only(), []).starts  # nothing to wait for: it splits
    cost = (stretch.lone(NVL, GANG, split) - 1.0) * RUN  # kept: one whole domain, compact
    for ends_in, starts in ((cost * 0.98, False), (cost * 1.02, True)):
        snap, gangs = tight(ends_in)
        q = queue()
        q.add("moe", GANG, arrival=0, estimate_s=RUN)
        assert bool(q.cycle(0.0, snap, gangs).starts) is starts


def test_the_gangs_waiting_behind_it_make_a_split_dearer():
    """Alone in the queue it splits when the wait is 1.5x its own delay; with three gangs
    waiting behind it, each of which the split's extra GPU-time would hold back, it waits."""
    q = queue()
    q.add("probe", GANG, arrival=0, estimate_s=RUN)
    [(_, split)] = q.cycle(0.0, _split_only(), []).starts
    own = (stretch.lone(NVL, GANG, split) - 1.0) * RUN
    for behind, starts in ((0, True), (3, False)):
        snap, gangs = tight(ends_in=own * 1.5)
        q = queue()
        q.add("moe", GANG, arrival=0, estimate_s=RUN)
        for i in range(behind):  # the whole fabric each: none can start now
            big = GangRequest(name=f"big{i}", pods=8, gpus_per_pod=4)
            q.add(f"big{i}", big, arrival=1 + i, estimate_s=RUN)
        assert bool(q.cycle(0.0, snap, gangs).starts) is starts


def _own_delay() -> float:
    """What splitting costs the gang itself, nothing else waiting or arriving."""
    q = queue()
    q.add("probe", GANG, arrival=0, estimate_s=RUN)
    [(_, split)] = q.cycle(0.0, _split_only(), []).starts
    return (stretch.lone(NVL, GANG, split) - 1.0) * RUN


def _arrived(q: SchedulingQueue, count: int, every: float, pods: int, hours: float) -> None:
    """`count` gangs arrived one every `every` seconds up to now, each seen by a cycle then
    and started since."""
    for i in range(count):
        at = -(count - i) * every
        gang = GangRequest(name=f"s{i}", pods=pods, gpus_per_pod=4)
        q.add(f"s{i}", gang, arrival=at, estimate_s=hours * HOURS)
        q.cycle(at, Snapshot(NVL), [])
        q.remove(f"s{i}")


def test_the_gangs_arriving_while_it_would_run_make_a_split_dearer():
    """Alone in the queue it splits when the wait is 1.5x its own delay; when gangs have been
    arriving in its pool, one an hour, those due while its ~11 h stretched run lasts would each
    be held back by the split's extra GPU-time, and it waits, saying how many."""
    own = _own_delay()
    for recent, starts in ((0, True), (10, False)):
        snap, gangs = tight(ends_in=own * 1.5)
        q = queue()
        _arrived(q, recent, HOURS, pods=1, hours=0.1)
        q.add("moe", GANG, arrival=0, estimate_s=RUN)
        decisions = q.cycle(0.0, snap, gangs)
        assert bool(decisions.starts) is starts
        if not starts:  # 11 arrivals in 10 h over half its ~11 h run: ~6
            message = decisions.waiting["moe"].message
            reached = re.search(r"~([0-9]+) arriving while it runs", message)
            assert 4 <= int(reached.group(1)) <= 8


def test_under_a_recent_load_above_its_pool_it_waits_however_long():
    """Gangs asking for twice the pool's GPUs have arrived over the last day: the queue would
    never drain, every gang arriving would bear a split's extra time, and it waits for a
    placement that keeps its block even 50x its own delay away."""
    own = _own_delay()
    for recent, starts in ((0, True), (24, False)):
        snap, gangs = tight(ends_in=own * 50)
        q = queue()
        _arrived(q, recent, HOURS, pods=8, hours=2)  # the whole pool for 2 h, every hour
        q.add("moe", GANG, arrival=0, estimate_s=RUN)
        decisions = q.cycle(0.0, snap, gangs)
        assert bool(decisions.starts) is starts
        if not starts:
            assert "recent load exceeds its GPUs" in decisions.waiting["moe"].message


def test_the_work_queued_behind_it_counts_the_arrivals_until_it_drains():
    """One gang, queued 30 h ago, waits behind it (ranked lower): with a wait of 1.7x its own
    delay it splits while that gang asks for an hour of the whole pool, and waits when it asks
    for 1,000 h, whose drain the day's arrivals (itself, at ~1 a day) would queue behind too."""
    own = _own_delay()
    for hours, starts in ((1, True), (1000, False)):
        snap, gangs = tight(ends_in=own * 1.7)
        q = queue()
        big = GangRequest(name="big", pods=8, gpus_per_pod=4)  # the whole fabric
        q.add("big", big, arrival=-30 * HOURS, estimate_s=hours * HOURS)
        q.cycle(-30 * HOURS, snap, gangs)  # seen then, and waiting since
        q.add("moe", GANG.model_copy(update={"priority": 1}), arrival=-1, estimate_s=RUN)
        assert bool(q.cycle(0.0, snap, gangs).starts) is starts


def test_the_gangs_a_split_reaches():
    """Those waiting; those arriving while it runs, at half weight; those arriving after it
    until the queued work has drained, at the pool's full rate slowed by the load arriving
    meanwhile (1 / (1 - load)); every one of them when the recent load is 1 or more."""
    hour, gpus = 3600.0, 32
    assert Behind(2, 0.0, 0.0, 0.0, gpus).reached(hour) == 2
    assert Behind(0, 0.0, 1 / 600, 0.0, gpus).reached(hour) == pytest.approx(3)  # 6 an hour / 2
    # 4 h of the pool's work queued: 3 h of it drains after the run, 18 more arrivals
    queued = 4 * hour * gpus
    assert Behind(2, queued, 1 / 600, 0.0, gpus).reached(hour) == pytest.approx(2 + 3 + 18)
    # at half load it drains in 8 h: 7 h after the run, 42 more
    assert Behind(2, queued, 1 / 600, 0.5, gpus).reached(hour) == pytest.approx(2 + 3 + 42)
    assert math.isinf(Behind(0, 0.0, 1 / 600, 1.0, gpus).reached(hour))
    assert Behind(2, queued, 0.0, 1.0, gpus).reached(hour) == 2  # no arrivals: none reached


def _split_only() -> Snapshot:
    """The same free trays, with nothing running that will end: the split is all there is."""
    snap = Snapshot(NVL)
    for h in ("h0-0", "h1-0", "h1-1", "h1-2"):
        snap.use(h, 4)
    return snap


def test_the_wait_is_kept_while_nothing_changes_and_ends_with_its_reservation():
    snap, gangs = tight(ends_in=600)
    q = queue()
    q.add("moe", GANG, arrival=0, estimate_s=RUN)
    first = q.cycle(0.0, snap, gangs)
    again = q.cycle(60.0, snap, gangs)  # the same view: the same wait and reservation
    assert again.waiting["moe"] == first.waiting["moe"]
    assert again.reservations["training"].at == 600
    assert again.wake_at <= 600


@pytest.mark.parametrize("policy", ["kai-bin-pack", "first-fit"])
def test_peers_keep_their_reading(policy):
    """KAI's preferred segment splits however costly; a peer with no field never waits."""
    snap, gangs = tight(ends_in=600)
    q = queue(policy)
    q.add("moe", GANG, arrival=0, estimate_s=RUN)
    assert q.cycle(0.0, snap, gangs).starts


def test_a_gang_that_states_no_model_or_run_time_is_not_priced():
    for gang, estimate in ((GANG.model_copy(update={"model": None}), RUN), (GANG, None)):
        snap, gangs = tight(ends_in=600)
        q = queue()
        q.add("moe", gang, arrival=0, estimate_s=estimate)
        assert q.cycle(0.0, snap, gangs).starts


def test_under_strict_order_a_priced_wait_blocks_the_gangs_behind():
    snap, gangs = tight(ends_in=600)
    q = queue(backfill=Backfill.NONE)
    q.add("moe", GANG, arrival=0, estimate_s=RUN)
    q.add("small", GangRequest(name="small", pods=1, gpus_per_pod=4), arrival=1, estimate_s=60)
    decisions = q.cycle(0.0, snap, gangs)
    assert not decisions.starts
    assert decisions.waiting["small"].reason is WaitReason.BEHIND


def test_a_split_costs_the_gangs_waiting_behind_it_too():
    """Its extra GPU-time pushes back each waiting gang by that over the pool's GPUs."""
    gpus = pool_gpus(NVL, GANG.pool)
    assert borne(gpus, GANG, 0) == 1.0
    assert borne(gpus, GANG, 4) == pytest.approx(1 + 4 * 16 / 32)


def test_durations_read_as_a_person_reads_them():
    assert span(30) == "30 s"
    assert span(600) == "10 min"
    assert span(6 * HOURS) == "6.0 h"
