"""Each pool's recent arrivals (queue/arrivals.py): the rate and the offered load over the last
day (or since the first arrival), stamped by the cycle that first sees a gang, those older let
go, a gang queued again not counted again."""

from __future__ import annotations

import pytest

from scheduler.model import GangRequest
from scheduler.placement import Snapshot
from scheduler.queue import QueueConfig, SchedulingQueue
from scheduler.queue.arrivals import WINDOW_S, Arrivals
from scheduler.queue.types import Entry
from scheduler.topology import Fabric, generate

HOUR = 3600.0


def test_the_rate_and_load_are_the_windows_arrivals_over_its_time():
    a = Arrivals()
    for i in range(4):  # 8 GPUs for an hour each, one an hour from t = 0
        a.record("training", f"g{i}", i * HOUR, 8 * HOUR)
    assert a.rate("training", 4 * HOUR) == pytest.approx(4 / (4 * HOUR))
    assert a.load("training", 4 * HOUR, gpus=16) == pytest.approx(4 * 8 / (4 * 16))
    # both fall while nothing arrives instead of keeping their last value
    assert a.rate("training", 8 * HOUR) == pytest.approx(4 / (8 * HOUR))


def test_nothing_from_no_arrival_another_pool_or_no_time():
    a = Arrivals()
    assert a.rate("training", 10.0) == 0.0
    a.record("training", "g", 0.0, 100.0)
    assert a.rate("training", 0.0) == 0.0
    assert a.load("training", 0.0, gpus=8) == 0.0
    assert a.rate("inference", 10.0) == 0.0
    assert a.load("training", 10.0, gpus=0) == 0.0


def test_sizes_count_the_windows_arrivals_by_their_gpus():
    """What asks for whole domains (placement/fragments.py): gangs by GPUs, those older than
    the window let go with their size, a gang queued again not counted again."""
    a = Arrivals()
    a.record("training", "old", 0.0, 1.0, gpus=64)
    a.record("training", "a", 2 * HOUR, 1.0, gpus=8)
    a.record("training", "b", 3 * HOUR, 1.0, gpus=8)
    a.record("training", "a", 4 * HOUR, 1.0, gpus=8)
    assert dict(a.sizes("training", 4 * HOUR)[0]) == {64: 1, 8: 2}
    assert a.sizes("training", 4 * HOUR)[1] == 4 * HOUR
    assert dict(a.sizes("training", WINDOW_S + HOUR)[0]) == {8: 2}
    assert a.sizes("inference", HOUR) == ((), 0.0)


def test_arrivals_older_than_the_window_are_let_go():
    a = Arrivals()
    a.record("training", "old", 0.0, 1e9)  # a huge job long ago
    for i in range(24):
        a.record("training", f"g{i}", 2 * WINDOW_S + i * HOUR, HOUR)
    now = 3 * WINDOW_S - 1  # the window holds the 24, not the one long ago
    assert a.rate("training", now) == pytest.approx(24 / WINDOW_S)
    assert a.load("training", now, gpus=1) == pytest.approx(24 * HOUR / WINDOW_S)
    a.record("training", "old", now, 1.0)  # let go with its arrival: a new one now
    assert a.rate("training", now) == pytest.approx(25 / WINDOW_S)


def test_a_gang_queued_again_is_not_counted_again():
    a = Arrivals()
    for i, t in enumerate((0.0, 10.0, 20.0)):
        a.record("training", f"g{i}", t, 1.0)
    a.record("training", "g1", 20.0, 1.0)  # evicted and queued again, or edited
    assert a.rate("training", 20.0) == pytest.approx(3 / 20)
    assert a.load("training", 20.0, gpus=1) == pytest.approx(3 / 20)
    a.record("training", "g3", 20.0, 1.0)  # two gangs in the same second both count
    assert a.rate("training", 20.0) == pytest.approx(4 / 20)


def test_the_queue_stamps_a_gang_by_the_cycle_that_first_sees_it():
    """Its own arrival orders the queue (the simulator numbers jobs 0, 1, 2, ...); the rate is
    read on the cycle's clock."""
    q = SchedulingQueue(QueueConfig.of(policy="rackwise"))
    seen = q._gang.arrivals  # the queue's own, read here
    for i in range(3):
        gang = GangRequest(name=f"g{i}", pods=1, gpus_per_pod=8)
        q.add(f"g{i}", gang, arrival=float(i), estimate_s=HOUR)
        q.cycle(i * HOUR, _empty(), [])
    assert seen.rate("training", 3 * HOUR) == pytest.approx(3 / (3 * HOUR))
    assert seen.load("training", 3 * HOUR, gpus=8) == pytest.approx(3 * 8 * HOUR / (3 * HOUR * 8))


def test_seen_counts_each_entry_by_its_pool_and_work():
    a = Arrivals()
    gang = GangRequest(name="g", pods=2, gpus_per_pod=4, pool="inference")
    a.seen(100.0, [Entry("g", gang, 0.0, estimate_s=HOUR), Entry("h", gang, 1.0)])
    assert a.rate("inference", 200.0) == pytest.approx(2 / 100)
    assert a.load("inference", 200.0, gpus=8) == pytest.approx(8 * HOUR / 100 / 8)


def _empty() -> Snapshot:
    return Snapshot(Fabric(generate(blocks=1, racks=1, hosts=2, gpus=8)))
