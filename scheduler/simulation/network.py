"""Shared uplinks: how fast each running gang's ring really goes when others cross the same links.

Contract. Takes the fabric and, as jobs start and stop, each job's ring: the domains it crosses
and its uncontended rate (the bandwidth of the highest level it spans, as `slowdown` has it).
Decides every job's ring rate as the max-min fair allocation (water-filling) over the uplinks
it crosses, recomputed at each start and stop for the jobs connected to the change through
shared uplinks. Promises: no uplink carries more than its capacity; no job exceeds its
uncontended rate; a job sharing nothing runs at exactly its uncontended rate, so without
contention the model reduces to the per-job slowdown model.

Model and its assumptions (documented in docs/simulation.md):
- the uplink of a domain D at level l (l >= the NVLink level: the hosts' NICs, the ToR, spine
  and core uplinks) has capacity hosts(D) x the per-host bandwidth of level l divided by its
  oversubscription (LevelSpec.effective_gbps);
- with depth-first ranks a ring spanning k >= 2 domains of level l enters and leaves each of
  them once, so it is one flow (per direction) through the uplink of every domain of level l it
  has pods in; links are full duplex and the two directions carry the same load;
- a ring runs at the rate of its slowest edge, so a job's rate is one number across its links;
- traffic inside a host or NVLink domain is not contended.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from scheduler.model.topology import Tier
from scheduler.topology.fabric import Fabric

Link = tuple[int, int]  # (level, domain)
NVLINK = Tier.NVLINK


@dataclass
class Network:
    fabric: Fabric
    caps: dict[int, float] = field(default_factory=dict)  # job -> uncontended rate
    links: dict[int, tuple[Link, ...]] = field(default_factory=dict)  # job -> links it crosses
    users: dict[Link, set[int]] = field(default_factory=dict)  # link -> jobs crossing it
    rates: dict[int, float] = field(default_factory=dict)  # job -> current rate
    _capacity: dict[Link, float] = field(default_factory=dict)

    def crossed(self, hosts: Iterable[int]) -> tuple[Link, ...]:
        """The uplinks a ring over these hosts crosses (none for a single NVLink domain)."""
        hosts = list(hosts)
        out: list[Link] = []
        for level in range(NVLINK, self.fabric.depth):
            domains = {self.fabric.domain[level][h] for h in hosts}
            if len(domains) >= 2:
                out += [(level, d) for d in sorted(domains)]
        return tuple(out)

    def capacity(self, link: Link) -> float:
        if link not in self._capacity:
            level, domain = link
            hosts = sum(1 for h in self.fabric.domain[level] if h == domain)
            self._capacity[link] = hosts * self.fabric.gbps[level]
        return self._capacity[link]

    def start(self, job: int, cap: float, links: tuple[Link, ...]) -> set[int]:
        """Add a job; returns the jobs whose rate may have changed (itself included)."""
        self.caps[job] = cap
        self.links[job] = links
        for link in links:
            self.users.setdefault(link, set()).add(job)
        return self._refill({job})

    def stop(self, job: int) -> set[int]:
        """Remove a job; returns the jobs whose rate may have changed."""
        links = self.links.pop(job, ())
        self.caps.pop(job, None)
        self.rates.pop(job, None)
        neighbours: set[int] = set()
        for link in links:
            users = self.users[link]
            users.discard(job)
            neighbours |= users
            if not users:
                del self.users[link]
        return self._refill(neighbours) if neighbours else set()

    def _component(self, seeds: set[int]) -> set[int]:
        """Jobs connected to the seeds through shared links: the only ones a change can move."""
        seen, todo = set(seeds), list(seeds)
        while todo:
            for link in self.links.get(todo.pop(), ()):
                for other in self.users[link] - seen:
                    seen.add(other)
                    todo.append(other)
        return seen

    def _refill(self, seeds: set[int]) -> set[int]:
        jobs = self._component(seeds)
        self.rates.update(water_fill(jobs, self.caps, self.links, self.users, self.capacity))
        return jobs


def water_fill(
    jobs: set[int],
    caps: dict[int, float],
    links: dict[int, tuple[Link, ...]],
    users: dict[Link, set[int]],
    capacity: Callable[[Link], float],
) -> dict[int, float]:
    """Max-min fair rates: raise every unfrozen job's rate together until a link fills (its
    jobs freeze) or a job reaches its cap (it freezes)."""
    rate = dict.fromkeys(jobs, 0.0)
    active = set(jobs)
    left = {link: capacity(link) for j in jobs for link in links[j]}
    while active:
        counts = {link: sum(1 for j in users[link] if j in active) for link in left}
        step = min(caps[j] - rate[j] for j in active)
        for link, n in counts.items():
            if n:
                step = min(step, left[link] / n)
        for j in active:
            rate[j] += step
        for link, n in counts.items():
            left[link] -= step * n
        full = {link for link, room in left.items() if room <= 1e-9 and counts[link]}
        active = {
            j
            for j in active
            if rate[j] < caps[j] - 1e-9 and not any(link in full for link in links[j])
        }
    return rate
