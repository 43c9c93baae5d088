"""What each team queue is charged, and which running gangs borrow.

Contract. Takes the teams (the operator's Queues, read every cycle), what the driver says holds
quota beside its running gangs (running pod groups, and pods on their way out, which keep their
quota until they are gone), the running gangs and the fabric's host pools. Decides the queue
each running gang is charged to: the one that admitted it (`Running.admitted`), whatever has
become of the Queues since; a gang whose admitting queue is gone is charged nowhere; one with
none recorded, the queue a queued gang of its name and namespace would belong to. With pool
lending on, what a gang uses of another pool's lent hosts is charged to that pool's quota
(queue/teams/lent.py). Promises: `usage` is the ledger's input, `numbers` what each Queue shows,
both from the same charges; `beyond` lists, per pool, the running gangs beyond their queue's
nominal GPUs (a queue's gangs in start order fill its nominal, the rest borrow), the latest
started first, at most `CANDIDATES`; `still_borrows` is Kueue's rule that a victim's queue must
still use more than its nominal quota when it is evicted. Admission, borrowing and reclaim that
use these are queue/teams/queues.py's."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.queue.cycle import Cycle
from scheduler.queue.lending import pools_lend
from scheduler.queue.running import Owner, RunningGangs
from scheduler.queue.teams.lent import Lent, Usage
from scheduler.queue.teams.quotas import Demand, Table
from scheduler.queue.types import Entry, QueueConfig, Running
from scheduler.teams import Teams

# queue named, tenant, pool, demand, queue that admitted it ("": not recorded)
Charge = tuple[str, str, str, Demand, str]
CANDIDATES = 256  # borrowing gangs a reclaim chooses among, the latest started first


@dataclass(frozen=True)
class Numbers:
    """What a queue uses and waits for, as of the last cycle's running gangs."""

    used: dict[str, list[int]] = field(default_factory=dict)  # pool -> GPUs, millicores, MiB
    pending: int = 0
    admitted: int = 0
    oldest: float | None = None  # its longest-waiting gang's arrival (the queue's clock)
    leaving: int = 0  # gangs whose pods are on their way out, still holding their quota


@dataclass
class TeamUse:
    config: QueueConfig
    teams: Teams = field(init=False)
    table: Table = field(init=False)  # the teams' limits, read once per Teams
    charged: tuple[Charge, ...] = ()
    leaving: tuple[Charge, ...] = ()  # pods on their way out, still holding their quota
    lent: Lent = field(default_factory=Lent)  # the gangs on lent hosts as the cycle began
    host_pool: Mapping[str, str] = field(default_factory=dict)  # the last cycle's fabric's
    # what `lent` was read from: the running gangs and their version, the host pools, the teams
    lent_from: tuple[RunningGangs | None, int, Mapping[str, str] | None, Teams | None] = (
        None,
        -1,
        None,
        None,
    )

    def __post_init__(self) -> None:
        self.use(self.config.teams)

    def use(
        self, teams: Teams, charged: Sequence[Charge] = (), leaving: Sequence[Charge] = ()
    ) -> bool:
        """The teams as they are now (the operator reads its Queue objects every cycle), and
        gangs the driver does not list as running that hold resources all the same: running
        pod groups (`charged`) and pods on their way out (`leaving`: their quota is released
        when they are gone, not when their deletion was asked for), (queue named, tenant,
        pool, demand, queue admitted) each, charged to their queue. True when the teams
        changed."""
        self.charged, self.leaving = tuple(charged), tuple(leaving)
        if getattr(self, "teams", None) == teams:
            return False
        self.teams = teams
        self.table = Table(teams)
        return True

    def queue_of(self, queue: str, tenant: str) -> str | None:
        return self.teams.queue_of(queue, tenant)

    def charged_to(self, queue: str, tenant: str, admitted: str = "") -> str | None:
        """The queue a running gang is charged to: the one that admitted it, for as long as
        that Queue is known (held or not: an edit or a deletion moves no charge); a gang
        whose admitting queue is gone is charged nowhere; unrecorded, found as for a queued
        gang."""
        if admitted:
            return admitted if admitted in self.teams.by_name else None
        return self.teams.queue_of(queue, tenant)

    def _of(self, r: Running) -> str | None:
        return self.charged_to(r.queue, r.tenant, r.admitted)

    def numbers(self, running: RunningGangs, waiting: Iterable[Entry]) -> dict[str, Numbers]:
        """Per queue: use per pool (GPUs, millicores, MiB; pods on their way out included), gangs
        waiting, gangs running (the charged ones included), the arrival of its longest-waiting
        gang, and gangs whose pods are on their way out."""
        used: dict[str, dict[str, list[int]]] = {}
        counts: dict[str, list[int]] = {}  # queue -> [waiting, running, leaving]
        for name, pool, amounts in [*self.usage(running), *self._lent_of(running).moves()]:
            if name is not None:
                mine = used.setdefault(name, {}).setdefault(pool, [0, 0, 0])
                for i, v in enumerate(amounts):
                    mine[i] += v
        ones = [self._of(r) for r in running]
        ones += [self.charged_to(q, tenant, a) for q, tenant, _, _, a in self.charged]
        for name in ones:
            if name is not None:
                counts.setdefault(name, [0, 0, 0])[1] += 1
        for q, tenant, _, _, a in self.leaving:
            name = self.charged_to(q, tenant, a)
            if name is not None:
                counts.setdefault(name, [0, 0, 0])[2] += 1
        oldest: dict[str, float] = {}
        for e in waiting:  # each waiting gang's queue found once: its count and its arrival
            name = self.queue_of(e.queue, e.tenant)
            if name is not None:
                counts.setdefault(name, [0, 0, 0])[0] += 1
                oldest[name] = min(oldest.get(name, e.arrival), e.arrival)
        out = {}
        for n in set(used) | set(counts):
            pending, admitted, leaving = counts.get(n, [0, 0, 0])
            out[n] = Numbers(used.get(n, {}), pending, admitted, oldest.get(n), leaving)
        return out

    def usage(self, running: RunningGangs) -> list[tuple[str | None, str, Demand]]:
        """(queue, pool, demand) of each owner of running gangs, of each charged group and of
        each owner of pods on their way out."""
        owners = [
            (q, t, pool, (d[0], d[1], d[2]), a) for (pool, t, q, a), d in running.demands().items()
        ]
        return [
            (self.charged_to(q, t, a), pool, d)
            for q, t, pool, d, a in [*owners, *self.charged, *self.leaving]
        ]

    def lent_now(self, c: Cycle) -> list[Usage]:
        """The running gangs on lent hosts, each lent part charged to the lender pool's quota
        (queue/teams/lent.py); none when pools do not lend."""
        self.host_pool = c.work.fabric.host_pool
        return self._lent_of(c.index).moves()

    def _lent_of(self, running: RunningGangs) -> Lent:
        """`lent`, read again only when the running gangs, the host pools or the teams changed
        (a cycle, the Queues' numbers and the borrowers' list ask of the same gangs)."""
        index, version, pools, teams = self.lent_from
        same = index is running and version == running.version
        if not (same and pools is self.host_pool and teams is self.teams):
            self.lent_from = (running, running.version, self.host_pool, self.teams)
            self.lent = Lent()
            if pools_lend(self.config):
                pairs = [(r, self._of(r)) for r in running]
                self.lent = Lent.of(self.host_pool, pairs)
        return self.lent

    def _owners(self, index: RunningGangs, pool: str) -> dict[str, list[Owner]]:
        owners: dict[str, list[Owner]] = {}
        for owner in index.demands():
            name = self.charged_to(owner[2], owner[1], owner[3])
            if owner[0] == pool and name is not None:
                owners.setdefault(name, []).append(owner)
        return owners

    def _names(self, index: RunningGangs, pool: str) -> set[str]:
        """The queues using the pool's quota: with gangs of the pool, or on its lent hosts."""
        return set(self._owners(index, pool)) | {q for q, p in self.lent.into if p == pool}

    def _used(self, index: RunningGangs, pool: str, name: str) -> int:
        """The GPUs a queue's running gangs use of the pool's quota (lent hosts: the lender's)."""
        own = _gpus(index, self._owners(index, pool).get(name, []))
        return own - self.lent.out.get((name, pool), 0) + self.lent.into.get((name, pool), 0)

    def still_borrows(self, c: Cycle, r: Running, pool: str) -> bool:
        """Whether the victim's queue uses more than its nominal quota of the pool it is taken
        back for now (the gangs started this cycle counted, those evicted not): Kueue's rule
        for reclaiming within a cohort."""
        name = self._of(r)
        if name is None:
            return False
        host_pool = c.work.fabric.host_pool
        used = self._used(c.index, pool, name)
        used -= sum(self.lent.gpus_in(g, pool, host_pool) for g in c.gone() if self._mine(g, name))
        used += sum(self.lent.gpus_in(g, pool, host_pool) for g in c.started if self._mine(g, name))
        return used > self.table.of(name, pool).nominal[0]

    def _mine(self, r: Running, name: str) -> bool:
        return self._of(r) == name

    def beyond_all(self, index: RunningGangs) -> dict[str, str]:
        """Every running gang beyond its queue's nominal quota, with its queue."""
        if not self.teams.on:
            return {}
        self._lent_of(index)  # `_names` and `_latest` read it
        out: dict[str, str] = {}
        pools = {owner[0] for owner in index.demands()} | {p for _, p in self.lent.into}
        for pool in pools:
            for name in self._names(index, pool):
                out.update((r.key, name) for r in self._latest(index, pool, name))
        return out

    def beyond(self, index: RunningGangs, pool: str) -> list[Running]:
        """At most `CANDIDATES`, the latest started first across queues (bounded work: a
        pool where thousands of gangs borrow is not read whole every cycle)."""
        streams = [self._latest(index, pool, name) for name in sorted(self._names(index, pool))]
        merged = heapq.merge(*streams, key=lambda r: (r.started_s, r.key), reverse=True)
        return list(itertools.islice(merged, CANDIDATES))

    def _latest(self, index: RunningGangs, pool: str, name: str) -> Iterator[Running]:
        """A queue's gangs beyond its nominal GPUs of the pool, the latest started first (its
        gangs on the pool's lent hosts among them)."""
        left = self._used(index, pool, name) - self.table.of(name, pool).nominal[0]
        owners = self._owners(index, pool).get(name, [])
        lent = sorted(self.lent.gangs.get((name, pool), []))
        starts = [*(index.latest(o) for o in owners), reversed(lent)]
        for _, key in heapq.merge(*starts, reverse=True):
            if left <= 0:
                return
            r = index.gangs.get(key)
            if r is not None and self.lent.uses(r, pool):
                yield r
                left -= self.lent.gpus_in(r, pool)


def _gpus(index: RunningGangs, owners: Iterable[Owner]) -> int:
    """The GPUs these owners' running gangs hold."""
    return sum(index.demands()[o][0] for o in owners)
