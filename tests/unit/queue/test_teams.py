"""Queues with quotas, borrowing, fair share and reclaim: hand-computed cases.

The fabric: one spine, four racks (r0-r3) of two 8-GPU hosts, 64 GPUs, all training. Each queue
lists one namespace of its own name, its tenants' (teams.Teams.queue_of)."""

from __future__ import annotations

import dataclasses

import pytest

from scheduler.model.policy import LendingMode, Preemption
from scheduler.placement import Snapshot
from scheduler.queue import QueueConfig, Running, SchedulingQueue, WaitReason
from scheduler.queue.teams.quotas import Ledger, Verdict
from scheduler.queue.teams.reclaim import on_its_hosts
from scheduler.teams import PoolQuota, QueueSpec, Resource, Teams
from tests.unit.queue.helpers import fabric, gang, running

POOL = "training"
G = Resource.GPUS
OFF = Preemption.OFF


def queue_spec(name: str, nominal: int, cohort: str | None = "c", **limits: int) -> QueueSpec:
    borrow = {G: limits["borrow"]} if "borrow" in limits else None
    lend = {G: limits["lend"]} if "lend" in limits else None
    quota = PoolQuota(pool=POOL, nominal={G: nominal}, borrowing_limit=borrow, lending_limit=lend)
    weight = limits.get("weight", 1)
    return QueueSpec(name=name, namespaces=(name,), cohort=cohort, quotas=(quota,), weight=weight)


def teams_queue(
    *queues: QueueSpec, mode: LendingMode = LendingMode.TOPOLOGY, within_s: float = 300.0
) -> SchedulingQueue:
    specs = tuple(q.model_copy(update={"reclaim_within_s": within_s}) for q in queues)
    base = QueueConfig.of(lending=mode, max_attempts=64)
    return SchedulingQueue(dataclasses.replace(base, teams=Teams(queues=specs)))


def snap() -> Snapshot:
    return Snapshot(fabric(blocks=1, racks=4, hosts=2))


def add(q: SchedulingQueue, key: str, pods: int, tenant: str, gpus: int = 8, at: float = 0.0):
    q.add(key, gang(key, pods, gpus=gpus), arrival=at, tenant=tenant)


def test_a_gang_within_its_queues_quota_starts():
    q = teams_queue(queue_spec("a", 16, cohort=None))
    add(q, "j", 2, "a")
    out = q.cycle(0.0, snap(), [])
    assert [k for k, _ in out.starts] == ["j"]
    assert out.beyond_quota == set()


def test_a_gang_over_its_quota_is_held_with_the_queues_numbers():
    s = snap()
    q = teams_queue(queue_spec("a", 16, cohort=None))
    held = [running(s, "r", ["h0-0", "h0-1"], tenant="a")]
    add(q, "j", 1, "a")
    out = q.cycle(0.0, s, held)
    assert out.starts == []
    wait = out.waiting["j"]
    assert wait.reason is WaitReason.QUOTA_EXCEEDED
    assert "16 of 16 GPUs in use, the gang needs 8" in wait.message
    assert wait.message.endswith("number 1 in queue a")


def test_a_held_gang_says_its_place_among_its_queues_gangs():
    s = snap()
    q = teams_queue(queue_spec("a", 16, cohort=None))
    held = [running(s, "r", ["h0-0", "h0-1"], tenant="a")]
    for i in range(3):
        add(q, f"j{i}", 1, "a", at=float(i))
    out = q.cycle(0.0, s, held)
    assert [out.waiting[f"j{i}"].message.rsplit(";", 1)[1] for i in range(3)] == [
        f" number {i + 1} in queue a" for i in range(3)
    ]


def test_a_held_gang_blocks_no_one_behind_it():
    s = snap()
    q = teams_queue(queue_spec("a", 16, cohort=None), queue_spec("b", 16, cohort=None))
    held = [running(s, "r", ["h0-0", "h0-1"], tenant="a")]
    add(q, "first", 1, "a", at=0.0)
    add(q, "second", 1, "b", at=1.0)
    out = q.cycle(0.0, s, held)
    assert [k for k, _ in out.starts] == ["second"]
    assert out.reservations == {}


def test_a_gang_of_no_queue_is_held_and_the_default_queue_takes_it_when_set():
    q = teams_queue(queue_spec("a", 16, cohort=None))
    add(q, "j", 1, "nobody")
    assert q.cycle(0.0, snap(), []).waiting["j"].reason is WaitReason.QUOTA_EXCEEDED
    base = QueueConfig.of()
    default = queue_spec("a", 16, cohort=None).model_copy(update={"default": True})
    teams = Teams(queues=(default,))
    q2 = SchedulingQueue(dataclasses.replace(base, teams=teams))
    add(q2, "j", 1, "nobody")
    assert [k for k, _ in q2.cycle(0.0, snap(), []).starts] == ["j"]


def borrows_and_waits(out, borrower: str, waiter: str, words: str) -> None:
    """Only `borrower` starts, beyond its quota; `waiter` waits QuotaExceeded saying `words`."""
    assert [k for k, _ in out.starts] == [borrower]
    assert out.beyond_quota == {borrower}
    wait = out.waiting[waiter]
    assert wait.reason is WaitReason.QUOTA_EXCEEDED
    assert words in wait.message


def test_borrowing_up_to_the_borrowing_limit_and_not_past_it():
    s = snap()
    q = teams_queue(queue_spec("a", 16, borrow=8), queue_spec("b", 48))
    held = [running(s, "r", ["h0-0", "h0-1"], tenant="a")]
    add(q, "borrows", 1, "a", at=0.0)
    add(q, "too-far", 1, "a", at=1.0)
    out = q.cycle(0.0, s, held)
    borrows_and_waits(out, "borrows", "too-far", "24 GPUs in use of 16 nominal + 8 borrowing limit")


def test_a_gang_that_is_never_evicted_does_not_borrow():
    """A pod group (rackwise only binds its pods) over its queue's nominal quota waits
    QuotaExceeded while the cohort lends, and a TrainingJob of its shape behind it borrows:
    what the group borrowed could never be taken back for the lender."""
    s = snap()
    q = teams_queue(queue_spec("a", 16), queue_spec("b", 48))
    held = [running(s, "r", ["h0-0", "h0-1"], tenant="a")]
    q.add("group", gang("group", 1, gpus=8), arrival=0.0, tenant="a", evictable=False)
    add(q, "job", 1, "a", at=1.0)
    out = q.cycle(0.0, s, held)
    borrows_and_waits(out, "job", "group", "never evicted (a pod group) does not borrow")


def test_a_gang_that_is_never_evicted_starts_within_its_quota():
    q = teams_queue(queue_spec("a", 16), queue_spec("b", 48))
    q.add("group", gang("group", 2, gpus=8), arrival=0.0, tenant="a", evictable=False)
    out = q.cycle(0.0, snap(), [])
    assert [k for k, _ in out.starts] == ["group"]
    assert out.beyond_quota == set()


def test_never_past_the_lenders_lending_limit():
    s = snap()
    q = teams_queue(queue_spec("a", 16), queue_spec("b", 48, lend=8))
    held = [running(s, "r", ["h0-0", "h0-1"], tenant="a")]
    add(q, "borrows", 1, "a", at=0.0)
    add(q, "no-room", 1, "a", at=1.0)
    out = q.cycle(0.0, s, held)
    assert [k for k, _ in out.starts] == ["borrows"]
    wait = out.waiting["no-room"]
    assert wait.reason is WaitReason.WAITING_TO_BORROW
    assert "cohort c has 0 GPUs left to lend to queue a, the gang needs 8" in wait.message


def test_static_quotas_lend_nothing():
    s = snap()
    q = teams_queue(queue_spec("a", 16), queue_spec("b", 48), mode=LendingMode.OFF)
    held = [running(s, "r", ["h0-0", "h0-1"], tenant="a")]
    add(q, "j", 1, "a")
    out = q.cycle(0.0, s, held)
    assert out.starts == []
    assert out.waiting["j"].reason is WaitReason.QUOTA_EXCEEDED


def test_gangs_within_quota_go_before_borrowers_whatever_their_order():
    s = snap()
    q = teams_queue(queue_spec("a", 0), queue_spec("b", 16, lend=8))
    # a's gang came first but borrows; b's came later within its quota: 16 GPUs free, b's
    # 16-GPU gang takes them, and a's borrowing waits (b's lendable 8 is now b's own use)
    add(q, "a-borrows", 1, "a", at=0.0)
    add(q, "b-own", 2, "b", at=1.0)
    s2 = Snapshot(fabric(blocks=1, racks=1, hosts=2))
    out = q.cycle(0.0, s2, [])
    assert [k for k, _ in out.starts] == ["b-own"]
    assert out.waiting["a-borrows"].reason is WaitReason.WAITING_TO_BORROW
    del s


def test_fair_share_with_weights_one_and_three_splits_what_is_lent_one_to_three():
    # the lender lends 16 GPUs; a (weight 1) and b (weight 3) own nothing and each want 16
    q = teams_queue(
        queue_spec("lender", 64, lend=16),
        queue_spec("a", 0, weight=1),
        queue_spec("b", 0, weight=3),
    )
    for i in range(16):
        add(q, f"a{i:02}", 1, "a", gpus=1, at=float(i))
        add(q, f"b{i:02}", 1, "b", gpus=1, at=float(i) + 0.5)
    out = q.cycle(0.0, snap(), [])
    started = [k for k, _ in out.starts]
    assert sum(k.startswith("a") for k in started) == 4
    assert sum(k.startswith("b") for k in started) == 12
    assert out.beyond_quota == set(started)


def borrowing(
    teams: Teams, running: list[Running], pool: str, queue_of: dict[str, str | None]
) -> set[str]:
    """From scratch: the running gangs of `pool` beyond their queue's nominal GPUs, their
    queue's earlier-started gangs filling its quota first (`queue_of`: gang key -> queue)."""
    by_queue: dict[str, list[Running]] = {}
    for r in running:
        q = queue_of.get(r.key)
        if r.gang.pool == pool and q is not None:
            by_queue.setdefault(q, []).append(r)
    out: set[str] = set()
    for q, gangs in by_queue.items():
        nominal, total = teams.by_name[q].quota(pool).owned(Resource.GPUS), 0
        for r in sorted(gangs, key=lambda r: (r.started_s, r.key)):
            total += r.gang.all_gpus
            if total > nominal:
                out.add(r.key)
    return out


def reclaim_setup() -> tuple[Snapshot, list[Running]]:
    """o owns 32 and uses none; w owns 32 and uses it; b borrows: x (a whole rack, r3) and y1,
    y2 (one host each in r1 and r2, beside w's). Checkpoints every 600 s from their starts."""
    s = snap()
    held = [
        running(s, "w1", ["h0-0", "h0-1"], tenant="w"),
        running(s, "w2", ["h1-0"], tenant="w"),
        running(s, "w3", ["h2-0"], tenant="w"),
        running(s, "x", ["h3-0", "h3-1"], tenant="b", started=0.0),
        running(s, "y1", ["h1-1"], tenant="b", started=10.0),
        running(s, "y2", ["h2-1"], tenant="b", started=20.0),
    ]
    held = [dataclasses.replace(r, checkpoint_s=600.0) for r in held]
    return s, held


def owner_queue(b_nominal: int, mode: LendingMode = LendingMode.TOPOLOGY) -> SchedulingQueue:
    return teams_queue(
        queue_spec("o", 32), queue_spec("w", 32), queue_spec("b", b_nominal), mode=mode
    )


def test_reclaim_frees_one_whole_rack_at_the_borrowers_checkpoint():
    s, held = reclaim_setup()
    q = owner_queue(0)
    add(q, "owner", 2, "o", at=1000.0)
    first = q.cycle(1000.0, s, held)
    assert first.evictions == []  # x's next checkpoint (1200) falls before the deadline (1300)
    assert first.reclaiming == {"x": 1300.0}
    assert first.waiting["owner"].reason is WaitReason.PREEMPTING
    due = q.cycle(1200.0, s, held)
    assert [(e.victim, e.reclaimed, e.lost_gpu_s) for e in due.evictions] == [("x", True, 0.0)]
    s.release(held[3].gang, held[3].placement)
    after = q.cycle(1200.0, s, [r for r in held if r.key != "x"])
    assert [k for k, _ in after.starts] == ["owner"]


def test_a_group_that_is_never_evicted_still_takes_its_quota_back():
    """A pod group may not borrow (it could not be given back) but its queue's nominal quota is
    its own: within it, it reclaims from borrowers as a TrainingJob does, and starts on the
    rack they leave."""
    s, held = reclaim_setup()
    q = owner_queue(0)
    q.add("owner", gang("owner", 2), arrival=1000.0, tenant="o", evictable=False)
    first = q.cycle(1000.0, s, held)
    assert first.reclaiming == {"x": 1300.0}
    due = q.cycle(1200.0, s, held)
    assert [e.victim for e in due.evictions] == ["x"]
    s.release(held[3].gang, held[3].placement)
    after = q.cycle(1200.0, s, [r for r in held if r.key != "x"])
    assert [k for k, _ in after.starts] == ["owner"]
    assert "owner" not in after.beyond_quota


def test_the_kueue_style_baseline_evicts_the_newest_borrowers_at_once():
    s, held = reclaim_setup()
    q = owner_queue(0, LendingMode.QUOTA)
    add(q, "owner", 2, "o", at=1000.0)
    out = q.cycle(1000.0, s, held)
    assert sorted(e.victim for e in out.evictions) == ["y1", "y2"]


def test_a_gang_within_its_own_queues_quota_is_never_a_victim():
    # b owns 16: x (started first, 16 GPUs) is within it; only y1 and y2 borrow
    s, held = reclaim_setup()
    q = teams_queue(queue_spec("o", 16), queue_spec("w", 32), queue_spec("b", 16))
    add(q, "owner", 2, "o", at=1000.0)
    first = q.cycle(1000.0, s, held)
    assert set(first.reclaiming) == {"y1", "y2"}
    due = q.cycle(1230.0, s, held)
    assert sorted(e.victim for e in due.evictions) == ["y1", "y2"]


@pytest.mark.parametrize(
    ("used", "need", "verdict"),
    [
        ({"a": 0}, 16, Verdict.FITS),
        ({"a": 16}, 8, Verdict.BORROWS),
        ({"a": 16, "b": 48}, 8, Verdict.TO_BORROW),
        ({"a": 0, "b": 64}, 8, Verdict.RECLAIM),
        ({"a": 24}, 8, Verdict.EXCEEDS),
    ],
)
def test_admission_verdicts(used: dict[str, int], need: int, verdict: Verdict) -> None:
    teams = Teams(queues=(queue_spec("a", 16, borrow=8), queue_spec("b", 48)))
    ledger = Ledger.of(teams, [(q, POOL, (n, 0, 0)) for q, n in used.items()])
    found = ledger.admit("a", POOL, (need, 0, 0))
    assert found.verdict is verdict
    if verdict is Verdict.RECLAIM:
        assert found.short == 8


def test_borrowing_gangs_are_the_latest_started_beyond_nominal():
    _, held = reclaim_setup()
    teams = Teams(queues=(queue_spec("b", 16),))
    queue_of = {r.key: ("b" if r.tenant == "b" else None) for r in held}
    assert borrowing(teams, held, POOL, queue_of) == {"y1", "y2"}


def test_cpu_is_limited_only_where_a_quota_gives_it():
    quota = PoolQuota(pool=POOL, nominal={G: 64, Resource.CPU: 4000})
    teams = Teams(queues=(QueueSpec(name="a", namespaces=("a",), quotas=(quota,)),))
    ledger = Ledger.of(teams, [])
    assert ledger.admit("a", POOL, (8, 5000, 10**6)).verdict is Verdict.EXCEEDS
    assert ledger.admit("a", POOL, (8, 3000, 10**6)).verdict is Verdict.FITS
    no_cpu = Teams(queues=(queue_spec("a", 64, cohort=None),))
    assert Ledger.of(no_cpu, []).admit("a", POOL, (8, 5000, 0)).verdict is Verdict.FITS


def test_a_borrower_that_cannot_be_placed_holds_no_reservation():
    s = snap()
    # b's quota says more than the fabric has (as a Kueue quota may): a's borrowing of 32 GPUs
    # is within the cohort's room, but only 16 GPUs are free
    q = teams_queue(queue_spec("a", 0), queue_spec("b", 96))
    held = [running(s, "r", ["h0-0", "h0-1", "h1-0", "h1-1", "h2-0", "h2-1"], tenant="b")]
    add(q, "too-big", 4, "a")
    out = q.cycle(0.0, s, held)
    assert out.waiting["too-big"].reason is WaitReason.UNPLACEABLE
    assert out.reservations == {}


def test_reclaim_takes_back_what_the_quota_owes_where_hosts_are_free():
    # the cohort owns 48 of the 64 GPUs: w uses its 32, b borrows o's 16 (two gangs), and 16
    # GPUs no quota covers are free; o's gang fits those hosts, but its quota is owed first
    s = snap()
    held = [
        running(s, "w1", ["h0-0", "h0-1", "h1-0", "h1-1"], tenant="w"),
        running(s, "b1", ["h2-0"], tenant="b", started=10.0),
        running(s, "b2", ["h2-1"], tenant="b", started=20.0),
    ]
    q = teams_queue(queue_spec("o", 16), queue_spec("w", 32), queue_spec("b", 0))
    add(q, "owner", 2, "o")
    # neither declares checkpoints: evicted now, both would lose work, so the owner waits
    # until its deadline (300 s) for capacity to free, and they go at it
    first = q.cycle(100.0, s, held)
    assert first.evictions == []
    assert first.starts == []
    assert first.waiting["owner"].reason is WaitReason.PREEMPTING
    assert "in 300 s" in first.waiting["owner"].message
    assert first.wake_at == pytest.approx(400.0)
    out = q.cycle(400.0, s, held)
    assert sorted(e.victim for e in out.evictions) == ["b1", "b2"]
    assert all(e.reclaimed for e in out.evictions)
    assert out.starts == []


def test_capacity_that_frees_before_the_deadline_spares_every_borrower():
    # as above, but w's first gang ends before o's deadline: o is admitted on what that frees
    s = snap()
    w1 = running(s, "w1", ["h0-0", "h0-1", "h1-0", "h1-1"], tenant="w")
    borrowers = [
        running(s, "b1", ["h2-0"], tenant="b", started=10.0),
        running(s, "b2", ["h2-1"], tenant="b", started=20.0),
    ]
    q = teams_queue(queue_spec("o", 16), queue_spec("w", 32), queue_spec("b", 0))
    add(q, "owner", 2, "o")
    assert q.cycle(100.0, s, [w1, *borrowers]).evictions == []
    s.release(w1.gang, w1.placement)
    out = q.cycle(200.0, s, borrowers)
    assert [k for k, _ in out.starts] == ["owner"]
    assert out.evictions == []
    assert out.reclaiming == {}
    assert q.cycle(400.0, s, borrowers).evictions == []


def test_a_borrower_whose_checkpoint_falls_after_the_deadline_goes_at_the_deadline():
    # with a 100 s deadline at 1000 s, no borrower checkpoints by 1100 (x at 1200, y1 at 1210,
    # y2 at 1220): the owner waits until 1100, and then the least work lost goes at once:
    # y1 and y2 (490 and 480 s since their checkpoints at 610 and 620) before x (500 s, 16 GPUs)
    s, held = reclaim_setup()
    q = teams_queue(queue_spec("o", 32), queue_spec("w", 32), queue_spec("b", 0), within_s=100.0)
    add(q, "owner", 2, "o", at=1000.0)
    assert q.cycle(1000.0, s, held).evictions == []
    out = q.cycle(1100.0, s, held)
    assert out.reclaiming == {}
    lost = {e.victim: e.lost_gpu_s for e in out.evictions}
    assert sorted(lost) == ["y1", "y2"]
    assert lost["y1"] == pytest.approx(490 * 8)


@pytest.mark.parametrize("seed", range(20))
def test_the_indexed_borrowers_are_those_a_walk_from_scratch_finds(seed):
    """Which running gangs borrow, read off the index from each queue's latest start back, is
    quotas.borrowing's from-scratch answer, over seeded sets of gangs of three queues."""
    import random

    rng = random.Random(seed)
    s = Snapshot(fabric(blocks=2, racks=4, hosts=4))
    hosts = [h.name for h in s.fabric.hosts]
    rng.shuffle(hosts)
    held = []
    for i in range(rng.randint(3, 12)):
        take, hosts = hosts[: rng.randint(1, 3)], hosts[3:]
        if not take:
            break
        r = running(s, f"g{i}", take, tenant=rng.choice("abc"), started=rng.uniform(0, 100))
        held.append(r)
    specs = (queue_spec("a", 16), queue_spec("b", 8), queue_spec("c", 0))
    q = teams_queue(*specs)
    add(q, "probe", 1, "a")
    q.cycle(0.0, s, held)
    teams = Teams(queues=specs)
    queue_of = {r.key: r.tenant for r in held}
    assert set(q.beyond_quota()) == borrowing(teams, held, POOL, queue_of)


def test_a_gang_whose_hold_lapses_is_admitted_on_its_own_quota_not_twice():
    """Held hosts (here: a pin whose hosts never come free) count as the gang's use while it
    waits; when the hold lapses, the gang is admitted without its own demand counted already."""
    from scheduler.model import Placement, PlacementStatus, PodAssignment
    from scheduler.queue.holds import PIN_PATIENCE_S

    s = snap()
    blocker = [running(s, "other", ["h0-0", "h0-1"], tenant="nobody")]
    q = teams_queue(queue_spec("a", 16, cohort=None))
    add(q, "j", 2, "a")
    pods = tuple(PodAssignment(rank=i, host=h) for i, h in enumerate(["h0-0", "h0-1"]))
    pinned = Placement(gang="j", policy="test", status=PlacementStatus.PLACED, pods=pods)
    index = s.fabric.host_index
    q._pins.hold("j", pinned, frozenset(index[h] for h in ("h0-0", "h0-1")), frozenset())
    first = q.cycle(0.0, s, blocker)
    assert first.waiting["j"].reason is WaitReason.PREEMPTING
    later = q.cycle(PIN_PATIENCE_S + 1.0, s, blocker)
    assert [k for k, _ in later.starts] == ["j"]


def test_the_kueue_style_baseline_gives_back_a_victim_it_did_not_need():
    """Kueue's minimalPreemptions: the newest until the gang fits, then each one it still fits
    without given back. The owner needs a whole rack: evicting z (newest, beside w's gang in
    r1) frees no rack, evicting y too frees r2, and z is given back (fails without the give-back,
    tried: both go)."""
    s = snap()
    held = [
        running(s, "w1", ["h0-0", "h0-1"], tenant="w"),
        running(s, "w2", ["h1-0"], tenant="w"),
        running(s, "w3", ["h3-1"], tenant="w"),
        running(s, "y", ["h2-0", "h2-1"], tenant="b", started=10.0),
        running(s, "z", ["h1-1"], tenant="b", started=20.0),
    ]
    q = owner_queue(0, LendingMode.QUOTA)
    owner = gang("owner", 2).model_copy(update={"required_level": "rack"})
    q.add("owner", owner, 1000.0, tenant="o")
    out = q.cycle(1000.0, s, held)
    assert [e.victim for e in out.evictions] == ["y"]


def test_victims_off_the_placements_hosts_are_spared_unless_the_quota_owes_their_gpus():
    s = snap()
    a = running(s, "a", ["h0-0"], started=1.0)
    b = running(s, "b", ["h1-0"], started=2.0)
    c = running(s, "c", ["h2-0"], started=3.0)
    placement = b.placement  # the owner lands where b was
    assert [r.key for r in on_its_hosts([a, b, c], placement, 0)] == ["b"]
    assert [r.key for r in on_its_hosts([a, b, c], placement, 16)] == ["a", "b"]
    # b's 8 GPUs leave 1 owed: the first chosen off its hosts (c) covers it
    assert [r.key for r in on_its_hosts([c, a, b], placement, 9)] == ["c", "b"]


def test_teams_that_come_later_part_the_shapes_tenants_shared():
    """A quiet queue made without teams (the operator's, before any Queue exists) and without
    preemption has gangs of two tenants alike in shape. Teams come: a's queue has no quota,
    b's has room. b starts; with one shape still shared, a held by its quota would have passed
    b over."""
    s = snap()
    config = QueueConfig.of(lending=LendingMode.TOPOLOGY, report_waits=False, preemption=OFF)
    q = SchedulingQueue(config)
    add(q, "ja", 1, "a")
    add(q, "jb", 1, "b", at=1.0)
    q.use_teams(Teams(queues=(queue_spec("a", 0, cohort=None), queue_spec("b", 16, cohort=None))))
    out = q.cycle(0.0, s, [])
    assert [k for k, _ in out.starts] == ["jb"]


def test_a_reclaims_owner_holds_its_quota_from_the_cycle_it_begins():
    """o owns 16; the cohort's 48 GPUs are in use (w 24, b 24 borrowed), 16 no quota covers are
    free. o's first gang (8 GPUs) reclaims; its second (16) would take o to 24: it may only
    borrow, and does not reclaim on quota the first already spoke for."""
    s = snap()
    held = [
        running(s, "w1", ["h0-0", "h0-1", "h1-0"], tenant="w"),
        running(s, "b1", ["h2-0"], tenant="b", started=10.0),
        running(s, "b2", ["h2-1"], tenant="b", started=20.0),
        running(s, "b3", ["h1-1"], tenant="b", started=30.0),
    ]
    q = teams_queue(
        queue_spec("o", 16), queue_spec("w", 32), queue_spec("b", 0), mode=LendingMode.QUOTA
    )
    add(q, "first", 1, "o", at=50.0)
    add(q, "second", 2, "o", at=60.0)
    out = q.cycle(100.0, s, held)
    assert [(e.victim, e.preemptor) for e in out.evictions] == [("b3", "first")]
    assert out.waiting["second"].reason is WaitReason.WAITING_TO_BORROW


def test_a_victim_whose_queue_stopped_borrowing_is_not_evicted():
    """b owns 16: y1 and y2 fill it, x (started last, a whole rack) borrows and is reclaimed for
    o at its checkpoint (1230). y1 and y2 end first: b is back within its quota, so x stays,
    the reclaim is dropped, and o's gang is placed on the hosts they left."""
    s = snap()
    held = [
        running(s, "w1", ["h0-0", "h0-1", "h1-0", "h2-0"], tenant="w"),
        running(s, "y1", ["h1-1"], tenant="b", started=10.0),
        running(s, "y2", ["h2-1"], tenant="b", started=20.0),
        running(s, "x", ["h3-0", "h3-1"], tenant="b", started=30.0),
    ]
    held = [dataclasses.replace(r, checkpoint_s=600.0) for r in held]
    q = teams_queue(queue_spec("o", 32), queue_spec("w", 32), queue_spec("b", 16))
    add(q, "owner", 2, "o", at=1000.0)
    assert q.cycle(1000.0, s, held).reclaiming == {"x": 1300.0}
    for r in held[1:3]:
        s.release(r.gang, r.placement)
    left = [held[0], held[3]]
    q.cycle(1100.0, s, left)
    due = q.cycle(1230.0, s, left)
    assert due.evictions == []
    assert due.wake_at == 1230.0
    again = q.cycle(1230.0, s, left)
    assert [(k, sorted(p.hosts())) for k, p in again.starts] == [("owner", ["h1-1", "h2-1"])]


def test_a_dropped_reclaim_of_several_victims_evicts_none_of_them():
    """As above, with rack r3 held by two borrowers due at the same checkpoint, x1 of b and x2
    of w (which uses its 32 GPUs besides): once b is back within its quota, x1 no longer
    borrows and the whole reclaim is dropped; x2, which still borrows, is not evicted either."""
    s = snap()
    held = [
        running(s, "w1", ["h0-0", "h0-1", "h1-0", "h2-0"], tenant="w"),
        running(s, "y1", ["h1-1"], tenant="b", started=10.0),
        running(s, "y2", ["h2-1"], tenant="b", started=20.0),
        running(s, "x1", ["h3-0"], tenant="b", started=30.0),
        running(s, "x2", ["h3-1"], tenant="w", started=30.0),
    ]
    held = [dataclasses.replace(r, checkpoint_s=600.0) for r in held]
    q = teams_queue(queue_spec("o", 32), queue_spec("w", 32), queue_spec("b", 16))
    add(q, "owner", 2, "o", at=1000.0)
    assert q.cycle(1000.0, s, held).reclaiming == {"x1": 1300.0, "x2": 1300.0}
    for r in held[1:3]:
        s.release(r.gang, r.placement)
    left = [held[0], *held[3:]]
    due = q.cycle(1230.0, s, left)
    assert due.evictions == []
    assert due.reclaiming == {}
    again = q.cycle(1230.0, s, left)
    assert [(k, sorted(p.hosts())) for k, p in again.starts] == [("owner", ["h1-1", "h2-1"])]
