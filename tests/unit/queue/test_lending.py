"""Lending idle racks across pools and taking them back: hand-computed cases.

The fabric: one spine, three racks of two 8-GPU hosts. Rack r0 is training's (it borrows),
racks r1 and r2 are online inference's (it lends). A training gang of four 8-GPU pods does not
fit its own two hosts, so it waits, or borrows a lent rack."""

from __future__ import annotations

import dataclasses
import math
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.model import GangRequest, Placement
from scheduler.model.constraints import NodeConstraints, Taint, TaintEffect, Toleration
from scheduler.model.policy import LendingMode
from scheduler.placement import Snapshot
from scheduler.pools import Lending, LendUnit, PoolSpec
from scheduler.queue import QueueConfig, Running, SchedulingQueue, WaitReason
from scheduler.queue.lending import rack_sets
from scheduler.queue.reservation import reserve
from scheduler.queue.running import RunningGangs
from scheduler.teams import PoolQuota, QueueSpec, Resource, Teams
from scheduler.topology import Fabric, generate
from tests.unit.queue import helpers

TRAIN, ONLINE = "training", "online-inference"


def fabric(taint: bool = False) -> Fabric:
    spec = generate(blocks=1, racks=3, hosts=2, gpus=8)
    hosts = []
    for h in spec.hosts:
        pool = TRAIN if h.domains["rack"] == "r0" else ONLINE
        taints = (Taint(key="rackwise.io/pool", value=pool, effect=TaintEffect.NO_SCHEDULE),)
        hosts.append(h.model_copy(update={"pool": pool, "taints": taints if taint else ()}))
    return Fabric(spec.model_copy(update={"hosts": tuple(hosts)}))


def config(
    mode: LendingMode = LendingMode.TOPOLOGY,
    idle_after_s: float = 0.0,
    reserve_hosts: int = 0,
    reclaim_within_s: float = 600.0,
    unit: LendUnit = LendUnit.RACK,
) -> QueueConfig:
    lend = Lending(
        unit=unit,
        idle_after_s=idle_after_s,
        reserve_hosts=reserve_hosts,
        reclaim_within_s=reclaim_within_s,
    )
    pools = (
        PoolSpec(name=TRAIN, objective="pack", borrow=True),
        PoolSpec(name=ONLINE, objective="spread", lend=lend),
    )
    base = QueueConfig.of(lending=mode)
    return QueueConfig(base.place, base.report_waits, pools)


def gang(name: str, pods: int, pool: str = TRAIN, tolerate: str | None = None) -> GangRequest:
    own = Toleration(key="rackwise.io/pool", value=pool, effect=TaintEffect.NO_SCHEDULE)
    extra = []
    if tolerate:
        extra = [Toleration(key="rackwise.io/pool", value=tolerate, effect=TaintEffect.NO_SCHEDULE)]
    constraints = NodeConstraints(tolerations=(own, *extra))
    return GangRequest(name=name, pods=pods, gpus_per_pod=8, pool=pool, constraints=constraints)


def as_running(key: str, g: GangRequest, placement: Placement, at: float, every: float | None):
    return Running(key, g, placement, at, checkpoint_s=every)


def borrowed_start(queue: SchedulingQueue, snap: Snapshot, at: float = 0.0):
    queue.add("train", gang("train", 4), arrival=at)
    decisions = queue.cycle(at, snap, [])
    [(key, placement)] = decisions.starts
    assert key == "train"
    assert decisions.borrowed == {"train"}
    snap.apply(gang("train", 4), placement)
    return placement


def test_a_gang_its_pool_cannot_hold_borrows_a_whole_idle_rack():
    snap = Snapshot(fabric())
    queue = SchedulingQueue(config())
    placement = borrowed_start(queue, snap)
    racks = {
        snap.fabric.hosts[snap.fabric.host_index[h]].domains["rack"] for h in placement.hosts()
    }
    assert racks == {"r0", "r2"}  # its own rack, then the highest idle rack, whole


def test_static_isolation_lends_nothing():
    queue = SchedulingQueue(config(LendingMode.OFF))
    queue.add("train", gang("train", 4), arrival=0)
    decisions = queue.cycle(0, Snapshot(fabric()), [])
    assert not decisions.starts
    assert decisions.waiting["train"].reason is WaitReason.NEVER_FITS  # its own pool: 2 hosts


def test_hosts_lend_only_after_they_were_idle_long_enough():
    snap = Snapshot(fabric())
    queue = SchedulingQueue(config(idle_after_s=600))
    queue.add("train", gang("train", 4), arrival=0)
    first = queue.cycle(0, snap, [])
    assert not first.starts
    assert first.wake_at == 600  # when the racks become lendable
    assert [k for k, _ in queue.cycle(600, snap, []).starts] == ["train"]


def test_the_reserve_stays_unlent():
    """Reserve three hosts of four: no whole rack can go, nothing is lent."""
    queue = SchedulingQueue(config(reserve_hosts=3))
    queue.add("train", gang("train", 4), arrival=0)
    assert not queue.cycle(0, Snapshot(fabric()), []).starts


def test_a_pod_that_does_not_tolerate_the_lenders_taint_is_never_lent_to():
    for tolerate, starts in ((None, False), (ONLINE, True)):
        queue = SchedulingQueue(config())
        queue.add("train", gang("train", 4, tolerate=tolerate), arrival=0)
        assert bool(queue.cycle(0, Snapshot(fabric(taint=True)), []).starts) is starts


def one_host_busy_per_rack(unit: LendUnit, pods: int, **rules: float) -> tuple[bool, float | None]:
    """Online gangs hold h1-0 (rack r1) and h2-0 (r2) from t=0; a training gang of `pods` 8-GPU
    pods asks at t=0. Whether it starts, and when the queue asks to be woken."""
    snap = Snapshot(fabric())
    running = []
    for i, host in enumerate(("h1-0", "h2-0")):
        g = gang(f"online{i}", 1, pool=ONLINE)
        placed = Placement.model_validate(
            {"gang": g.name, "policy": "t", "status": "placed", "pods": [{"rank": 0, "host": host}]}
        )
        snap.apply(g, placed)
        running.append(Running(g.name, g, placed, 0.0))
    queue = SchedulingQueue(config(unit=unit, **rules))  # type: ignore[arg-type]
    queue.add("train", gang("train", pods), arrival=0)
    decisions = queue.cycle(0, snap, running)
    return bool(decisions.starts), decisions.wake_at


def test_racks_the_lender_still_uses_are_lent_only_by_the_host():
    assert one_host_busy_per_rack(LendUnit.RACK, 3) == (False, math.inf)
    assert one_host_busy_per_rack(LendUnit.HOST, 3)[0]
    assert one_host_busy_per_rack(LendUnit.HOST, 4)[0]  # h1-1 and h2-1, two racks
    assert not one_host_busy_per_rack(LendUnit.HOST, 5)[0]


def test_hosts_lent_by_the_host_keep_the_reserve_and_the_idle_time():
    assert one_host_busy_per_rack(LendUnit.HOST, 3, reserve_hosts=1)[0]
    assert not one_host_busy_per_rack(LendUnit.HOST, 4, reserve_hosts=1)[0]
    assert one_host_busy_per_rack(LendUnit.HOST, 3, idle_after_s=600) == (False, 600)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.integers(0, 9), st.integers(0, 64), min_size=1, max_size=6),
    st.integers(-8, 200),
)
def test_the_lent_racks_offered_first_are_the_fewest_that_hold_the_gang(room, need):
    """Against brute force: the first set offered has the fewest racks whose room covers the
    need, and the sets offered after it never have fewer."""
    fewest = min(
        (
            len(c)
            for k in range(1, len(room) + 1)
            for c in combinations(room, k)
            if sum(room[r] for r in c) >= need
        ),
        default=None,
    )
    offered = list(rack_sets(room, need))
    if fewest is None:
        assert offered == []
        return
    assert len(offered[0]) == fewest
    assert sum(room[r] for r in offered[0]) >= need
    assert [len(s) for s in offered] == sorted(len(s) for s in offered)


def test_a_borrowed_gang_is_offered_the_fewest_lent_racks_the_tightest_alone():
    room = {0: 16, 1: 8, 2: 16, 3: 0}
    assert next(iter(rack_sets(room, 8))) == {1}  # the tightest rack that holds it
    assert next(iter(rack_sets(room, 16))) == {2}  # equal room: the highest
    assert list(rack_sets(room, 24)) == [{0, 2}, {0, 1, 2}, {0, 1, 2, 3}]


def reclaim_scene(reclaim_within_s: float, every: float | None):
    """train borrows r2 at t=0 (checkpoints `every`); at t=100 an online gang needs both hosts
    of a rack while r1 holds a running online gang."""
    snap = Snapshot(fabric())
    queue = SchedulingQueue(config(reclaim_within_s=reclaim_within_s))
    placement = borrowed_start(queue, snap)
    train = as_running("train", gang("train", 4), placement, 0.0, every)
    busy = gang("busy", 2, pool=ONLINE)
    r1 = Placement.model_validate(
        {
            "gang": "busy",
            "policy": "t",
            "status": "placed",
            "pods": [{"rank": 0, "host": "h1-0"}, {"rank": 1, "host": "h1-1"}],
        }
    )
    snap.apply(busy, r1)
    running = [train, Running("busy", busy, r1, 0.0)]
    queue.add("serve", gang("serve", 2, pool=ONLINE), arrival=100)
    return queue, snap, running


def test_a_lent_rack_is_reclaimed_at_the_borrowers_checkpoint():
    queue, snap, running = reclaim_scene(reclaim_within_s=600, every=300)
    asked = queue.cycle(100, snap, running)
    assert not asked.evictions
    assert not asked.nominated  # train still runs there: serve gets the hosts when it goes
    assert asked.reclaiming == {"train": 700}
    assert asked.waiting["serve"].reason is WaitReason.PREEMPTING
    assert asked.wake_at == 300  # its checkpoint, before the deadline
    evicted = queue.cycle(300, snap, running)
    [eviction] = evicted.evictions
    assert set(evicted.nominated["serve"].hosts()) == {"h2-0", "h2-1"}  # its hosts, now
    assert (eviction.victim, eviction.preemptor, eviction.reclaimed) == ("train", "serve", True)
    assert eviction.lost_gpu_s == 0  # evicted right at its checkpoint
    snap.release(running[0].gang, running[0].placement)
    [(key, placement)] = queue.cycle(300, snap, running[1:]).starts
    assert key == "serve"
    assert set(placement.hosts()) == {"h2-0", "h2-1"}


def test_the_deadline_evicts_before_a_late_checkpoint():
    queue, snap, running = reclaim_scene(reclaim_within_s=60, every=3600)
    asked = queue.cycle(100, snap, running)
    assert asked.wake_at == 160
    assert not queue.cycle(159, snap, running).evictions
    [eviction] = queue.cycle(160, snap, running).evictions
    assert eviction.lost_gpu_s == pytest.approx(160 * 32)  # no checkpoint yet: all of it


def test_no_host_being_reclaimed_is_lent_again():
    queue, snap, running = reclaim_scene(reclaim_within_s=600, every=3600)
    queue.cycle(100, snap, running)
    queue.add("other", gang("other", 2), arrival=150)  # would fit r2's hosts, were they lent
    decisions = queue.cycle(150, snap, running)
    assert "other" not in dict(decisions.starts)


def test_a_pool_whose_gang_waits_for_its_hosts_back_lends_nothing_new():
    snap = Snapshot(fabric())
    queue = SchedulingQueue(config(reclaim_within_s=600))
    placement = borrowed_start(queue, snap)
    assert {h[:2] for h in placement.hosts()} == {"h0", "h2"}  # r1 stays idle and lendable
    running = [as_running("train", gang("train", 4), placement, 0.0, 3600)]
    queue.add("serve", gang("serve", 3, pool=ONLINE), arrival=100)  # r1 and one host of r2
    assert queue.cycle(100, snap, running).waiting["serve"].reason is WaitReason.PREEMPTING
    queue.add("other", gang("other", 2), arrival=150)  # would borrow r1, were it lent
    decisions = queue.cycle(150, snap, running)
    assert not decisions.starts
    assert decisions.lent == {ONLINE: 0}


def many_borrowers(mode: LendingMode):
    """Three borrowed gangs on lent racks: big (both hosts of r2, started 0), and small1,
    small2 (one host of r1 each, started 10 and 20); an online gang needs a whole rack."""
    fab = fabric()
    snap = Snapshot(fab)
    queue = SchedulingQueue(config(mode))
    spots = {"big": ["h2-0", "h2-1"], "small1": ["h1-0"], "small2": ["h1-1"]}
    running = []
    for i, (name, hosts) in enumerate(spots.items()):
        g = gang(name, len(hosts))
        p = Placement.model_validate(
            {
                "gang": name,
                "policy": "t",
                "status": "placed",
                "pods": [{"rank": j, "host": h} for j, h in enumerate(hosts)],
            }
        )
        snap.apply(g, p)
        running.append(Running(name, g, p, float(i * 10)))
    queue.add("serve", gang("serve", 2, pool=ONLINE), arrival=100)
    return queue, snap, running


def test_the_fewest_borrowed_gangs_are_reclaimed():
    queue, snap, running = many_borrowers(LendingMode.TOPOLOGY)
    assert not queue.cycle(100, snap, running).evictions  # none checkpoints: it waits (below)
    decisions = queue.cycle(700, snap, running)  # the deadline
    assert [e.victim for e in decisions.evictions] == ["big"]  # one gang, not two


def test_the_owner_defers_a_reclaim_that_would_lose_work_until_its_deadline():
    queue, snap, running = reclaim_scene(reclaim_within_s=60, every=3600)
    asked = queue.cycle(100, snap, running)
    assert not asked.reclaiming  # no victim chosen yet, no host held
    assert asked.waiting["serve"].reason is WaitReason.PREEMPTING
    assert "in 60 s, unless capacity frees first" in asked.waiting["serve"].message
    assert asked.wake_at == 160
    assert not queue.cycle(130, snap, running).evictions  # the deadline is from t=100
    assert [e.victim for e in queue.cycle(160, snap, running).evictions] == ["train"]


def test_capacity_freed_before_the_deadline_spares_the_borrower():
    queue, snap, running = reclaim_scene(reclaim_within_s=600, every=3600)
    queue.cycle(100, snap, running)
    train, busy = running
    snap.release(busy.gang, busy.placement)  # online's own gang on r1 ends at t=200
    decisions = queue.cycle(200, snap, [train])
    assert not decisions.evictions
    assert not decisions.reclaiming
    [(key, placement)] = decisions.starts
    assert (key, set(placement.hosts())) == ("serve", {"h1-0", "h1-1"})
    assert not queue.cycle(700, snap, [train]).evictions  # its deadline: owed nothing now


def test_quota_borrowing_evicts_the_newest_at_once():
    queue, snap, running = many_borrowers(LendingMode.QUOTA)
    decisions = queue.cycle(100, snap, running)
    assert sorted(e.victim for e in decisions.evictions) == ["small1", "small2"]
    assert all(e.reclaimed for e in decisions.evictions)


def test_a_gang_behind_the_first_is_owed_its_hosts_from_when_it_asked():
    queue, snap, running = many_borrowers(LendingMode.TOPOLOGY)  # none of them checkpoints
    queue.add("serve2", gang("serve2", 2, pool=ONLINE), arrival=100)
    queue.cycle(100, snap, running)  # serve defers to t=700; serve2 waits behind it
    first = queue.cycle(700, snap, running)
    assert [(e.victim, e.preemptor) for e in first.evictions] == [("big", "serve")]
    big = running[0]
    snap.release(big.gang, big.placement)
    second = queue.cycle(700, snap, running[1:])
    assert "serve" in dict(second.starts)
    # serve2 asked at t=100 too: its deadline has come, not 600 s after serve started
    assert sorted(e.victim for e in second.evictions) == ["small1", "small2"]
    assert {e.preemptor for e in second.evictions} == {"serve2"}
    assert all(e.waited_s == 600 for e in second.evictions)


def team_quota(
    cohort: str | None, lends: int | None = None, owner: bool = True, within_s: float = 600.0
) -> SchedulingQueue:
    """Queue a owns 16 training GPUs (its own rack); queue serving owns online inference's 32
    and lends the cohort `lends` of them (None: all); `owner` False: no queue owns them."""

    def spec(name: str, pool: str, gpus: int, **extra: object) -> QueueSpec:
        quota = PoolQuota(pool=pool, nominal={Resource.GPUS: gpus}, **extra)
        return QueueSpec(
            name=name,
            namespaces=(name,),
            cohort=cohort,
            quotas=(quota,),
            reclaim_within_s=within_s,
        )

    limit = {} if lends is None else {"lending_limit": {Resource.GPUS: lends}}
    serving = spec("serving", ONLINE, 32, **limit).model_copy(update={"default": True})
    teams = Teams(queues=(spec("a", TRAIN, 16), *((serving,) if owner else ())))
    return SchedulingQueue(dataclasses.replace(config(), teams=teams))


def test_lent_hosts_are_borrowed_from_the_lender_pools_quota_through_the_cohort():
    """The 32-GPU gang holds a's 16 training GPUs and 16 of online inference's lent hosts: the
    16 are charged to a's quota of online inference, borrowed from serving through cohort c,
    as Kueue charges a flavor. No cohort, a lending limit below 16, or no queue owning online
    inference's GPUs: nothing is lent (before, the lent GPUs counted against a's training quota
    and any lending limit was passed over)."""
    cases = [
        (team_quota(None), WaitReason.QUOTA_EXCEEDED, "no cohort to borrow from"),
        (team_quota("c", lends=8), WaitReason.WAITING_TO_BORROW, "cohort c has 8 GPUs left"),
        (team_quota("c", owner=False), WaitReason.WAITING_TO_BORROW, "cohort c has 0 GPUs"),
    ]
    for queue, reason, says in cases:
        queue.add("train", gang("train", 4), arrival=0, tenant="a")
        decisions = queue.cycle(0, Snapshot(fabric()), [])
        assert not decisions.starts
        wait = decisions.waiting["train"]
        assert wait.reason is reason
        assert f"on {ONLINE}'s lent hosts" in wait.message
        assert says in wait.message
    queue = team_quota("c", lends=16)
    queue.add("train", gang("train", 4), arrival=0, tenant="a")
    decisions = queue.cycle(0, Snapshot(fabric()), [])
    [(_, placement)] = decisions.starts
    assert decisions.borrowed == decisions.beyond_quota == {"train"}
    queue.cycle(1, Snapshot(fabric()), [Running("train", gang("train", 4), placement, 0, "a")])
    used = queue.team_numbers()["a"].used
    assert (used[TRAIN][0], used[ONLINE][0]) == (16, 16)


def test_the_lender_pools_queue_takes_its_quota_back_from_the_gang_on_its_lent_hosts():
    """serving's gang is within serving's quota, but a borrows 16 of it on a lent rack: the
    teams' reclaim evicts the borrower (it never lends past serving's quota), a gang within its
    own quota is never the victim."""
    snap = Snapshot(fabric())
    queue = team_quota("c", within_s=0.0)
    queue.add("train", gang("train", 4), arrival=0, tenant="a")
    [(_, placement)] = queue.cycle(0, snap, []).starts
    train = gang("train", 4)
    snap.apply(train, placement)
    own = gang("own", 1, pool=ONLINE)
    at = next(
        h.name for h in snap.fabric.hosts if h.pool == ONLINE and h.name not in placement.hosts()
    )
    mine = Placement.model_validate(
        {"gang": "own", "policy": "t", "status": "placed", "pods": [{"rank": 0, "host": at}]}
    )
    snap.apply(own, mine)
    running = [Running("train", train, placement, 0.0, "a"), Running("own", own, mine, 0.0)]
    queue.add("serve", gang("serve", 2, pool=ONLINE), arrival=100)
    decisions = queue.cycle(100, snap, running)
    # at once: serving reclaims within 0 s (the pool would wait for its 600)
    assert [(e.victim, e.preemptor) for e in decisions.evictions] == [("train", "serve")]
    assert all(e.reclaimed for e in decisions.evictions)


def test_a_gang_whose_own_pools_quota_is_spent_runs_on_lent_hosts_alone():
    """Training's free hosts are b's quota (b lends none), so a can use none of them: placed
    partly there first (its own 16 GPUs and one lent rack), the gang is refused by a's training
    quota, then placed on online inference's lent hosts alone (two racks) and charged to the
    online GPUs serving lends (Kueue's next flavor)."""

    def spec(name: str, pool: str, gpus: int, **extra: object) -> QueueSpec:
        quota = PoolQuota(pool=pool, nominal={Resource.GPUS: gpus}, **extra)
        return QueueSpec(name=name, namespaces=(name,), cohort="c", quotas=(quota,))

    b = spec("b", TRAIN, 16, lending_limit={Resource.GPUS: 0})
    teams = Teams(queues=(spec("a", TRAIN, 0), b, spec("serving", ONLINE, 32)))
    queue = SchedulingQueue(dataclasses.replace(config(), teams=teams))
    queue.add("train", gang("train", 3), arrival=0, tenant="a")  # 24 GPUs: one lent rack is 16
    decisions = queue.cycle(0, Snapshot(fabric()), [])
    [(_, placement)] = decisions.starts
    assert {fabric().host_pool[h] for h in placement.hosts()} == {ONLINE}
    assert decisions.beyond_quota == {"train"}


def test_a_reservation_counts_the_hosts_lent_to_its_pool():
    """EASY's reservation starts its search at the first release after which the pool's free
    GPUs and whole-pod room could hold the gang; the hosts lent to the pool count there as
    they do in its placement (Snapshot.pool_hosts). Training's h0-0 frees at 100 and h0-1 at
    200; online's h1-0 is lent to training and free: a two-host gang fits from 100, on h0-0
    and h1-0. Counting training's own hosts alone, the search began at the second release."""
    snap = Snapshot(fabric())
    snap.down |= {4, 5}  # rack r2 out of the way: only the lent host is free
    early = helpers.running(snap, "early", ["h0-0"], end=100)
    late = helpers.running(snap, "late", ["h0-1"], end=200)
    snap.use("h1-1", 8)
    snap.lent = {TRAIN: frozenset({snap.fabric.host_index["h1-0"]})}
    index = RunningGangs()
    index.sync([early, late])
    found = reserve("big", snap, helpers.gang("big", 2), index.releases(TRAIN), QueueConfig())
    assert found is not None
    assert found.at == 100
    assert found.placement is not None
    assert found.placement.hosts() == {"h0-0": 1, "h1-0": 1}
