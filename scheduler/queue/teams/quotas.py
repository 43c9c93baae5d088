"""Quota accounting: what each queue uses of each pool, and whether a gang may start by quota.

Contract. Takes the teams' specs (teams.py) and what every queue uses of every pool now (the
running gangs, and the gangs holding hosts while they wait for them). `admit` decides, for a
gang of a queue and pool, one of:
- FITS: the queue's use stays within its nominal quota, and the cohort has room for it;
- BORROWS: beyond nominal, within the queue's borrowing limit, and the cohort's members lend
  enough that no one else uses;
- EXCEEDS (QuotaExceeded): past the borrowing limit, the queue has no cohort to borrow from, or
  it holds (`stopPolicy: Hold`: it admits nothing new);
- TO_BORROW (WaitingToBorrow): it may borrow, but the cohort's lendable capacity is in use;
- RECLAIM: within nominal, but others borrow what the queue lends: `short` GPUs must be taken
  back from borrowing gangs first.
Per resource (GPUs always; CPU and memory where the queue's quota gives them) the cohort's capacity
is the sum of its members' lendable quota (nominal, or the lending limit), and a member's claim on
it is what it uses beyond what it keeps for itself (nominal less lendable), as Kueue counts them.
`share` is a queue's dominant borrowed share (beyond nominal, over the cohort's capacity, by
resource, the largest) divided by its weight: fair sharing orders borrowers by it. (Which running
gangs borrow, and so may be reclaimed, is teams/queues.py's: a queue's gangs in start order fill its
nominal GPUs, the rest borrow.) Promises: a gang admitted FITS or BORROWS never takes a queue past
its nominal plus borrowing limit, nor a cohort past its capacity, on the usage given; every verdict
but FITS and BORROWS carries a message with the numbers that decide it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from scheduler.model.gang import GangRequest
from scheduler.teams import QueueSpec, Resource, Teams

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


@dataclass(frozen=True)
class Limits:
    """One queue's quota of one pool, per resource in RESOURCES' order (read once)."""

    queue: str
    cohort: str | None
    weight: float
    limited: tuple[bool, ...]
    nominal: tuple[int, ...]
    lendable: tuple[int, ...]
    guaranteed: tuple[int, ...]
    borrow: tuple[int | None, ...]

    @classmethod
    def of(cls, spec: QueueSpec, pool: str) -> Limits:
        q = spec.quota(pool)
        return cls(
            spec.name,
            spec.cohort,
            spec.weight,
            tuple(q.limits(r) for r in RESOURCES),
            tuple(q.owned(r) for r in RESOURCES),
            tuple(q.lendable(r) for r in RESOURCES),
            tuple(q.guaranteed(r) for r in RESOURCES),
            tuple(q.may_borrow(r) for r in RESOURCES),
        )

    def claim(self, used: list[int], i: int) -> int:
        """What this queue's use takes of its cohort's lendable capacity."""
        return max(0, used[i] - self.guaranteed[i]) if self.limited[i] else 0


@dataclass
class Table:
    """The teams' limits per (queue, pool) and cohorts' capacity per (cohort, pool)."""

    teams: Teams
    limits: dict[tuple[str, str], Limits] = field(default_factory=dict)
    capacities: dict[tuple[str, str], tuple[int, ...]] = field(default_factory=dict)

    def of(self, queue: str, pool: str) -> Limits:
        found = self.limits.get((queue, pool))
        if found is None:
            found = self.limits[(queue, pool)] = Limits.of(self.teams.by_name[queue], pool)
        return found

    def capacity(self, cohort: str, pool: str) -> tuple[int, ...]:
        found = self.capacities.get((cohort, pool))
        if found is None:
            members = [self.of(m.name, pool) for m in self.teams.members(cohort)]
            found = tuple(
                sum(m.lendable[i] for m in members if m.limited[i]) for i in range(len(RESOURCES))
            )
            self.capacities[(cohort, pool)] = found
        return found


@dataclass
class Ledger:
    """Use per (queue, pool), and each cohort's claims on what its members lend, kept up to
    date through a cycle's starts."""

    table: Table
    used: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    claims: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # (cohort, pool)
    version: int = 0
    _memo: dict[tuple[str | None, str, Demand], tuple[int, Admission]] = field(default_factory=dict)

    @classmethod
    def of(cls, table: Table | Teams, usage: Iterable[tuple[str | None, str, Demand]]) -> Ledger:
        """From (queue, pool, demand) triples; gangs of no queue count nowhere."""
        out = cls(table if isinstance(table, Table) else Table(table))
        for queue, pool, d in usage:
            if queue is not None:
                out.add(queue, pool, d)
        return out

    @property
    def teams(self) -> Teams:
        return self.table.teams

    def add(self, queue: str, pool: str, d: Demand, sign: int = 1) -> None:
        if queue not in self.teams.by_name:
            return
        limits = self.table.of(queue, pool)
        found = self.used.setdefault((queue, pool), [0, 0, 0])
        before = [limits.claim(found, i) for i in range(len(RESOURCES))]
        for i, v in enumerate(d):
            found[i] += sign * v
        if limits.cohort is not None:
            claims = self.claims.setdefault((limits.cohort, pool), [0, 0, 0])
            for i in range(len(RESOURCES)):
                claims[i] += limits.claim(found, i) - before[i]
        self.version += 1

    def of_queue(self, queue: str, pool: str) -> list[int]:
        return self.used.get((queue, pool), [0, 0, 0])

    # admission
    def admit(self, queue: str | None, pool: str, d: Demand) -> Admission:
        known = self._memo.get((queue, pool, d))
        if known is not None and known[0] == self.version:
            return known[1]
        found = self._admit(queue, pool, d)
        self._memo[(queue, pool, d)] = (self.version, found)
        return found

    def _admit(self, queue: str | None, pool: str, d: Demand) -> Admission:
        if queue is None:
            return Admission(Verdict.EXCEEDS, None, "it belongs to no queue, and none is default")
        if self.teams.by_name[queue].holds:
            return Admission(Verdict.EXCEEDS, queue, _holding(queue))
        limits = self.table.of(queue, pool)
        verdicts = [self._one(limits, pool, i, d[i]) for i in range(len(RESOURCES))]
        return min(verdicts, key=lambda a: RANK[a.verdict])

    def _one(self, limits: Limits, pool: str, i: int, need: int) -> Admission:
        if not limits.limited[i] or need == 0:
            return Admission(Verdict.FITS, limits.queue)
        used = self.of_queue(limits.queue, pool)
        after = used[i] + need
        over = after > limits.nominal[i]
        if over:
            refused = self._beyond(limits, pool, i, after, need)
            if refused is not None:
                return refused
        if limits.cohort is None:
            return Admission(Verdict.FITS, limits.queue)
        room = self.room(limits, pool, i)
        claim = max(0, after - limits.guaranteed[i])
        if claim <= room:
            return Admission(Verdict.BORROWS if over else Verdict.FITS, limits.queue)
        r = RESOURCES[i]
        if over:
            left = max(0, room - limits.claim(used, i))
            return Admission(Verdict.TO_BORROW, limits.queue, _no_room(limits, r, left, need))
        short = claim - room if r is Resource.GPUS else 0
        return Admission(Verdict.RECLAIM, limits.queue, _owed(limits, r, claim - room), short)

    def _beyond(self, limits: Limits, pool: str, i: int, after: int, need: int) -> Admission | None:
        unit, nominal = UNITS[RESOURCES[i]], limits.nominal[i]
        where = f"queue {limits.queue} in pool {pool}"
        if limits.cohort is None:
            text = f"{where}: {after - need} of {nominal} {unit} in use, the gang needs {need}"
            return Admission(Verdict.EXCEEDS, limits.queue, text + "; no cohort to borrow from")
        limit = limits.borrow[i]
        if limit is not None and after - nominal > limit:
            text = (
                f"{where}: {after - need} {unit} in use of {nominal} nominal + {limit} "
                f"borrowing limit, the gang needs {need}"
            )
            return Admission(Verdict.EXCEEDS, limits.queue, text)
        return None

    def never(self, queue: str, pool: str, d: Demand) -> str | None:
        """Why no use of the cohort could ever let the queue hold this much: beyond its nominal
        quota plus its borrowing limit, or, in a cohort, plus all its cohort lends (None: some
        state of the others would)."""
        if self.teams.by_name[queue].holds:
            return None
        limits = self.table.of(queue, pool)
        for i, r in enumerate(RESOURCES):
            top = self._top(limits, pool, i)
            if limits.limited[i] and d[i] > top:
                return (
                    f"queue {queue} can never hold more than {top} {UNITS[r]} of pool {pool} "
                    f"(its nominal quota and all it may borrow), the gang needs {d[i]}"
                )
        return None

    def _top(self, limits: Limits, pool: str, i: int) -> int:
        """The most the queue may ever use of resource i."""
        if limits.cohort is None:
            return limits.nominal[i]
        top = self.table.capacity(limits.cohort, pool)[i] + limits.guaranteed[i]
        borrow = limits.borrow[i]
        return top if borrow is None else min(top, limits.nominal[i] + borrow)

    def room(self, limits: Limits, pool: str, i: int) -> int:
        """What the cohort's members lend that no member but this one claims."""
        assert limits.cohort is not None
        capacity = self.table.capacity(limits.cohort, pool)[i]
        claims = self.claims.get((limits.cohort, pool), [0, 0, 0])[i]
        mine = limits.claim(self.of_queue(limits.queue, pool), i)
        return capacity - (claims - mine)

    # fair sharing
    def share(self, queue: str, pool: str, d: Demand = (0, 0, 0)) -> float:
        """The queue's dominant borrowed share with `d` added, over its weight."""
        limits, used, top = self.table.of(queue, pool), self.of_queue(queue, pool), 0.0
        if limits.cohort is None:
            return 0.0
        capacity = self.table.capacity(limits.cohort, pool)
        for i in range(len(RESOURCES)):
            if limits.limited[i] and capacity[i] > 0:
                top = max(top, max(0, used[i] + d[i] - limits.nominal[i]) / capacity[i])
        return top / limits.weight


def _holding(queue: str) -> str:
    return (
        f"queue {queue} holds (stopPolicy Hold, or its Queue is invalid or being deleted: see "
        "its Ready condition): it keeps the gangs it admitted and admits no new one"
    )


def _no_room(limits: Limits, r: Resource, left: int, need: int) -> str:
    return (
        f"cohort {limits.cohort} has {left} {UNITS[r]} left to lend to queue {limits.queue}, "
        f"the gang needs {need}"
    )


def _owed(limits: Limits, r: Resource, short: int) -> str:
    return (
        f"queue {limits.queue} is within its nominal quota but others borrow it: "
        f"{short} {UNITS[r]} to take back"
    )


RANK = {
    Verdict.EXCEEDS: 0,
    Verdict.TO_BORROW: 1,
    Verdict.RECLAIM: 2,
    Verdict.BORROWS: 3,
    Verdict.FITS: 4,
}
