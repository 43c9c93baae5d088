"""Teams in the queue: admission by quota before placement, borrowing by fair share, and
borrowed capacity taken back by topology.

Contract. Active when the queue's config has queues (teams.Teams). Takes each gang the walk
looks at, with the cycle's ledger (queue/teams/quotas.py: what every queue uses, the gangs holding
hosts while they wait counted as using theirs). Decides:
- admission, before any placement: a gang within its queue's nominal quota goes on to placement
  at its place in the walk; one that needs to borrow is set aside; one its quota cannot cover
  waits `QuotaExceeded`, or `WaitingToBorrow` when the cohort's lendable capacity is in use
  (neither blocks the gangs behind it, nor holds a reservation);
- borrowing, after the walk: the gangs set aside, the queue of least dominant share after
  admitting its next gang first (its weight dividing, as Kueue's and KAI's fair sharing do),
  each admitted again on the ledger as it then is and placed; no borrower preempts, holds a
  reservation or blocks anyone; a start that borrows is reported (`Decisions.beyond_quota`);
- reclaim: a gang within its nominal quota that cannot start, by quota (others borrow what its
  queue lends) or by placement, takes hosts back from gangs that borrow (never one within its
  own queue's quota: a queue's gangs in start order fill its nominal GPUs, the rest borrow; at
  most `CANDIDATES`, the latest started first), chosen and deferred by the mechanism pool
  lending uses (queue/teams/reclaim.py) in the order `topology` gives quotas: the least work lost
  first (a borrower whose checkpoint falls within the owner's `reclaimWithinSeconds` leaves at
  it, one without leaves at once), then the largest, each one not needed spared; `quota`
  (Kueue's): the newest, at once, those not needed given back. `topology` begins no reclaim
  whose victims would lose work before the owner's deadline (`reclaimWithinSeconds` from when it
  was first owed one): the owner waits for it, taking capacity that frees meanwhile, and the
  victims are chosen again each cycle (those that lose nothing begin at once). The gang is
  pinned to the hosts that frees, and its quota is held from that cycle on (its queue's later
  gangs are admitted on what is left); a victim is evicted only while its queue still uses more
  than its nominal quota (Kueue's rule), else the reclaim is dropped and planned again on what
  then borrows. At most `RECLAIMS` reclaims begin per queue and pool per cycle, and one that
  found no room is not tried again for that shape and size until the running gangs change.
Who is charged what (the queue that admitted each running gang, running pod groups, pods on
their way out, lent hosts) and which running gangs borrow is queue/teams/use.py's. With pool
lending on, what a gang uses of another pool's lent hosts is charged to that pool's quota, not
its own (queue/teams/lent.py: Kueue's resource flavors): the ledger moves it every cycle, a
start on lent hosts is admitted part by part (`allows_on`), and the gangs on a pool's lent hosts
are among the borrowers its quota's owner reclaims from.
With `lending: off` (static quotas) nothing is borrowed, nor by a gang its driver never evicts
(`Entry.evictable`: a pod group, whose pods rackwise only binds), as Run:ai and KAI keep
non-preemptible workloads within their queue's quota. Promises: no start takes a queue past
its nominal quota plus borrowing limit nor its cohort past its capacity (on the cycle's
ledger); a gang within its queue's quota is never chosen as a reclaim victim, and no victim's
queue is within its quota when it is evicted (tests/unit/simulation/test_quota_invariants.py
checks these after every cycle of seeded replays)."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from scheduler.model.placement import Placement
from scheduler.model.policy import LendingMode
from scheduler.queue.cycle import Cycle
from scheduler.queue.holds import Holds
from scheduler.queue.lending import pools_lend
from scheduler.queue.order import NEVER
from scheduler.queue.running import RunningGangs
from scheduler.queue.teams.lent import lent_parts
from scheduler.queue.teams.owed import OwedBack, entry_demand
from scheduler.queue.teams.quotas import (
    RANK,
    Admission,
    Demand,
    Ledger,
    Verdict,
)
from scheduler.queue.teams.reclaim import Reclaims
from scheduler.queue.teams.use import Charge, Numbers, TeamUse
from scheduler.queue.types import Entry, QueueConfig, Running, Wait, WaitReason
from scheduler.queue.views import Views
from scheduler.teams import Teams

WAITS = {
    Verdict.EXCEEDS: WaitReason.QUOTA_EXCEEDED,
    Verdict.TO_BORROW: WaitReason.WAITING_TO_BORROW,
}


@dataclass
class TeamQueues(OwedBack):
    config: QueueConfig
    entries: dict[str, Entry]
    pins: Holds
    views: Views
    wait: Callable[[Cycle, Entry, Wait], None]
    reclaim: Reclaims = field(init=False)

    # (shape, queue) -> the running gangs' version and fewest pods a reclaim found no room for
    failed: dict[tuple[int, str], tuple[int, int]] = field(default_factory=dict)
    charges: TeamUse = field(init=False)  # who is charged what (queue/teams/use.py)

    def __post_init__(self) -> None:
        self.charges = TeamUse(self.config)
        self.reclaim = Reclaims(
            self.config,
            self.entries,
            self.pins,
            self.views,
            self.wait,
            dict,
            lambda _c, _p: [],
            patient=False,
            borrows=self.charges.still_borrows,
        )

    @property
    def teams(self) -> Teams:
        return self.charges.teams

    @property
    def on(self) -> bool:
        return self.teams.on

    def use(
        self, teams: Teams, charged: Sequence[Charge] = (), leaving: Sequence[Charge] = ()
    ) -> bool:
        """The teams as they are now, and what holds quota beside the running gangs
        (queue/teams/use.py); True when the teams changed."""
        return self.charges.use(teams, charged, leaving)

    def numbers(self, running: RunningGangs, waiting: Iterable[Entry]) -> dict[str, Numbers]:
        return self.charges.numbers(running, waiting)

    def beyond_all(self, index: RunningGangs) -> dict[str, str]:
        return self.charges.beyond_all(index)

    def team_of(self, entry: Entry) -> str | None:
        """The team queue a queued gang belongs to (None: teams are off, or it has none)."""
        return self._queue(entry) if self.on else None

    # the cycle's ledger
    def begin(self, c: Cycle) -> None:
        if not self.on:
            return
        usage = self.charges.usage(c.index) + self.charges.lent_now(c)
        for key in self.pins.pins:  # waiting for its hosts: its quota is spoken for
            entry = self.entries.get(key)
            if entry is not None:
                usage.append((self._queue(entry), entry.gang.pool, entry_demand(entry)))
                c.quota_held.add(key)
        c.ledger = Ledger.of(self.charges.table, usage)
        self.reclaim.forget_gone()

    def _queue(self, entry: Entry) -> str | None:
        return self.teams.queue_of(entry.queue, entry.tenant)

    def started(self, c: Cycle, entry: Entry, placement: Placement) -> None:
        self.reclaim.owed_since.pop(entry.key, None)  # owed anew if it queues again
        if c.ledger is not None and entry.key not in c.quota_held:
            for pool, d in self._parts(c, entry, placement).items():
                c.ledger.add(self._queue(entry) or "", pool, d)
        if c.borrowing:
            c.out.beyond_quota.add(entry.key)
        if self.on:
            c.out.admitted[entry.key] = self._queue(entry) or ""

    def admit_joined(self, c: Cycle) -> None:
        """The starts joint placement joined are recorded with their queue too."""
        for key, _ in c.out.starts:
            entry = self.entries.get(key)
            if self.on and entry is not None and key not in c.out.admitted:
                c.out.admitted[key] = self._queue(entry) or ""

    def _parts(self, c: Cycle, entry: Entry, placement: Placement) -> dict[str, Demand]:
        """What the placed gang charges to each pool's quota: its own pool's, but for what it
        uses of lent hosts (when pools lend)."""
        if pools_lend(self.config):
            parts = lent_parts(c.work.fabric.host_pool, entry.gang, placement)
            if parts is not None:
                return parts
        return {entry.gang.pool: entry_demand(entry)}

    # admission in the walk
    def admits(self, c: Cycle, entry: Entry) -> bool:
        """Whether the gang goes on to placement now; otherwise it waits or is set aside."""
        if c.ledger is None or c.borrowing or entry.key in self.pins.pins:
            return True
        queue = self._queue(entry)
        if entry.key in c.quota_held:  # its hold lapsed this cycle: its quota is not spoken for
            c.quota_held.discard(entry.key)
            c.ledger.add(queue or "", entry.gang.pool, entry_demand(entry), -1)
        if queue is None:  # no queue takes it: said with the refusal, not the ledger's words
            why = self.teams.unqueued(entry.queue, entry.tenant)
            self._held(c, entry, Wait(WaitReason.QUOTA_EXCEEDED, why))
            return False
        c.positions[queue or ""] = c.positions.get(queue or "", 0) + 1
        found = c.ledger.admit(queue, entry.gang.pool, entry_demand(entry))
        if found.verdict is Verdict.FITS:
            c.within_quota.add(entry.key)
            return True
        never = self._never(c, entry, queue) if found.verdict is not Verdict.BORROWS else None
        if never is not None:
            self._held(c, entry, never, queue)
        elif found.verdict is Verdict.BORROWS and self._may_borrow(entry):
            self._set_aside(c, entry, found)
        elif found.verdict is Verdict.BORROWS:
            why = _static(found) if entry.evictable else _kept(found)
            self._held(c, entry, Wait(WaitReason.QUOTA_EXCEEDED, why), found.queue)
        elif found.verdict is Verdict.RECLAIM:
            self._owed(c, entry, found)
        else:
            self._held(c, entry, _wait(found), found.queue)
        return False

    def _set_aside(self, c: Cycle, entry: Entry, found: Admission) -> None:
        """To borrow after the walk: at most the pool's tries per queue (no more could be
        placed); the rest wait, and gangs of its shape no smaller are known to."""
        queue = found.queue or ""
        n = c.set_aside.get((queue, entry.gang.pool), 0)
        wait = Wait(WaitReason.WAITING_TO_BORROW, _turn(found))
        if n >= self.config.policy.max_attempts:
            self._held(c, entry, wait, found.queue)
            return
        c.set_aside[(queue, entry.gang.pool)] = n + 1
        c.borrowers.append(entry)
        self.wait(c, entry, _placed(c, found.queue, wait))

    def _never(self, c: Cycle, entry: Entry, queue: str) -> Wait | None:
        """NeverFits when waiting cannot help: no fabric could hold it (placement's proof),
        or its queue could never be given that much (nominal plus what it may borrow)."""
        never = self.views.never_fits_once(c, entry)
        if never is not None:
            return Wait(WaitReason.NEVER_FITS, never)
        assert c.ledger is not None
        beyond = c.ledger.never(queue, entry.gang.pool, entry_demand(entry))
        return None if beyond is None else Wait(WaitReason.NEVER_FITS, beyond)

    def _held(self, c: Cycle, entry: Entry, wait: Wait, queue: str | None = None) -> None:
        """It waits by quota, as every later gang of its shape with no fewer pods does this
        cycle (use only grows within a cycle): a quiet walk passes over them (walk.py). A gang
        that never borrows (a pod group) is never said to wait to borrow."""
        self.wait(c, entry, _placed(c, queue, _kept_in(entry, wait)))
        known = c.quota_known.setdefault(entry.gang.pool, {})
        if entry.gang.pods < known.get(entry.shape, NEVER):
            known[entry.shape] = entry.gang.pods
            c.quota_version += 1

    def _lends(self) -> bool:
        return self.config.policy.lending is not LendingMode.OFF

    def _may_borrow(self, entry: Entry) -> bool:
        """Quotas lend (not static), and its driver can evict it to give back what it borrows."""
        return self._lends() and entry.evictable

    # borrowing after the walk
    def borrow(self, c: Cycle, consider: Callable[[Cycle, Entry], None]) -> None:
        """The gangs set aside, the queue of least share after its next gang first: one
        queue's admission changes only its own share, so a heap keeps the order."""
        if c.ledger is None or not c.borrowers:
            return
        ledger, queues = c.ledger, _by_queue(c.borrowers, self._queue)
        heap = [(*_fair(ledger, q, gangs[0]), q) for q, gangs in queues.items()]
        heapq.heapify(heap)
        c.borrowing = True
        try:
            while heap:
                *_, name = heapq.heappop(heap)
                gangs = queues[name]
                self._try_borrow(c, ledger, gangs.popleft(), consider)
                if gangs:
                    heapq.heappush(heap, (*_fair(ledger, name, gangs[0]), name))
        finally:
            c.borrowing = False

    def _try_borrow(
        self, c: Cycle, ledger: Ledger, entry: Entry, consider: Callable[[Cycle, Entry], None]
    ) -> None:
        found = ledger.admit(self._queue(entry), entry.gang.pool, entry_demand(entry))
        if found.verdict not in (Verdict.BORROWS, Verdict.FITS):
            self.wait(c, entry, _wait(found))
            return
        c.out.waiting.pop(entry.key, None)
        consider(c, entry)

    # pool lending (queue/lending.py) asks before it starts a gang on another pool's hosts
    def allows(self, c: Cycle, entry: Entry) -> Verdict:
        """What the gang's quota says of starting it now, wherever it is placed: FITS (no
        teams, within its queue's quota, or its quota held for it), BORROWS (on what its cohort
        lends it: the start counts as borrowing), or why not."""
        if c.ledger is None or entry.key in c.quota_held:
            return Verdict.FITS
        found = c.ledger.admit(self._queue(entry), entry.gang.pool, entry_demand(entry))
        if found.verdict is Verdict.BORROWS and not self._may_borrow(entry):
            return Verdict.EXCEEDS
        return found.verdict

    def allows_on(self, c: Cycle, entry: Entry, placement: Placement) -> Verdict:
        """What the quota says of starting the gang on this placement, what it uses of lent
        hosts charged to the lender pool's quota (borrowed through its cohort, within the
        lending limit of the queue owning it); when not FITS nor BORROWS, the gang waits with
        the numbers that hold it."""
        if c.ledger is None or entry.key in c.quota_held:
            return Verdict.FITS
        queue = self._queue(entry)
        worst = Admission(Verdict.FITS, queue)
        for pool, d in self._parts(c, entry, placement).items():
            found = c.ledger.admit(queue, pool, d)
            if pool != entry.gang.pool and found.message:
                found = Admission(
                    found.verdict, found.queue, f"on {pool}'s lent hosts: " + found.message
                )
            worst = min(worst, found, key=lambda a: RANK[a.verdict])
        if worst.verdict is Verdict.BORROWS and not self._may_borrow(entry):
            why = _static(worst) if entry.evictable else _kept(worst)
            self.wait(c, entry, _placed(c, queue, Wait(WaitReason.QUOTA_EXCEEDED, why)))
            return Verdict.EXCEEDS
        if worst.verdict not in (Verdict.FITS, Verdict.BORROWS):
            self.wait(c, entry, _placed(c, worst.queue, _kept_in(entry, _wait(worst))))
        return worst.verdict

    # reclaim
    def admitted(self, c: Cycle, entry: Entry) -> bool:
        """Whether a gang that waited may start now by quota, within its queue's nominal (joint
        placement and moves start gangs after the walk, and never by borrowing)."""
        if c.ledger is None:
            return True
        found = c.ledger.admit(self._queue(entry), entry.gang.pool, entry_demand(entry))
        return found.verdict is Verdict.FITS

    def due(self, c: Cycle) -> None:
        """Evict the victims whose checkpoint or deadline has come; nominate their owners."""
        if not self.reclaim.pending:
            return
        pending: dict[str, Running] = {
            r.key: r for r in c.running if r.key in self.reclaim.pending and r.key not in c.evicted
        }
        self.reclaim.due(c, pending)


def _turn(found: Admission) -> str:
    return (
        f"queue {found.queue} is at its nominal quota: it borrows after the gangs within "
        "theirs, by fair share"
    )


def _placed(c: Cycle, queue: str | None, wait: Wait) -> Wait:
    """The wait with the gang's place among its queue's gangs this cycle (queue order)."""
    if queue is None:
        return wait
    return Wait(wait.reason, f"{wait.message}; number {c.positions.get(queue, 0)} in queue {queue}")


def _static(found: Admission) -> str:
    return f"queue {found.queue} is at its nominal quota, and quotas are static (no borrowing)"


def _kept(found: Admission) -> str:
    return (
        f"queue {found.queue} is at its nominal quota, and a gang that is never evicted (a pod "
        "group) does not borrow: what it took could not be given back"
    )


def _kept_in(entry: Entry, wait: Wait) -> Wait:
    """A gang that never borrows waits QuotaExceeded where another would wait to borrow."""
    if entry.evictable or wait.reason is not WaitReason.WAITING_TO_BORROW:
        return wait
    return Wait(WaitReason.QUOTA_EXCEEDED, wait.message)


def _wait(found: Admission) -> Wait:
    return Wait(WAITS.get(found.verdict, WaitReason.WAITING_TO_BORROW), found.message)


def _fair(ledger: Ledger, queue: str, head: Entry) -> tuple[float, tuple[object, ...]]:
    """Borrowers by fair share: the queue's dominant share after admitting its next gang."""
    share = ledger.share(queue, head.gang.pool, entry_demand(head))
    return share, head.order


def _by_queue(
    entries: list[Entry], queue_of: Callable[[Entry], str | None]
) -> dict[str, deque[Entry]]:
    """The borrowers by queue, each queue's in walk order."""
    out: dict[str, deque[Entry]] = {}
    for entry in entries:
        out.setdefault(queue_of(entry) or "", deque()).append(entry)
    return out
