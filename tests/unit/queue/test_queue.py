"""The scheduling queue's rules, one test each; each fails when its rule is taken out."""

from __future__ import annotations

import math

import pytest

from scheduler.model.constraints import Taint, TaintEffect
from scheduler.model.gang import GangRequest, Role, Slice
from scheduler.model.placement import WholeDemand
from scheduler.model.topology import HostSpec, TopologySpec
from scheduler.placement import Snapshot, fragments
from scheduler.queue import Backfill, Preemption, QueueConfig, SchedulingQueue, WaitReason
from scheduler.simulation.profiles import FabricProfile, ProfileName
from scheduler.topology import Fabric
from tests.conftest import place_raises_for
from tests.unit.queue.helpers import fabric, gang, running

OFF = QueueConfig.of(preemption=Preemption.OFF)


def test_priority_then_arrival():
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=1))  # one host: one gang at a time
    queue = SchedulingQueue(OFF)
    # keys sort the other way round, so only arrival can put "b-early" first
    queue.add("b-early", gang("b-early", 1), arrival=0)
    queue.add("urgent", gang("urgent", 1, priority=5), arrival=10)
    queue.add("a-late", gang("a-late", 1), arrival=5)
    [(first, _)] = queue.cycle(0, snap, []).starts
    assert first == "urgent"
    queue.remove("urgent")
    [(second, _)] = queue.cycle(1, snap, []).starts
    assert second == "b-early"


def test_all_starts_of_a_cycle_fit_together():
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=2))
    queue = SchedulingQueue(OFF)
    for i in range(3):
        queue.add(f"g{i}", gang(f"g{i}", 1), arrival=i)
    decisions = queue.cycle(0, snap, [])
    assert [k for k, _ in decisions.starts] == ["g0", "g1"]
    assert decisions.waiting["g2"].reason is WaitReason.UNPLACEABLE
    hosts = [p.hosts() for _, p in decisions.starts]
    assert hosts[0].keys().isdisjoint(hosts[1].keys())


def test_patience_counts_from_the_first_placeable_cycle():
    f = fabric(blocks=2, racks=1, hosts=2)
    snap = Snapshot(f)
    snap.use("h0-1", 8)
    snap.use("h1-1", 8)  # two free hosts, one per spine: the gang must span spines
    config = QueueConfig.of(compact_wait_s=60, preemption=Preemption.OFF)
    queue = SchedulingQueue(config)
    queue.add("g", gang("g", 2), arrival=0)
    first = queue.cycle(10, snap, [])
    assert first.waiting["g"].reason is WaitReason.COMPACT
    assert first.wake_at == 70
    assert not queue.cycle(69, snap, []).starts
    [(_key, placement)] = queue.cycle(70, snap, []).starts
    assert placement.domains["spine"] == 2


@pytest.mark.parametrize(
    ("backfill", "small_starts"),
    [(Backfill.NONE, False), (Backfill.GREEDY, True), (Backfill.EASY, False)],
)
def test_backfill_rules(backfill, small_starts):
    """A runs on one of two hosts until t=100; big needs both; small (no estimate) fits now."""
    f = fabric(blocks=1, racks=1, hosts=2)
    snap = Snapshot(f)
    a = running(snap, "a", ["h0-0"], end=100)
    queue = SchedulingQueue(QueueConfig.of(backfill=backfill, preemption=Preemption.OFF))
    queue.add("big", gang("big", 2), arrival=0)
    queue.add("small", gang("small", 1), arrival=1)
    decisions = queue.cycle(0, snap, [a])
    assert bool(decisions.starts) is small_starts
    if backfill is Backfill.EASY:
        assert decisions.reservations["training"].hosts == {0, 1}
        assert decisions.reservations["training"].at == 100


def test_easy_lets_a_gang_in_when_it_ends_before_the_reservation():
    """big holds all three hosts from t=100; two are free now, for gangs that end by then."""
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=3))
    a = running(snap, "a", ["h0-0"], end=100)
    queue = SchedulingQueue(OFF)
    queue.add("big", gang("big", 3), arrival=0)
    queue.add("short", gang("short", 1), arrival=1, estimate_s=100)
    queue.add("long", gang("long", 1), arrival=2, estimate_s=101)
    decisions = queue.cycle(0, snap, [a])
    assert [k for k, _ in decisions.starts] == ["short"]


def test_a_reservation_made_later_is_made_on_what_its_gang_saw():
    """A reservation is made when first asked for (`Pool.reservation`), but on the capacity
    its gang saw when it blocked: a start later in the walk must not change it. big (2 hosts)
    waits for b (ends at 50); x then takes h0-1, which is not released before big's time."""
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=2))
    b = running(snap, "b", ["h0-0"], end=50)
    queue = SchedulingQueue(OFF)
    queue.add("big", gang("big", 2), arrival=0)
    c = queue._new_cycle(0, snap, [b])
    big = queue._entries["big"]
    later = queue._gang._reserving(c, big, queue._views.view(c, big))
    running(c.work, "x", ["h0-1"])  # a start after the block, applied to the cycle's work
    made = later()
    assert made is not None
    assert (made.at, made.hosts) == (50, {0, 1})


def test_a_reservation_takes_its_views_digest_only_when_the_rest_is_unchanged(monkeypatch):
    """What a reservation was made on is checked cheap parts first (the pool's running gangs,
    the cycle's starts): when they changed, the view's digest is not taken; when they match,
    it is, and the reservation is kept only when the digests match too."""
    import scheduler.queue.consider as consider

    made = []
    monkeypatch.setattr(consider, "reserve", lambda *_: made.append(1) or "reservation")
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=2))
    b = running(snap, "b", ["h0-0"], end=50)
    queue = SchedulingQueue(OFF)
    queue.add("big", gang("big", 2), arrival=0)
    big = queue._entries["big"]

    def ask(running_now):  # type: ignore[no-untyped-def]
        c = queue._new_cycle(0, snap, running_now)
        v = queue._views.view(c, big)
        return queue._gang._reserving(c, big, v)(), v

    _, first = ask([b])
    assert len(made) == 1  # nothing kept to compare with
    assert first.fingerprint is None
    b2 = running(Snapshot(snap.fabric), "b2", ["h0-1"], end=60)
    _, changed = ask([b, b2])  # another gang runs in the pool: made again, no digest
    assert len(made) == 2
    assert changed.fingerprint is None
    _, same = ask([b, b2])  # the same gangs: the digest is taken, but none was kept to match
    assert len(made) == 3
    assert same.fingerprint is not None
    kept, again = ask([b, b2])
    assert (kept, len(made)) == ("reservation", 3)  # all three match: kept
    assert again.fingerprint == same.fingerprint


def test_easy_backfills_outside_the_reservation():
    """big needs one rack: it reserves rack 0 (a ends first); other gangs use rack 1."""
    snap = Snapshot(fabric(blocks=1, racks=2, hosts=2))
    a = running(snap, "a", ["h0-0"], end=100)
    b = running(snap, "b", ["h1-0"], end=math.inf)
    queue = SchedulingQueue(OFF)
    queue.add("big", gang("big", 2).model_copy(update={"required_level": "rack"}), arrival=0)
    queue.add("x", gang("x", 1), arrival=1)
    queue.add("y", gang("y", 1), arrival=2)
    decisions = queue.cycle(0, snap, [a, b])
    assert decisions.reservations["training"].hosts == {0, 1}
    [(_key, placement)] = decisions.starts
    assert placement.hosts() == {"h1-1": 1}
    assert decisions.waiting["y"].reason is WaitReason.RESERVED
    assert decisions.waiting["y"].message.startswith("hosts are held for big")


def test_an_unchanged_view_is_not_solved_again():
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=1))
    held = running(snap, "held", ["h0-0"])
    queue = SchedulingQueue(OFF)
    queue.add("g", gang("g", 1), arrival=0)
    assert len(queue.cycle(0, snap, [held]).tried) == 1
    again = queue.cycle(1, snap, [held])
    assert not again.tried
    assert again.waiting["g"].reason is WaitReason.UNPLACEABLE
    snap.release(held.gang, held.placement)
    assert queue.cycle(2, snap, []).starts


def paired(name: str, gpus: int) -> GangRequest:
    """Two pods that must share a host: counting pods one by one proves nothing of it, so
    only a try tells it cannot start (queue/counts.py)."""
    return gang(name, 2, gpus=gpus).model_copy(update={"slices": (Slice(level="host", size=2),)})


def test_attempts_per_pool_are_bounded():
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=2))  # two hosts: 2 pods of 5+ GPUs fit
    queue = SchedulingQueue(QueueConfig.of(max_attempts=3, preemption=Preemption.OFF))
    for i in range(4):  # each its own shape: none tells about another
        queue.add(f"g{i}", paired(f"g{i}", 5 + i), arrival=i)
    assert len(queue.cycle(0, snap, []).tried) == 3


@pytest.mark.parametrize("report", [True, False])
def test_a_failure_counting_proves_uses_no_try(report):
    """Six gangs whose pods do not fit by count (3 pods of 3+ GPUs on one free host of 8), each
    its own shape, take none of the pool's 3 tries: the small gang behind them starts."""
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=2))
    held = running(snap, "held", ["h0-0"])
    config = QueueConfig.of(
        max_attempts=3, preemption=Preemption.OFF, backfill=Backfill.GREEDY, report_waits=report
    )
    queue = SchedulingQueue(config)
    for i in range(6):
        queue.add(f"g{i}", gang(f"g{i}", 3, gpus=3 + i), arrival=i)
    queue.add("small", gang("small", 1, gpus=1), arrival=9)
    decisions = queue.cycle(0, snap, [held])
    assert [k for k, _ in decisions.starts] == ["small"]
    # reporting cycles try each anyway, for placement's own words; quiet ones solve nothing
    assert len(decisions.tried) == (7 if report else 1)


def test_a_larger_gang_of_a_shape_that_failed_is_not_solved():
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=1))
    running(snap, "held", ["h0-0"])
    queue = SchedulingQueue(OFF)
    for i in range(5):
        queue.add(f"g{i}", gang(f"g{i}", 1 + i % 2), arrival=i)
    queue.add("other", gang("other", 1, gpus=4), arrival=9)
    decisions = queue.cycle(0, snap, [])
    assert [p.gang for p in decisions.tried] == ["g0", "other"]
    assert decisions.waiting["g2"].message == (
        "a gang of 1 such pods could not be placed on this free capacity"
    )
    # 2 pods on a fabric of one host: it never fits, said with its own numbers, not g0's
    never = decisions.waiting["g3"]
    assert never.reason is WaitReason.NEVER_FITS
    assert "needs 2 pods x 8 GPUs" in never.message


def test_tenants_share_what_is_known_where_who_owns_a_gang_changes_nothing():
    """The only host is taken (by what the queue is not told of: nothing to reserve). Gangs
    alike but for their tenants: with preemption off, the second is not solved again; with
    preemption within tenants, neither when its tenant has nothing to preempt, and tried (and
    preempting) when it has."""
    f = fabric(blocks=1, racks=1, hosts=1)
    for config in (OFF, QueueConfig()):
        snap = Snapshot(f)
        running(snap, "held", ["h0-0"], tenant="c")
        queue = SchedulingQueue(config)
        queue.add("a", gang("a", 1), arrival=0, tenant="a")
        queue.add("b", gang("b", 1), arrival=1, tenant="b")
        decisions = queue.cycle(0, snap, [])
        assert [p.gang for p in decisions.tried] == ["a"]
        assert decisions.waiting["b"].reason is WaitReason.UNPLACEABLE
    snap = Snapshot(f)
    low = running(snap, "low", ["h0-0"], priority=-1, tenant="b")
    queue = SchedulingQueue(QueueConfig.of(backfill=Backfill.GREEDY))  # a reserves nothing
    queue.add("a", gang("a", 1), arrival=0, tenant="a")
    queue.add("b", gang("b", 1), arrival=1, tenant="b")
    decisions = queue.cycle(0, snap, [low])
    assert [p.gang for p in decisions.tried] == ["a", "b"]
    assert [(e.victim, e.preemptor) for e in decisions.evictions] == [("low", "b")]


def test_shape_ids_are_as_many_as_the_queued_shapes_and_a_reused_one_knows_nothing():
    """A 4 x 8-GPU gang on a 2-host fabric is found unplaceable, then leaves: its shape id is
    freed. A 4 x 1-GPU gang of a new shape gets that id and must be tried (what was known under
    it was another shape's), and it starts. Over many shapes coming and going, ids stay few."""
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=2))
    queue = SchedulingQueue(OFF)
    queue.add("big", gang("big", 4), arrival=0)
    assert queue.cycle(0, snap, []).waiting["big"].reason is WaitReason.NEVER_FITS
    queue.remove("big")
    queue.add("small", gang("small", 4, gpus=1), arrival=1)
    assert [g for g, _ in queue.cycle(1, snap, []).starts] == ["small"]
    for i in range(50):
        queue.add(f"g{i}", gang(f"g{i}", 1, gpus=1, priority=i), arrival=2 + i)
        queue.remove(f"g{i}")
    assert len(queue._shapes) <= 2


def test_backoff_skips_until_it_ends():
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=1))
    queue = SchedulingQueue(OFF)
    queue.add("g", gang("g", 1), arrival=0)
    queue.backoff("g", now=0)
    held = queue.cycle(0.5, snap, [])
    assert not held.starts
    assert held.wake_at == 1.0
    assert queue.cycle(1.0, snap, []).starts


def test_one_failing_gang_does_not_stop_the_others(monkeypatch):
    place_raises_for(monkeypatch, "bad")
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=2))
    queue = SchedulingQueue(OFF)
    queue.add("bad", gang("bad", 1), arrival=0)
    queue.add("good", gang("good", 1), arrival=1)
    decisions = queue.cycle(0, snap, [])
    assert [k for k, _ in decisions.starts] == ["good"]
    assert isinstance(decisions.failed["bad"], RuntimeError)


def test_a_reservation_holds_the_hosts_ending_gangs_release_not_the_free_ones():
    """a (ends at 100) frees h0-1 and h0-2; h0-0 is free now. big (2 hosts) holds the two a
    releases, which cost it the same, so x starts at once on h0-0."""
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=4))
    a = running(snap, "a", ["h0-1", "h0-2"], end=100)
    c = running(snap, "c", ["h0-3"], end=math.inf)
    queue = SchedulingQueue(OFF)
    queue.add("big", gang("big", 2), arrival=0)
    queue.add("x", gang("x", 1), arrival=1)
    decisions = queue.cycle(0, snap, [a, c])
    assert decisions.reservations["training"].hosts == {1, 2}
    assert [(k, p.hosts()) for k, p in decisions.starts] == [("x", {"h0-0": 1})]


def test_a_reservation_takes_a_free_host_when_the_released_ones_cost_the_gang_more():
    """a frees h0-0 and h1-0, two racks; with the free h0-1, big fits in rack 0: it holds that."""
    snap = Snapshot(fabric(blocks=1, racks=2, hosts=2))
    a = running(snap, "a", ["h0-0", "h1-0"], end=100)
    c = running(snap, "c", ["h1-1"], end=math.inf)
    queue = SchedulingQueue(OFF)
    queue.add("big", gang("big", 2), arrival=0)
    decisions = queue.cycle(0, snap, [a, c])
    assert decisions.reservations["training"].hosts == {0, 1}


def test_a_reservation_counts_the_gangs_started_in_the_same_cycle():
    """first starts this cycle on the free host and ends at 100 by its estimate; big, behind it,
    must reserve both hosts from 100 (counting first among the gangs that will end), so late,
    which would run past that, is held."""
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=2))
    b = running(snap, "b", ["h0-0"], end=50)
    queue = SchedulingQueue(OFF)
    queue.add("first", gang("first", 1), arrival=0, estimate_s=100)
    queue.add("big", gang("big", 2), arrival=1)
    queue.add("late", gang("late", 1), arrival=2, estimate_s=1000)
    decisions = queue.cycle(0, snap, [b])
    assert [k for k, _ in decisions.starts] == ["first"]
    assert decisions.reservations["training"].at == 100


def test_a_quiet_cycle_still_looks_at_a_gang_backing_off():
    """Tries are spent on the first gang; a quiet cycle passes over the rest, but not over one
    whose backoff ends later: its wake-up time is still reported."""
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=1))
    held = running(snap, "held", ["h0-0"])
    for report in (True, False):
        queue = SchedulingQueue(
            QueueConfig.of(max_attempts=1, preemption=Preemption.OFF, report_waits=report)
        )
        queue.add("a", paired("a", 8), arrival=0)
        queue.add("b", paired("b", 4), arrival=1)
        queue.backoff("b", now=0)
        decisions = queue.cycle(0.5, snap, [held])
        assert [p.gang for p in decisions.tried] == ["a"]
        assert decisions.wake_at == 1.0
        assert ("b" in decisions.waiting) is False


def test_what_is_known_unplaceable_is_not_carried_to_another_fabric():
    """The same free capacity on a fabric whose host is tainted, then not: known blocked on
    the first must not hold on the second (labels and taints are not in a fingerprint)."""

    def one_host(taints: tuple[Taint, ...]) -> Fabric:
        host = HostSpec(name="h", gpus=8, domains={"rack": "r"}, taints=taints)
        return Fabric(TopologySpec(hosts=(host,)))

    queue = SchedulingQueue(OFF)
    queue.add("g", gang("g", 1), arrival=0)
    tainted = one_host((Taint(key="k", effect=TaintEffect.NO_SCHEDULE),))
    assert queue.cycle(0, Snapshot(tainted), []).waiting["g"].reason is WaitReason.NEVER_FITS
    assert queue.cycle(1, Snapshot(one_host(())), []).starts


def test_a_gang_blocked_by_its_role_tells_nothing_of_one_without():
    """Workers alike, but the first gang's role finds no room: the second, without a role,
    is still tried on the same free capacity, and starts."""
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=1))
    queue = SchedulingQueue(OFF)
    with_ps = gang("a", 1).model_copy(update={"roles": (Role(name="ps", pods=1, gpus_per_pod=8),)})
    queue.add("a", with_ps, arrival=0)
    queue.add("b", gang("b", 1), arrival=1)
    decisions = queue.cycle(0, snap, [])
    assert decisions.waiting["a"].message.startswith("role ps")
    assert [k for k, _ in decisions.starts] == ["b"]


def test_the_same_free_capacity_with_other_victims_is_tried_again():
    """y (priority 10) holds the only host: g (5) can neither start nor preempt. Then x
    (priority 0) holds it instead, to the same free capacity: g must try again, and preempts."""
    f = fabric(blocks=1, racks=1, hosts=1)
    queue = SchedulingQueue(QueueConfig())
    queue.add("g", gang("g", 1, priority=5), arrival=0)
    before = Snapshot(f)
    y = running(before, "y", ["h0-0"], priority=10)
    assert queue.cycle(0, before, [y]).waiting["g"].reason is WaitReason.UNPLACEABLE
    after = Snapshot(f)
    x = running(after, "x", ["h0-0"], priority=0)
    [eviction] = queue.cycle(1, after, [x]).evictions
    assert (eviction.victim, eviction.preemptor) == ("x", "g")


@pytest.mark.parametrize("backfill", [Backfill.NONE, Backfill.EASY])
def test_a_gang_that_never_fits_says_so_and_blocks_no_one(backfill):
    """Five hosts' worth on four hosts: NeverFits, not a wait for capacity; it holds no
    reservation and does not keep a later gang behind it under strict order."""
    snap = Snapshot(fabric(blocks=1, racks=2, hosts=2))
    running(snap, "busy", ["h0-0"])
    queue = SchedulingQueue(QueueConfig.of(backfill=backfill))
    queue.add("huge", gang("huge", 5), arrival=0)
    queue.add("wide", gang("wide", 4), arrival=1)  # fits once busy ends: waits for capacity
    queue.add("small", gang("small", 1), arrival=2)
    decisions = queue.cycle(0, snap, [])
    assert decisions.waiting["huge"].reason is WaitReason.NEVER_FITS
    assert decisions.waiting["huge"].message.startswith("even with every host free, needs 5 pods")
    assert decisions.waiting["wide"].reason is WaitReason.UNPLACEABLE  # not behind huge
    assert all(r.key != "huge" for r in decisions.reservations.values())
    if backfill is Backfill.EASY:
        assert "small" in dict(decisions.starts)


def test_a_required_level_no_domain_of_the_fabric_holds_never_fits():
    snap = Snapshot(fabric(blocks=1, racks=2, hosts=2))
    queue = SchedulingQueue(QueueConfig())
    one_rack = gang("r", 3).model_copy(update={"required_level": "rack"})
    queue.add("r", one_rack, arrival=0)
    wait = queue.cycle(0, snap, []).waiting["r"]
    assert wait.reason is WaitReason.NEVER_FITS
    assert "in one rack" in wait.message


def test_a_gang_held_back_by_other_than_gpus_with_nothing_running_waits_without_failing():
    """Free GPUs enough, nothing running to release, and a node rule (pod anti-affinity) that
    rules every host out: the reservation finds no release to wait for; the gang waits, the
    cycle does not fail (it raised IndexError looking at the first release of none)."""
    from scheduler.model.constraints import MatchOperator, NodeConstraints, PodRule

    labelled = TopologySpec(
        hosts=tuple(
            HostSpec(name=f"h{i}", gpus=8, domains={"rack": "r0"}, labels={"zone": "a"})
            for i in range(2)
        )
    )
    snap = Snapshot(Fabric(labelled))
    nowhere = PodRule(key="zone", operator=MatchOperator.NOT_IN, values=("a",), name="anti[0]")
    blocked = gang("blocked", 1).model_copy(
        update={"constraints": NodeConstraints(pod_rules=(nowhere,))}
    )
    queue = SchedulingQueue(QueueConfig.of(backfill=Backfill.EASY))
    queue.add("blocked", blocked, arrival=0)
    decisions = queue.cycle(0, snap, [])
    assert not decisions.failed
    assert decisions.waiting["blocked"].reason is WaitReason.UNPLACEABLE
    assert "anti[0]" in decisions.waiting["blocked"].message


@pytest.mark.parametrize("contention", [True, False])
def test_rackwise_sees_the_uplinks_running_gangs_cross_when_told_to(contention):
    """One free host per rack of three, rack uplinks 2:1; a running gang spans r1 and r2.
    With `contention` on, the queue hands placement the load (as place_one given it) and the
    new two-pod gang takes r0 and one other rack; off, it takes r1 and r2 (the first pair)."""
    ratios = FabricProfile(name=ProfileName.TOPOLOGY, ratios={"rack": 2.0})
    snap = Snapshot(Fabric(ratios.provisioned(fabric(blocks=1, racks=3, hosts=2).spec)))
    crossing = running(snap, "crossing", ["h1-0", "h2-0"])
    snap.use("h0-0", 8)
    config = QueueConfig.of(preemption=Preemption.OFF, contention=contention)
    queue = SchedulingQueue(config)
    queue.add("new", gang("new", 2), arrival=0)
    [(_, placement)] = queue.cycle(0, snap, [crossing]).starts
    assert bool({p.host[:2] for p in placement.pods} & {"h0"}) is contention


def test_a_reservation_is_made_again_when_the_gangs_on_the_same_free_capacity_change():
    """big (2 hosts) reserves h0-0 and h0-1, released by a (t=100) and b (t=200). At t=50 a has
    ended and e took exactly its host until t=1000: the free capacity is as it was, but what
    will end is not; big now waits for b and c (t=300), on h0-1 and h1-0."""
    snap = Snapshot(fabric(blocks=1, racks=2, hosts=2))
    a = running(snap, "a", ["h0-0"], end=100)
    b = running(snap, "b", ["h0-1"], end=200)
    c = running(snap, "c", ["h1-0"], end=300)
    d = running(snap, "d", ["h1-1"], end=400)
    queue = SchedulingQueue(OFF)
    queue.add("big", gang("big", 2), arrival=0)
    first = queue.cycle(0, snap, [a, b, c, d])
    assert first.reservations["training"].at == 200
    assert first.reservations["training"].hosts == {0, 1}
    snap.release(a.gang, a.placement)
    e = running(snap, "e", ["h0-0"], end=1000)
    later = queue.cycle(50, snap, [e, b, c, d])
    assert later.reservations["training"].at == 300
    assert later.reservations["training"].hosts == {1, 2}


def test_a_leaving_gangs_hosts_are_reserved_for_the_blocked_gang():
    """A deleted job's pods still hold h0-0 while they go; big (2 hosts) is blocked. The leaving
    gang ends now, so big reserves both hosts and small is not backfilled onto h0-1; without it
    nothing known would make room, no reservation, and small would take the host big needs."""
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=2))
    going = running(snap, "going", ["h0-0"], started=0, end=50)
    queue = SchedulingQueue(OFF)
    queue.add("big", gang("big", 2), arrival=0)
    queue.add("small", gang("small", 1), arrival=1)
    decisions = queue.cycle(50, snap, [], leaving=[going])
    assert not decisions.starts
    assert decisions.reservations["training"].hosts == {0, 1}
    assert decisions.reservations["training"].at == 50
    assert decisions.waiting["small"].reason is WaitReason.RESERVED


def test_a_leaving_gang_is_never_a_preemption_victim():
    """urgent (priority 9) needs both hosts; the leaving gang is going anyway and is not the
    queue's to evict: nothing is preempted for it, it waits for the host to be given back."""
    snap = Snapshot(fabric(blocks=1, racks=1, hosts=2))
    going = running(snap, "going", ["h0-0"], end=50)
    queue = SchedulingQueue(QueueConfig.of())
    queue.add("urgent", gang("urgent", 2, priority=9), arrival=0)
    decisions = queue.cycle(50, snap, [], leaving=[going])
    assert not decisions.starts
    assert not decisions.evictions


def test_rackwise_prices_breakage_by_who_asks_for_whole_domains(monkeypatch):
    """What a rackwise placement is told of the demand for whole domains: the other gangs
    waiting in its pool (not itself), the pool's arrivals of the last day with the window's
    time, and its own expected run (placement/fragments.py prices breaking a domain by it)."""
    seen: list[object] = []
    real = fragments.Breakage.of

    def spy(snapshot, pool, demand=None):
        seen.append(demand)
        return real(snapshot, pool, demand)

    monkeypatch.setattr(fragments.Breakage, "of", staticmethod(spy))
    snap = Snapshot(fabric(blocks=1, racks=2, hosts=2))  # two racks of 16 GPUs
    queue = SchedulingQueue(OFF)
    queue.add("early", gang("early", 1), arrival=0)
    [(_, placed)] = queue.cycle(0, snap, []).starts
    snap.apply(gang("early", 1), placed)
    queue.remove("early")
    queue.add("big", gang("big", 4), arrival=1)  # all four hosts: waits for "early"
    queue.add("small", gang("small", 2, priority=1), arrival=2, estimate_s=7200)
    queue.cycle(3600, snap, [])
    # the small gang's own try; EASY's trial placements for "big" read no queue (None)
    [demand] = [d for d in seen if d is not None]
    assert demand == WholeDemand(
        waiting=((32, 1),), arrived=((8, 1), (32, 1), (16, 1)), span_s=3600, run_s=7200
    )
    seen.clear()
    kueue = SchedulingQueue(QueueConfig.of(preemption=Preemption.OFF, policy="kueue-best-fit"))
    kueue.add("small", gang("small", 2), arrival=0)
    kueue.cycle(0, Snapshot(fabric(blocks=1, racks=2, hosts=2)), [])
    assert seen == []  # a peer prices no breakage: nothing counted for it
