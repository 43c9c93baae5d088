"""Quota accounting: what each queue uses of each pool, and whether a gang may start by quota.

Contract. Takes the teams' specs (teams.py) and what every queue uses of every pool now (the
running gangs, and the gangs holding hosts while they wait for them). `admit` decides, for a
gang of a queue and pool, one of:
- FITS: the queue's use stays within its nominal quota, and the cohort has room for it;
- BORROWS: beyond nominal, within the queue's borrowing limit, and the cohort's members lend
  enough that no one else uses;
- EXCEEDS (QuotaExceeded): past the borrowing limit, or the queue has no cohort to borrow from;
- TO_BORROW (WaitingToBorrow): it may borrow, but the cohort's lendable capacity is in use;
- RECLAIM: within nominal, but others borrow what the queue lends: `short` GPUs must be taken
  back from borrowing gangs first.
Per resource (GPUs always; CPU and memory where the queue's quota gives them) the cohort's
capacity is the sum of its members' lendable quota (nominal, or the lending limit), and a
member's claim on it is what it uses beyond what it keeps for itself (nominal less lendable),
as Kueue counts them. `share` is a queue's dominant borrowed share (beyond nominal, over the
cohort's capacity, by resource, the largest) divided by its weight: fair sharing orders
borrowers by it. `borrowing` says which running gangs borrow: a queue's gangs in start order
are within quota while their running sum stays within its nominal GPUs; the rest borrow, and
only they may be reclaimed. Promises: a gang admitted FITS or BORROWS never takes a queue past
its nominal plus borrowing limit, nor a cohort past its capacity, on the usage given; every
verdict but FITS and BORROWS carries a message with the numbers that decide it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from scheduler.model.gang import GangRequest
from scheduler.queue.types import Running
from scheduler.teams import PoolQuota, QueueSpec, Resource, Teams

RESOURCES = (Resource.GPUS, Resource.CPU, Resource.MEMORY)
UNITS = {Resource.GPUS: "GPUs", Resource.CPU: "millicores", Resource.MEMORY: "MiB"}
Demand = tuple[int, int, int]  # in RESOURCES' order


def demand(gang: GangRequest) -> Demand:
    sets = [(gang.pods, gang.request())] + [(r.pods, gang.request(r.name)) for r in gang.roles]
    return (
        sum(n * q.gpus for n, q in sets),
        sum(n * q.cpu_milli for n, q in sets),
        sum(n * q.memory_mib for n, q in sets),
    )


class Verdict(StrEnum):
    FITS = "Fits"
    BORROWS = "Borrows"
    EXCEEDS = "QuotaExceeded"
    TO_BORROW = "WaitingToBorrow"
    RECLAIM = "Reclaim"


@dataclass(frozen=True)
class Admission:
    verdict: Verdict
    queue: str | None
    message: str = ""
    short: int = 0  # RECLAIM: GPUs to take back from borrowers


@dataclass
class Ledger:
    """Use per (queue, pool), kept up to date through a cycle's starts."""

    teams: Teams
    used: dict[tuple[str, str], list[int]] = field(default_factory=dict)

    @classmethod
    def of(cls, teams: Teams, usage: Iterable[tuple[str | None, str, Demand]]) -> Ledger:
        """From (queue, pool, demand) triples; gangs of no queue count nowhere."""
        out = cls(teams)
        for queue, pool, d in usage:
            if queue is not None:
                out.add(queue, pool, d)
        return out

    def add(self, queue: str, pool: str, d: Demand, sign: int = 1) -> None:
        found = self.used.setdefault((queue, pool), [0, 0, 0])
        for i, v in enumerate(d):
            found[i] += sign * v

    def of_queue(self, queue: str, pool: str) -> list[int]:
        return self.used.get((queue, pool), [0, 0, 0])

    # admission
    def admit(self, queue: str | None, pool: str, d: Demand) -> Admission:
        if queue is None:
            return Admission(Verdict.EXCEEDS, None, "it belongs to no queue, and none is default")
        spec = self.teams.by_name[queue]
        verdicts = [self._one(spec, pool, r, i, d[i]) for i, r in enumerate(RESOURCES)]
        return min(verdicts, key=lambda a: _RANK[a.verdict])

    def _one(self, spec: QueueSpec, pool: str, r: Resource, i: int, need: int) -> Admission:
        pq = spec.quota(pool)
        if not pq.limits(r) or need == 0:
            return Admission(Verdict.FITS, spec.name)
        after = self.of_queue(spec.name, pool)[i] + need
        nominal = pq.owned(r)
        over = after > nominal
        if over:
            refused = self._beyond(spec, pq, r, after, need)
            if refused is not None:
                return refused
        if spec.cohort is None:
            return Admission(Verdict.FITS, spec.name)
        room = self.room(spec.cohort, pool, r, i, spec.name)
        claim = max(0, after - pq.guaranteed(r))
        if claim <= room:
            return Admission(Verdict.BORROWS if over else Verdict.FITS, spec.name)
        left = max(0, room - (claim - need))
        if over:
            return Admission(Verdict.TO_BORROW, spec.name, self._no_room(spec, r, left, need))
        short = claim - room if r is Resource.GPUS else 0
        return Admission(Verdict.RECLAIM, spec.name, self._owed(spec, r, claim - room), short)

    def _beyond(
        self, spec: QueueSpec, pq: PoolQuota, r: Resource, after: int, need: int
    ) -> Admission | None:
        unit, nominal = UNITS[r], pq.owned(r)
        where = f"queue {spec.name} in pool {pq.pool}"
        if spec.cohort is None:
            text = f"{where}: {after - need} of {nominal} {unit} in use, the gang needs {need}"
            return Admission(Verdict.EXCEEDS, spec.name, text + "; no cohort to borrow from")
        limit = pq.may_borrow(r)
        if limit is not None and after - nominal > limit:
            text = (
                f"{where}: {after - need} {unit} in use of {nominal} nominal + {limit} "
                f"borrowing limit, the gang needs {need}"
            )
            return Admission(Verdict.EXCEEDS, spec.name, text)
        return None

    def room(self, cohort: str, pool: str, r: Resource, i: int, asking: str) -> int:
        """What the cohort's members lend that no member but `asking` claims."""
        capacity, claimed = 0, 0
        for m in self.teams.members(cohort):
            pq = m.quota(pool)
            if not pq.limits(r):
                continue
            capacity += pq.lendable(r)
            if m.name != asking:
                claimed += max(0, self.of_queue(m.name, pool)[i] - pq.guaranteed(r))
        return capacity - claimed

    def capacity(self, cohort: str | None, pool: str, r: Resource) -> int:
        members = self.teams.members(cohort)
        return sum(m.quota(pool).lendable(r) for m in members if m.quota(pool).limits(r))

    def _no_room(self, spec: QueueSpec, r: Resource, left: int, need: int) -> str:
        return (
            f"cohort {spec.cohort} has {left} {UNITS[r]} left to lend to queue {spec.name}, "
            f"the gang needs {need}"
        )

    def _owed(self, spec: QueueSpec, r: Resource, short: int) -> str:
        return (
            f"queue {spec.name} is within its nominal quota but others borrow it: "
            f"{short} {UNITS[r]} to take back"
        )

    # fair sharing
    def share(self, queue: str, pool: str, d: Demand = (0, 0, 0)) -> float:
        """The queue's dominant borrowed share with `d` added, over its weight."""
        spec = self.teams.by_name[queue]
        pq, used, top = spec.quota(pool), self.of_queue(queue, pool), 0.0
        for i, r in enumerate(RESOURCES):
            capacity = self.capacity(spec.cohort, pool, r)
            if pq.limits(r) and capacity > 0:
                top = max(top, max(0, used[i] + d[i] - pq.owned(r)) / capacity)
        return top / spec.weight


_RANK = {
    Verdict.EXCEEDS: 0,
    Verdict.TO_BORROW: 1,
    Verdict.RECLAIM: 2,
    Verdict.BORROWS: 3,
    Verdict.FITS: 4,
}


def borrowing(
    teams: Teams, running: Iterable[Running], pool: str, queue_of: Mapping[str, str | None]
) -> set[str]:
    """The running gangs of `pool` beyond their queue's nominal GPUs, the latest started
    first: their queue's earlier gangs fill its nominal quota (`queue_of`: gang key -> queue)."""
    by_queue: dict[str, list[Running]] = {}
    for r in running:
        q = queue_of.get(r.key)
        if r.gang.pool == pool and q is not None:
            by_queue.setdefault(q, []).append(r)
    out: set[str] = set()
    for q, gangs in by_queue.items():
        nominal, total = teams.by_name[q].quota(pool).owned(Resource.GPUS), 0
        for r in sorted(gangs, key=lambda r: (r.started_s, r.key)):
            total += demand(r.gang)[0]
            if total > nominal:
                out.add(r.key)
    return out
