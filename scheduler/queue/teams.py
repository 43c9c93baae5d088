"""Teams in the queue: admission by quota before placement, borrowing by fair share, and
borrowed capacity taken back by topology.

Contract. Active when the queue's config has queues (teams.Teams). Takes each gang the walk
looks at, with the cycle's ledger (queue/quotas.py: what every queue uses, the gangs holding
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
  queue lends) or by placement, takes hosts back from gangs that borrow (quotas.borrowing: never
  one within its own queue's quota), chosen as pool lending chooses (queue/reclaim.py:
  `topology`, those whose checkpoint falls before the owner's `reclaimWithinSeconds` first, then
  the largest, each one not needed spared; `quota`, Kueue's: the newest, at once), evicted at
  their checkpoints or at the deadline; the gang is pinned to the hosts that frees.
With `lending: off` (static quotas) nothing is borrowed. Promises: no start takes a queue past
its nominal quota plus borrowing limit nor its cohort past its capacity (on the cycle's
ledger); a gang within its queue's quota is never a reclaim victim."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.model.policy import LendingMode
from scheduler.queue.cycle import Cycle
from scheduler.queue.holds import Holds
from scheduler.queue.quotas import Admission, Ledger, Verdict, borrowing, demand
from scheduler.queue.reclaim import Reclaims
from scheduler.queue.types import Entry, QueueConfig, Running, Wait, WaitReason
from scheduler.queue.views import Views

RECLAIMED = "reclaiming its queue's quota from"
WAITS = {
    Verdict.EXCEEDS: WaitReason.QUOTA_EXCEEDED,
    Verdict.TO_BORROW: WaitReason.WAITING_TO_BORROW,
}


@dataclass
class TeamQueues:
    config: QueueConfig
    entries: dict[str, Entry]
    pins: Holds
    views: Views
    wait: Callable[[Cycle, Entry, Wait], None]
    reclaim: Reclaims = field(init=False)

    def __post_init__(self) -> None:
        self.reclaim = Reclaims(
            self.config, self.entries, self.pins, self.views, self.wait, dict, lambda _c, _p: []
        )

    @property
    def on(self) -> bool:
        return self.config.teams.on

    def queue_of(self, queue: str, tenant: str) -> str | None:
        return self.config.teams.queue_of(queue, tenant)

    # the cycle's ledger
    def begin(self, c: Cycle) -> None:
        if not self.on:
            return
        usage = [
            (self.queue_of(queue, tenant), pool, (d[0], d[1], d[2]))
            for (pool, tenant, queue), d in c.index.demands().items()
        ]
        for key in self.pins.pins:  # waiting for its hosts: its quota is spoken for
            entry = self.entries.get(key)
            if entry is not None:
                usage.append((self._queue(entry), entry.gang.pool, demand(entry.gang)))
                c.quota_held.add(key)
        c.ledger = Ledger.of(self.config.teams, usage)

    def _queue(self, entry: Entry) -> str | None:
        return self.queue_of(entry.queue, entry.tenant)

    def started(self, c: Cycle, entry: Entry) -> None:
        if c.ledger is not None and entry.key not in c.quota_held:
            c.ledger.add(self._queue(entry) or "", entry.gang.pool, demand(entry.gang))
        if c.borrowing:
            c.out.beyond_quota.add(entry.key)

    # admission in the walk
    def admits(self, c: Cycle, entry: Entry) -> bool:
        """Whether the gang goes on to placement now; otherwise it waits or is set aside."""
        if c.ledger is None or c.borrowing or entry.key in self.pins.pins:
            return True
        found = c.ledger.admit(self._queue(entry), entry.gang.pool, demand(entry.gang))
        if found.verdict is Verdict.FITS:
            c.within_quota.add(entry.key)
            return True
        if found.verdict is Verdict.BORROWS and self._lends():
            c.borrowers.append(entry)
            self.wait(c, entry, Wait(WaitReason.WAITING_TO_BORROW, _turn(found)))
        elif found.verdict is Verdict.BORROWS:
            self.wait(c, entry, Wait(WaitReason.QUOTA_EXCEEDED, _static(found)))
        elif found.verdict is Verdict.RECLAIM:
            self._owed(c, entry, found)
        else:
            self.wait(c, entry, _held(found))
        return False

    def _lends(self) -> bool:
        return self.config.policy.lending is not LendingMode.OFF

    # borrowing after the walk
    def borrow(self, c: Cycle, consider: Callable[[Cycle, Entry], None]) -> None:
        if c.ledger is None or not c.borrowers:
            return
        ledger, queues = c.ledger, self._by_queue(c.borrowers)
        c.borrowing = True
        try:
            while queues:
                name = min(queues, key=lambda q: self._fair(ledger, q, queues[q][0]))
                entry = queues[name].pop(0)
                if not queues[name]:
                    del queues[name]
                self._try_borrow(c, ledger, entry, consider)
        finally:
            c.borrowing = False

    def _by_queue(self, entries: list[Entry]) -> dict[str, list[Entry]]:
        out: dict[str, list[Entry]] = {}
        for entry in entries:
            out.setdefault(self._queue(entry) or "", []).append(entry)
        return out

    def _fair(self, ledger: Ledger, queue: str, head: Entry) -> tuple[float, tuple[object, ...]]:
        share = ledger.share(queue, head.gang.pool, demand(head.gang))
        return share, head.order

    def _try_borrow(
        self, c: Cycle, ledger: Ledger, entry: Entry, consider: Callable[[Cycle, Entry], None]
    ) -> None:
        found = ledger.admit(self._queue(entry), entry.gang.pool, demand(entry.gang))
        if found.verdict not in (Verdict.BORROWS, Verdict.FITS):
            self.wait(c, entry, _held(found))
            return
        c.out.waiting.pop(entry.key, None)
        consider(c, entry)

    # reclaim
    def owed(self, c: Cycle, entry: Entry) -> bool:
        """A gang within its quota that could not be placed: take hosts back from borrowers
        when that makes room."""
        if c.ledger is None or entry.key not in c.within_quota:
            return False
        return self._claim(c, entry, 0)

    def _owed(self, c: Cycle, entry: Entry, found: Admission) -> None:
        if not self._claim(c, entry, found.short):
            self.wait(c, entry, Wait(WaitReason.WAITING_TO_BORROW, found.message))

    def _claim(self, c: Cycle, entry: Entry, short: int) -> bool:
        if not self._lends():
            return False
        pool = entry.gang.pool
        queue_of = {r.key: self.queue_of(r.queue, r.tenant) for r in c.running}
        beyond = borrowing(self.config.teams, c.running, pool, queue_of)
        candidates = [
            r
            for r in c.running
            if r.key in beyond and r.key not in c.evicted and r.key not in self.reclaim.pending
        ]
        if not candidates:
            return False
        spec = self.config.teams.by_name[self._queue(entry) or ""]
        return self.reclaim.claim(c, entry, candidates, spec.reclaim_within_s, RECLAIMED, short)

    def admitted(self, c: Cycle, entry: Entry) -> bool:
        """Whether a gang that waited may start now by quota, within its queue's nominal (joint
        placement and moves start gangs after the walk, and never by borrowing)."""
        if c.ledger is None:
            return True
        found = c.ledger.admit(self._queue(entry), entry.gang.pool, demand(entry.gang))
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


def _static(found: Admission) -> str:
    return f"queue {found.queue} is at its nominal quota, and quotas are static (no borrowing)"


def _held(found: Admission) -> Wait:
    return Wait(WAITS.get(found.verdict, WaitReason.WAITING_TO_BORROW), found.message)
