"""Tenancy held against tenants, in the queue: who may use a queue, a running gang charged to the
queue that admitted it whatever becomes of the Queues, a held queue, and priority that reorders
a team's own gangs only (teams/ranks.py). The fabric: one spine, four racks of two 8-GPU hosts,
64 GPUs, all training."""

from __future__ import annotations

import dataclasses
import random

import pytest

from scheduler.model.policy import Backfill, Preemption
from scheduler.queue import QueueConfig, SchedulingQueue, WaitReason
from scheduler.queue.teams.ranks import natural, place
from scheduler.queue.types import Entry
from scheduler.teams import QueueSpec, StopPolicy, Teams
from tests.unit.queue.helpers import gang, running
from tests.unit.queue.test_teams import queue_spec, snap

OFF = Preemption.OFF


def tenants(*queues: QueueSpec, backfill: Backfill = Backfill.EASY) -> SchedulingQueue:
    base = QueueConfig.of(preemption=OFF, backfill=backfill, max_attempts=64)
    return SchedulingQueue(dataclasses.replace(base, teams=Teams(queues=queues)))


def add(q: SchedulingQueue, key: str, pods: int, tenant: str, at: float, priority: int = 0):
    g = gang(key, pods).model_copy(update={"priority": priority})
    q.add(key, g, arrival=at, tenant=tenant)


def three() -> tuple[QueueSpec, ...]:
    return tuple(queue_spec(n, 64, cohort=None) for n in ("a", "b", "c"))


def test_a_later_gang_of_another_team_does_not_pass_by_priority():
    """c's whole-fabric gang came first; b's, later, claims a priority of 10^9: c starts."""
    q = tenants(*three())
    add(q, "c-first", 8, "c", at=0.0)
    add(q, "b-urgent", 8, "b", at=1.0, priority=1_000_000_000)
    out = q.cycle(2.0, snap(), [])
    assert [k for k, _ in out.starts] == ["c-first"]


def test_priority_reorders_a_teams_own_gangs_in_the_places_its_arrivals_earned():
    """b's places in line are its arrivals (0.5 and 1.0): its urgent gang takes the first,
    ahead of c's (0.7); its own earlier gang takes the second."""
    q = tenants(*three())
    add(q, "b-routine", 8, "b", at=0.5)
    add(q, "c-mid", 8, "c", at=0.7)
    add(q, "b-urgent", 8, "b", at=1.0, priority=100)
    out = q.cycle(2.0, snap(), [])
    assert [k for k, _ in out.starts] == ["b-urgent"]
    assert {"b-routine", "c-mid"} <= set(out.waiting)


def test_the_easy_reservation_goes_to_the_earlier_team_not_the_higher_priority():
    """32 GPUs run until t=100; both waiting gangs need all 64: the first blocked in line, c's,
    holds the reservation, not b's urgent one that came after it."""
    s = snap()
    busy = running(s, "busy", ["h0-0", "h0-1", "h1-0", "h1-1"], tenant="a", end=100.0)
    q = tenants(*three())
    add(q, "c-first", 8, "c", at=0.0)
    add(q, "b-urgent", 8, "b", at=1.0, priority=1_000_000_000)
    out = q.cycle(2.0, s, [busy])
    assert [r.key for r in out.reservations.values()] == ["c-first"]


def test_without_teams_priority_orders_everyone_again():
    q = tenants(*three())
    add(q, "c-first", 8, "c", at=0.0)
    add(q, "b-urgent", 8, "b", at=1.0, priority=1_000_000_000)
    q.use_teams(Teams())
    out = q.cycle(2.0, snap(), [])
    assert [k for k, _ in out.starts] == ["b-urgent"]


def test_a_label_naming_another_teams_queue_gets_no_quota_and_says_why():
    q = tenants(queue_spec("research", 16, cohort=None), queue_spec("product", 16, cohort=None))
    q.add("escape", gang("escape", 1), arrival=0.0, tenant="product", queue="research")
    out = q.cycle(1.0, snap(), [])
    wait = out.waiting["escape"]
    assert wait.reason is WaitReason.QUOTA_EXCEEDED
    assert "queue research does not admit namespace 'product' (it admits research)" in (
        wait.message
    )


def test_a_namespace_named_like_a_queue_is_not_that_queues():
    research = queue_spec("research", 16, cohort=None).model_copy(
        update={"namespaces": ("team-a",)}
    )
    q = tenants(research)
    add(q, "lookalike", 1, "research", at=0.0)
    out = q.cycle(1.0, snap(), [])
    assert out.waiting["lookalike"].reason is WaitReason.QUOTA_EXCEEDED
    assert "no queue lists namespace 'research'" in out.waiting["lookalike"].message


def test_a_running_gang_stays_charged_to_the_queue_that_admitted_it():
    """The gang's namespace is no longer listed by research (an edit moved it), yet research
    counts it until it ends, and no other queue does."""
    s = snap()
    research = queue_spec("research", 16, cohort=None).model_copy(update={"namespaces": ()})
    q = tenants(research, queue_spec("team-a", 64, cohort=None))
    kept = dataclasses.replace(
        running(s, "r", ["h0-0", "h0-1"], tenant="team-a"), admitted="research"
    )
    q.cycle(0.0, s, [kept])
    numbers = q.team_numbers()
    assert numbers["research"].used["training"][0] == 16
    assert "team-a" not in numbers or not numbers["team-a"].used


def test_a_held_queue_admits_nothing_new_and_keeps_what_it_admitted():
    s = snap()
    held = queue_spec("a", 64, cohort=None).model_copy(update={"stop_policy": StopPolicy.HOLD})
    q = tenants(held)
    old = dataclasses.replace(running(s, "old", ["h0-0"], tenant="a"), admitted="a")
    add(q, "new", 1, "a", at=0.0)
    out = q.cycle(1.0, s, [old])
    assert out.starts == []
    assert out.waiting["new"].reason is WaitReason.QUOTA_EXCEEDED
    assert "queue a holds" in out.waiting["new"].message
    assert q.team_numbers()["a"].used["training"][0] == 8


def test_each_start_records_the_queue_that_admitted_it():
    q = tenants(queue_spec("research", 16, cohort=None).model_copy(update={"namespaces": ("x",)}))
    add(q, "j", 1, "x", at=0.0)
    out = q.cycle(1.0, snap(), [])
    assert out.admitted == {"j": "research"}


def test_the_ranks_stay_a_dealing_of_each_teams_places_through_seeded_comings_and_goings():
    """After every add and removal (and a change of teams midway): each pool's order lists
    every queued gang once, sorted; within a team, gangs in priority order hold its arrivals
    in time order; a team of one priority keeps each gang on its own place."""
    rng = random.Random(7)
    q = tenants(*three())
    queued: list[str] = []
    for step in range(300):
        if queued and rng.random() < 0.4:
            q.remove(queued.pop(rng.randrange(len(queued))))
        else:
            key = f"g{step}"
            team = rng.choice("abc")
            add(
                q, key, 1, team, at=rng.choice([0.0, 1.0, float(step)]), priority=rng.choice([0, 5])
            )
            queued.append(key)
        if step == 150:
            q.use_teams(Teams(queues=three()[:2]))  # c's gangs now belong to no queue
        check_ranks(q)


def check_ranks(q: SchedulingQueue) -> None:
    entries, orders = q._entries, q._orders  # the invariant is internal
    listed = [k for order in orders.values() for k in order.keys]
    assert sorted(listed) == sorted(entries)
    for order in orders.values():
        assert order.orders == sorted(order.orders)
        assert order.orders == [entries[k].order for k in order.keys]
    groups: dict[str | None, list[Entry]] = {}
    for e in entries.values():
        groups.setdefault(q.team_of(e.key), []).append(e)
    for members in groups.values():
        by_rank = sorted(members, key=natural)
        assert [e.order for e in by_rank] == sorted(place(e) for e in members)


@pytest.mark.parametrize(
    ("queues", "pods", "said"),
    [
        # 17x8 GPUs on a 64-GPU fabric, beyond its quota too: the fabric's proof, not a wait
        ((queue_spec("a", 32), queue_spec("b", 32)), 17, "needs 17 pods x 8 GPUs"),
        # 5x8 fits the fabric, but a's 16 and all its cohort lends (b's 16) make 32 at most
        (
            (queue_spec("a", 16), queue_spec("b", 16)),
            5,
            "queue a can never hold more than 32 GPUs of pool training",
        ),
        # a's 16 and its borrowing limit of 8 make 24, though b lends 48
        (
            (queue_spec("a", 16, borrow=8), queue_spec("b", 48)),
            4,
            "can never hold more than 24 GPUs",
        ),
    ],
)
def test_a_gang_no_fabric_or_quota_could_ever_hold_never_fits(queues, pods, said):
    q = tenants(*queues)
    add(q, "big", pods, "a", at=0.0)
    wait = q.cycle(1.0, snap(), []).waiting["big"]
    assert wait.reason is WaitReason.NEVER_FITS
    assert said in wait.message


def test_a_gang_that_never_borrows_never_waits_to_borrow():
    """b borrows all a lends; a's pod group over a's nominal is told QuotaExceeded (it would
    never borrow), where a TrainingJob of its size waits to borrow."""
    s = snap()
    q = tenants(queue_spec("a", 16), queue_spec("b", 16))
    hosts = ["h0-0", "h0-1", "h1-0", "h1-1"]
    borrowing = running(s, "b-all", hosts, tenant="b")
    mine = running(s, "a-own", ["h2-0", "h2-1"], tenant="a")
    q.add("group", gang("group", 1), arrival=0.0, tenant="a", evictable=False)
    q.add("job", gang("job", 1), arrival=1.0, tenant="a")
    out = q.cycle(2.0, s, [borrowing, mine])
    assert out.waiting["group"].reason is WaitReason.QUOTA_EXCEEDED
    assert out.waiting["job"].reason is WaitReason.WAITING_TO_BORROW
