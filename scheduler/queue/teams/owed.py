"""What is owed back to a queue: a gang within its queue's nominal quota that borrowers keep
from starting takes hosts back from them (teams/reclaim.py), at most `RECLAIMS` reclaims begun
per queue and pool per cycle; its quota is spoken for from the cycle its reclaim begins, and a
shape and size no reclaim found room for is not tried again until something running changes.
The part of TeamQueues (teams/queues.py) that decides it, as a base class of its own."""

from __future__ import annotations

from scheduler.queue.cycle import Cycle
from scheduler.queue.teams.quotas import Admission, Demand, demand
from scheduler.queue.teams.reclaim import Claim, Reclaims
from scheduler.queue.teams.use import TeamUse
from scheduler.queue.types import Entry, Running, Wait, WaitReason
from scheduler.teams import Teams

RECLAIMED = "reclaiming its queue's quota from"
RECLAIMS = 8  # reclaims begun per queue and pool per cycle


class OwedBack:
    """TeamQueues' reclaims for gangs within quota; the attributes and methods below the
    annotations are TeamQueues' own."""

    reclaim: Reclaims
    charges: TeamUse
    # (shape, queue) -> the running gangs' version and fewest pods a reclaim found no room for
    failed: dict[tuple[int, str], tuple[int, int]]

    @property
    def teams(self) -> Teams:
        raise NotImplementedError

    def _queue(self, entry: Entry) -> str | None:
        raise NotImplementedError

    def _lends(self) -> bool:
        raise NotImplementedError

    def _held(self, c: Cycle, entry: Entry, wait: Wait, queue: str | None = None) -> None:
        raise NotImplementedError

    def owed(self, c: Cycle, entry: Entry) -> bool:
        """A gang within its quota that could not be placed: take hosts back from borrowers
        when that makes room."""
        if c.ledger is None or entry.key not in c.within_quota:
            return False
        return self._claim(c, entry, 0)

    def owed_clock(self, entry: Entry) -> bool:
        """Whether a reclaim's deadline already runs for it (deferred, or owed behind its
        pool's first): a try then depends on the time left, so nothing learnt from another
        gang, or from its own earlier try, answers for it."""
        return entry.key in self.reclaim.owed_since

    def _owed(self, c: Cycle, entry: Entry, found: Admission) -> None:
        """Within its quota, which others borrow: at most `RECLAIMS` reclaims begun per queue
        and pool per cycle (Kueue preempts for one workload per ClusterQueue per cycle, but
        its cycles come at every admission); the queue's later gangs wait for them."""
        key = (found.queue or "", entry.gang.pool)
        tried = c.reclaimed.get(key, 0) >= RECLAIMS or self._failed_on(c, entry)
        c.reclaimed[key] = c.reclaimed.get(key, 0) + 1
        if not tried and self._claim(c, entry, found.short):
            return
        if not tried:  # nothing running changes: no reclaim of this shape and size can
            self.failed[(entry.shape, entry.queue)] = (c.index.version, entry.gang.pods)
        self._held(c, entry, Wait(WaitReason.WAITING_TO_BORROW, found.message), found.queue)

    def _failed_on(self, c: Cycle, entry: Entry) -> bool:
        known = self.failed.get((entry.shape, entry.queue))
        return known is not None and known[0] == c.index.version and known[1] <= entry.gang.pods

    def _claim(self, c: Cycle, entry: Entry, short: int) -> bool:
        if not self._lends():
            return False
        pool = entry.gang.pool
        candidates = [
            r
            for r in self._borrowing(c, pool)
            if r.key not in c.evicted and r.key not in self.reclaim.pending
        ]
        spec = self.teams.by_name[self._queue(entry) or ""]
        found = self.reclaim.claim(c, entry, candidates, spec.reclaim_within_s, RECLAIMED, short)
        if found is Claim.BEGUN:
            self._hold_quota(c, entry)
        return found is not Claim.NONE

    def _hold_quota(self, c: Cycle, entry: Entry) -> None:
        """The owner's quota is spoken for from the cycle its reclaim begins, as a pinned gang's
        is in later cycles (`begin`): the queue's later gangs in this cycle must not be
        admitted on it too."""
        if c.ledger is not None and entry.key not in c.quota_held:
            c.ledger.add(self._queue(entry) or "", entry.gang.pool, entry_demand(entry))
            c.quota_held.add(entry.key)

    def _borrowing(self, c: Cycle, pool: str) -> list[Running]:
        """The running gangs using the pool's quota beyond their queue's, read off the index
        from each queue's latest start back (once per cycle; this cycle's own starts are not
        among them yet)."""
        found = c.beyond.get(pool)
        if found is None:
            found = c.beyond[pool] = self.charges.beyond(c.index, pool)
        return found


def entry_demand(entry: Entry) -> Demand:
    """What the gang asks of its queue's quota, computed once per entry."""
    if entry.demand is None:
        entry.demand = demand(entry.gang)
    return entry.demand
