"""Taking borrowed capacity back for its owner: one mechanism for pool lending
(queue/lending.py: a lending pool's first waiting gang) and team queues (queue/teams/queues.py: a
gang within its queue's quota).

Contract. Takes, each cycle, an owner, its candidates (the borrowed gangs running, those already
being reclaimed excepted) and its `reclaimWithinSeconds`. `claim`: the owner's deadline runs from
the cycle it was first owed a reclaim; chooses the victims that make room (`topology`: pool
lending, `patient`: those that lose nothing, their checkpoint falling before the deadline, first,
then the largest, for the fewest gangs; teams, not patient: the least work lost first, then the
largest; each one the gang fits without spared: every one off the hosts it lands on, exactly,
then up to `PRUNE_MAX` others tried one by one; `quota`: the newest, until it fits, then each one
it still fits without given back, as Kueue's minimalPreemptions does). Under `topology` a set
whose victims would lose work before the deadline is not begun: the owner waits
(`WaitingForPreemption`, saying how long), takes capacity that frees meanwhile in its place in
the walk, and the victims are chosen again each cycle (`Claim.DEFERRED`); at the deadline, or
once no victim would lose work, the reclaim begins: the owner is pinned to the hosts it frees
(holds.py) and each victim's reclaim recorded (`Claim.BEGUN`). `due`: evicts each victim at its
first checkpoint since its reclaim began or at the deadline, whichever comes first (teams: at
once where no checkpoint falls within it; `quota`: at once), and says when to look again.
Promises: no victim is evicted after its deadline; every eviction names the gang it makes room
for, the work it loses, and how long it waited; a reclaim whose owner left is dropped, and the
borrowed gang runs on; so is one with a victim that no longer borrows when its eviction comes
(`borrows`), its owner placed again from the next cycle; an owner that starts or leaves is owed
nothing (queued again, its deadline runs anew)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from scheduler.model.gang import GangRequest
from scheduler.model.placement import PlaceConfig, Placement
from scheduler.model.policy import LendingMode
from scheduler.placement import InvalidPlacementError, Snapshot, place_one, validate
from scheduler.pools import Lending as Rules
from scheduler.queue.cycle import Cycle
from scheduler.queue.holds import Holds
from scheduler.queue.preemption import released
from scheduler.queue.types import Entry, Eviction, QueueConfig, Running, Wait, WaitReason
from scheduler.queue.views import Views
from scheduler.topology.fabric import Fabric

PRUNE_MAX = 12  # victims checked one by one for whether they can be spared
TRIES = 16  # placements tried while victims are added, before the gang is said not to fit
LENT = "reclaiming its pool's hosts lent to"


class Claim(Enum):
    NONE = "none"  # nothing to take back, or no set of victims makes room
    DEFERRED = "deferred"  # the owner waits for its deadline (`Reclaims._defers`)
    BEGUN = "begun"  # victims chosen, the owner pinned to what they free


@dataclass(frozen=True)
class Reclaim:
    owner: str  # the gang the hosts go to
    started: float  # the cycle its victims were chosen
    deadline: float
    owed: float  # the cycle its owner was first owed it (before `started` when it deferred)


@dataclass
class Reclaims:
    config: QueueConfig
    entries: dict[str, Entry]
    pins: Holds
    views: Views
    wait: Callable[[Cycle, Entry, Wait], None]
    lenders: Callable[[], dict[str, Rules]]
    waiting: Callable[[Cycle, str], list[Entry]]  # a pool's gangs its hosts did not start
    pending: dict[str, Reclaim] = field(default_factory=dict)  # borrowed gang -> its reclaim
    # patient (pool lending): a victim runs until its checkpoint or the deadline; not
    # (teams' quotas): until its checkpoint when one falls within the deadline, else it goes at
    # once, the least work lost chosen first (waiting would lose more and delay the owner)
    patient: bool = True
    # whether a victim still borrows when its eviction comes (teams: its queue still uses more
    # than its nominal quota); one that no longer does is not evicted, and its owner's reclaim
    # is dropped, to be planned again on what borrows then
    borrows: Callable[[Cycle, Running, str], bool] = lambda _c, _r, _pool: True
    # an owner deferring its reclaim (`_defers`) -> the cycle it was first owed one
    owed_since: dict[str, float] = field(default_factory=dict)

    def start(self, c: Cycle, borrowed: list[Running]) -> None:
        for pool, rules in self.lenders().items():
            waiting = self.waiting(c, pool)
            if not waiting:
                continue
            candidates = [
                r for r in borrowed if r.key not in self.pending and uses_pool(c.work, r, pool)
            ]
            if candidates and self.config.policy.lending is LendingMode.TOPOLOGY:
                self._asked(c, waiting[1:], rules.reclaim_within_s)  # a clock only deferral reads
            self.claim(c, waiting[0], candidates, rules.reclaim_within_s, LENT)

    def _asked(self, c: Cycle, behind: list[Entry], within_s: float) -> None:
        """The lender's gangs behind its first are owed its hosts too, from the first cycle they
        wait while borrowers hold them: each one's deadline runs from then, not from when the
        gangs before it have started (a pool's deadline is from when its gang asks)."""
        for entry in behind:
            since = self.owed_since.setdefault(entry.key, c.now)
            if since + within_s > c.now:  # a past one would wake the operator at once, again
                c.out.wake(since + within_s)

    def claim(
        self,
        c: Cycle,
        entry: Entry,
        candidates: list[Running],
        within_s: float,
        why: str,
        short: int = 0,
    ) -> Claim:
        """Take hosts back from `candidates` for `entry` by its deadline, `within_s` from the
        cycle it was first owed them (kept while it defers); their GPUs freed must also cover
        `short` (quota owed back). `topology` defers while a victim would lose work before the
        deadline (`_defers`)."""
        since = self.owed_since.pop(entry.key, c.now)  # kept again only while it defers
        if not candidates:
            return Claim.NONE
        deadline = since + within_s
        left = max(0.0, deadline - c.now)  # a cycle may come after the deadline it woke for
        found = self._chosen(c, entry, candidates, left, short)
        if found is None:
            return Claim.NONE
        if self._defers(c, entry, found[0], deadline, why):
            self.owed_since[entry.key] = since
            return Claim.DEFERRED
        self._begin(c, entry, found, left, why, since)
        return Claim.BEGUN

    def _defers(
        self, c: Cycle, entry: Entry, victims: list[Running], deadline: float, why: str
    ) -> bool:
        """Whether a victim would lose work leaving now while the owner's deadline is still
        ahead: the owner waits for it (capacity that frees meanwhile, or a victim's checkpoint,
        costs nothing), and the victims are chosen again then. Only `topology`."""
        if self.config.policy.lending is not LendingMode.TOPOLOGY or c.now >= deadline:
            return False
        if not any(loses_at_once(r, c.now, deadline) for r in victims):
            return False
        # the queue's clock is the driver's own (monotonic in the operator): say how long
        wait = f"{why} borrowers in {deadline - c.now:.0f} s, unless capacity frees first"
        self.wait(c, entry, Wait(WaitReason.PREEMPTING, wait))
        c.out.wake(deadline)
        return True

    def owed_pools(self) -> set[str]:
        """The pools of the owners deferring a reclaim (which lend nothing new meanwhile)."""
        return {self.entries[k].gang.pool for k in self.owed_since if k in self.entries}

    def forget_gone(self) -> None:
        """An owner that started or left is owed nothing: queued again later, it is owed anew."""
        for key in [k for k in self.owed_since if k not in self.entries]:
            del self.owed_since[key]

    def _chosen(
        self, c: Cycle, entry: Entry, candidates: list[Running], within_s: float, short: int
    ) -> tuple[list[Running], Placement] | None:
        """The victims that make room for `entry` within `within_s`, and its placement then
        (None: no set of them does)."""
        view = self.views.view(c, entry).snapshot
        return self._choose(c, view, entry.gang, candidates, within_s, short)

    def _choose(
        self,
        c: Cycle,
        view: Snapshot,
        gang: GangRequest,
        candidates: list[Running],
        within_s: float,
        short: int,
    ) -> tuple[list[Running], Placement] | None:
        if self.config.policy.lending is LendingMode.QUOTA:
            # Kueue's minimalPreemptions: the newest until it fits, then each one it still
            # fits without given back, the last one added excepted, with no cap
            newest = sorted(candidates, key=lambda r: (-r.started_s, r.key))
            at_once = self.config.at_once
            found = until_fits(view, gang, newest, short, at_once)
            return None if found is None else spare(at_once, view, gang, *found, short, None)
        deadline = c.now + within_s

        def cost(r: Running) -> tuple[bool, int, float, str]:
            """Those that lose nothing first (a checkpoint before the deadline), then the
            largest (fewest gangs), then the least work lost."""
            loss = loss_by(r, c.now, deadline)
            return loss > 0, -gpus_in_pool(view, r, gang.pool), loss, r.key

        def eager(r: Running) -> tuple[float, int, str]:
            """The least work lost (none at a checkpoint before the deadline, else what it ran
            since its last one, now), then the largest (fewest gangs)."""
            loss = 0.0 if _checkpoints_by(r, c.now, deadline) else r.lost_gpu_s(c.now)
            return loss, -gpus_in_pool(view, r, gang.pool), r.key

        key = cost if self.patient else eager
        found = until_fits(view, gang, sorted(candidates, key=key), short, self.config.at_once)
        if found is None:
            return None
        chosen, placement = found
        victims = on_its_hosts(chosen, placement, short)
        return spare(self.config.at_once, view, gang, victims, placement, short)

    def _begin(
        self,
        c: Cycle,
        entry: Entry,
        found: tuple[list[Running], Placement],
        within_s: float,
        why: str,
        owed: float,
    ) -> None:
        victims, placement = found
        grace = within_s if self.config.policy.lending is LendingMode.TOPOLOGY else 0.0
        for r in victims:
            # not patient: waiting past now is worth it only for a checkpoint within the grace
            stay = grace if self.patient or _checkpoints_by(r, c.now, c.now + grace) else 0.0
            self.pending[r.key] = Reclaim(entry.key, c.now, c.now + stay, owed)
        index = c.work.fabric.host_index
        hosts = frozenset(index[h] for h in placement.hosts())
        self.pins.hold(entry.key, placement, hosts, frozenset(r.key for r in victims))
        names = ", ".join(r.gang.name for r in victims)
        wait = Wait(WaitReason.PREEMPTING, f"{why} {names}")
        self.wait(c, entry, wait)

    def due(self, c: Cycle, borrowed: dict[str, Running]) -> None:
        owners = {rc.owner for rc in self.pending.values()}
        self._evict_due(c, borrowed)
        for owner in sorted(owners - {rc.owner for rc in self.pending.values()}):
            self._nominate(c, owner)

    def _nominate(self, c: Cycle, owner: str) -> None:
        """Its last victim is gone this cycle: it gets its hosts now (a simulator starts it at
        once; the operator, once the victims' pods are gone). Never before: the victims still
        run on them until their checkpoint or deadline."""
        placement = self.pins.pins.get(owner)
        entry = self.entries.get(owner)
        if placement is None or entry is None:
            return
        try:
            validate(c.work, entry.gang, placement)
        except InvalidPlacementError:
            return  # not free yet (a victim's pods are still there): its pin starts it later
        c.work.apply(entry.gang, placement)
        c.version += 1
        c.out.nominated[owner] = placement

    def _evict_due(self, c: Cycle, borrowed: dict[str, Running]) -> None:
        for key, rc in list(self.pending.items()):
            if key not in self.pending:  # its owner's reclaim was dropped in this pass
                continue
            r = borrowed.get(key)
            if r is None or rc.owner not in self.entries:  # it ended; the owner went
                del self.pending[key]
                continue
            due = evict_at(r, rc, c.now)
            if c.now < due:
                c.out.reclaiming[key] = rc.deadline
                c.out.wake(due)
                continue
            if not self.borrows(c, r, self.entries[rc.owner].gang.pool):
                self._drop_owner(c, rc.owner)
                continue
            del self.pending[key]
            lost = r.lost_gpu_s(c.now)
            waited = c.now - rc.owed  # how long its owner was kept waiting for it
            c.out.evictions.append(Eviction(key, rc.owner, lost, reclaimed=True, waited_s=waited))
            c.evicted.add(key)
            c.work.release(r.gang, r.placement)
            c.version += 1

    def _drop_owner(self, c: Cycle, owner: str) -> None:
        """Its reclaim ends with no more evictions: its hold goes, and it is placed again from
        the next cycle (asked for at once) on what then runs."""
        for key, rc in list(self.pending.items()):
            if rc.owner == owner:
                del self.pending[key]
                c.out.reclaiming.pop(key, None)
        self.pins.drop(owner)
        c.out.wake(c.now)


def on_its_hosts(chosen: list[Running], placement: Placement, short: int) -> list[Running]:
    """The victims a placement needs: those on its hosts (whether it fits depends on its own
    hosts' free capacity alone, so the others can be spared exactly), and others only as far
    as the quota owed back (`short`) needs their GPUs, the first chosen first; in the order
    they were chosen."""
    hosts = set(placement.hosts())
    needed = {r.key for r in chosen if not hosts.isdisjoint(r.placement.hosts())}
    owed = short - sum(r.gang.all_gpus for r in chosen if r.key in needed)
    for r in chosen:
        if owed <= 0:
            break
        if r.key not in needed:
            needed.add(r.key)
            owed -= r.gang.all_gpus
    return [r for r in chosen if r.key in needed]


def evict_at(r: Running, rc: Reclaim, now: float) -> float:
    """Its first checkpoint since the reclaim began, or the deadline, whichever is first."""
    last = r.last_checkpoint(now)
    if last is not None and last >= rc.started - 1e-9:
        return now
    return min(rc.deadline, r.next_checkpoint(now))


def _checkpoints_by(r: Running, now: float, deadline: float) -> bool:
    return r.next_checkpoint(now) <= deadline or r.last_checkpoint(now) == now


def loses_at_once(r: Running, now: float, deadline: float) -> bool:
    """An impatient victim (teams) chosen now leaves at once and loses work: no checkpoint of
    its falls by the deadline, and it ran since its last one."""
    return not _checkpoints_by(r, now, deadline) and r.lost_gpu_s(now) > 0


def loss_by(r: Running, now: float, deadline: float) -> float:
    """GPU-seconds a reclaim that begins now makes it lose: none when a checkpoint falls
    before the deadline, else what it ran since its last checkpoint, at the deadline."""
    if r.next_checkpoint(now) <= deadline or r.last_checkpoint(now) == now:
        return 0.0
    return r.lost_gpu_s(deadline)


def pods_by_pool(fabric: Fabric, placement: Placement) -> dict[str, int]:
    """Pods a placement puts on each pool's hosts (on another pool's: hosts lent to its own)."""
    out: dict[str, int] = {}
    for host, n in placement.hosts().items():
        pool = fabric.host_pool[host]
        out[pool] = out.get(pool, 0) + n
    return out


def gpus_in_pool(view: Snapshot, r: Running, pool: str) -> int:
    pods = pods_by_pool(view.fabric, r.placement).get(pool, 0)
    return pods * max(1, r.gang.gpus_per_pod)


def free_gpus(view: Snapshot, pool: str) -> int:
    mask = view.fabric.pool_mask.get(pool)
    if mask is None:
        return 0
    return int((view.free_gpus * view.up_mask())[mask].sum())


def uses_pool(view: Snapshot, r: Running, pool: str) -> bool:
    return pool in pods_by_pool(view.fabric, r.placement)


def until_fits(
    view: Snapshot, gang: GangRequest, order: list[Running], short: int, at_once: PlaceConfig
) -> tuple[list[Running], Placement] | None:
    """The shortest prefix of `order` whose release makes room (and covers `short`), each
    victim released once into one copy of the view; at most `TRIES` placements tried."""
    need = gang.gpus - free_gpus(view, gang.pool)
    chosen: list[Running] = []
    freed, tries = view.copy(), 0
    for r in order:
        chosen.append(r)
        freed.release(r.gang, r.placement)
        need -= gpus_in_pool(view, r, gang.pool)
        short -= r.gang.all_gpus
        if need > 0 or short > 0:
            continue
        placement = place_one(freed, gang, at_once)
        if placement.placed:
            return chosen, placement
        tries += 1
        if tries >= TRIES:
            return None
    return None


def spare(
    at_once: PlaceConfig,
    view: Snapshot,
    gang: GangRequest,
    chosen: list[Running],
    placement: Placement,
    short: int,
    most: int | None = PRUNE_MAX,
) -> tuple[list[Running], Placement]:
    """Keep each victim that the gang fits without, and whose GPUs the quota owed back
    does not need (the last one added is needed); past `most` victims, none is tried."""
    if most is not None and len(chosen) > most:
        return chosen, placement
    for r in list(reversed(chosen[:-1])):
        rest = [v for v in chosen if v is not r]
        if sum(v.gang.all_gpus for v in rest) < short:
            continue
        found = place_one(released(view, rest), gang, at_once)
        if found.placed:
            chosen, placement = rest, found
    return chosen, placement
