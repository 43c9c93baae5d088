"""Team quotas on lent hosts: what a gang uses of another pool's hosts is charged to that pool.

Contract. Active when team queues and pool lending are both on. Takes the running gangs and the
fabric's host pools. Decides, for every running gang with pods on a lending pool's hosts, what
it uses of each pool's hosts (GPUs, millicores, MiB: its pods' requests, pod by pod), and keeps
it per gang, per (queue, lender pool) and per (queue, own pool). Why: as Kueue charges a
workload to the resource flavor it runs on, a training gang on online inference's lent hosts
uses online inference's quota, borrowed through its cohort (the queue that owns that quota
lends it, up to its lending limit), not its own training quota. Promises: each gang's parts sum
to its whole demand; a gang on its own pool's hosts only (or on hosts the fabric lacks) has no
entry: it is charged whole to its own pool, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scheduler.model.gang import GangRequest
from scheduler.model.placement import Placement
from scheduler.queue.teams.quotas import Demand
from scheduler.queue.types import Running

Usage = tuple[str | None, str, Demand]  # queue named, pool, demand


def demand_by_pool(
    host_pool: Mapping[str, str], gang: GangRequest, placement: Placement
) -> dict[str, Demand]:
    """What the placed gang uses of each pool's hosts, its pods' requests summed by pool."""
    parts: dict[str, list[int]] = {}
    for pod in placement.pods:
        q = gang.request(pod.role)
        found = parts.setdefault(host_pool[pod.host], [0, 0, 0])
        found[0] += q.gpus
        found[1] += q.cpu_milli
        found[2] += q.memory_mib
    return {pool: (d[0], d[1], d[2]) for pool, d in parts.items()}


def lent_parts(
    host_pool: Mapping[str, str], gang: GangRequest, placement: Placement
) -> dict[str, Demand] | None:
    """The gang's use by pool when some of it is on another pool's hosts; None when none is, or
    when some of its hosts are not on the fabric (the operator's nodes changed: it is counted
    whole in its own pool until they are)."""
    hosts = placement.hosts()
    if any(h not in host_pool for h in hosts) or all(host_pool[h] == gang.pool for h in hosts):
        return None
    return demand_by_pool(host_pool, gang, placement)


@dataclass
class Lent:
    """The running gangs on lent hosts, as of a cycle's start."""

    parts: dict[str, dict[str, Demand]] = field(default_factory=dict)  # gang key -> pool -> use
    owners: dict[str, tuple[str, str]] = field(default_factory=dict)  # key -> queue, own pool
    # (queue named, lender pool) -> (start, key) of the queue's gangs on the pool's lent hosts
    gangs: dict[tuple[str, str], list[tuple[float, str]]] = field(default_factory=dict)
    into: dict[tuple[str, str], int] = field(default_factory=dict)  # (queue, pool) -> GPUs lent
    out: dict[tuple[str, str], int] = field(default_factory=dict)  # (queue, own pool) -> elsewhere

    @classmethod
    def of(
        cls, host_pool: Mapping[str, str], running: Iterable[tuple[Running, str | None]]
    ) -> Lent:
        """From (running gang, its queue named) pairs; gangs of no queue count nowhere."""
        lent = cls()
        for r, name in running:
            parts = lent_parts(host_pool, r.gang, r.placement)
            if parts is not None and name is not None:
                lent.add(r, name, parts)
        return lent

    def add(self, r: Running, name: str, parts: dict[str, Demand]) -> None:
        self.parts[r.key] = parts
        self.owners[r.key] = (name, r.gang.pool)
        for pool, d in parts.items():
            if pool == r.gang.pool:
                continue
            self.gangs.setdefault((name, pool), []).append((r.started_s, r.key))
            self.into[(name, pool)] = self.into.get((name, pool), 0) + d[0]
            self.out[(name, r.gang.pool)] = self.out.get((name, r.gang.pool), 0) + d[0]

    def moves(self) -> list[Usage]:
        """Ledger corrections: each lent part taken off the gang's own pool's quota and charged
        to the lender pool's."""
        out: list[Usage] = []
        for key, parts in self.parts.items():
            name, own = self.owners[key]
            for pool, d in parts.items():
                if pool != own:
                    out.append((name, own, (-d[0], -d[1], -d[2])))
                    out.append((name, pool, d))
        return out

    def gpus_in(self, r: Running, pool: str, host_pool: Mapping[str, str] | None = None) -> int:
        """The GPUs the gang uses of the pool's hosts (read off its placement when it started
        after the cycle began and `host_pool` is given)."""
        parts = self.parts.get(r.key)
        if parts is None and host_pool is not None:
            parts = lent_parts(host_pool, r.gang, r.placement)
        if parts is None:
            return r.gang.all_gpus if r.gang.pool == pool else 0
        return parts.get(pool, (0, 0, 0))[0]

    def uses(self, r: Running, pool: str) -> bool:
        """Whether the gang has pods on the pool's hosts (as the cycle began)."""
        parts = self.parts.get(r.key)
        return r.gang.pool == pool if parts is None else pool in parts
