"""Shared links: how fast each running gang's ring really goes when others cross the same links.

Contract. Takes the fabric, a fabric profile (simulation/profiles.py) and, as jobs start and
stop, each job's ring: the links it crosses and its uncontended rate (slowdown.uncontended_gbps:
the NIC rate, or NVLink inside one NVLink domain). Decides every job's ring rate as the max-min
fair allocation (water-filling) over the links it crosses, recomputed at each start and stop
for the jobs connected to the change through shared links. Promises: no link carries more than
its (usable) capacity; no job exceeds its uncontended rate; a job that shares no link runs at
exactly its uncontended rate, so a lone ring is never slowed, wherever it goes.

Model and its assumptions (docs/design.md, "The fabric model"):
- the links that leave a domain D of level l (l >= the NVLink level: the hosts' NICs, then the
  ToR, spine and core uplinks) carry hosts(D) x the level's per-host bandwidth / the profile's
  oversubscription at l; at the NVLink level that is the host's NIC, which every pod on the
  host that talks to another host shares;
- with depth-first ranks a ring spanning k >= 2 domains of level l enters and leaves each of
  them once, so it is one flow (per direction) through the links of every domain of level l
  it has pods in; links are full duplex and both directions carry the same load;
- a ring runs at the rate of its slowest edge, so a job's rate is one number across its links;
- with ECMP at a level, that level's usable capacity depends on how many flows it carries
  (profiles.ecmp_capacity);
- traffic inside a host or NVLink domain is not contended.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from scheduler.model.topology import Tier
from scheduler.simulation.profiles import FabricProfile, ecmp_capacity
from scheduler.simulation.slowdown import nic_gbps
from scheduler.topology.fabric import Fabric

Link = tuple[int, int]  # (level, domain)
NVLINK = Tier.NVLINK


@dataclass
class Network:
    fabric: Fabric
    profile: FabricProfile = field(default_factory=FabricProfile)
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
        """Usable capacity of a link with the flows it carries now."""
        full = self.full_capacity(link)
        if self.fabric.levels[link[0]] not in self.profile.ecmp:
            return full
        return ecmp_capacity(full, nic_gbps(self.fabric), len(self.users.get(link, ())))

    def full_capacity(self, link: Link) -> float:
        """hosts below x per-host bandwidth / oversubscription, at the link's level."""
        if link not in self._capacity:
            level, domain = link
            spec = self.fabric.spec.levels[level]
            hosts = sum(1 for h in self.fabric.domain[level] if h == domain)
            ratio = self.profile.oversubscription(level, spec.oversubscription, spec.name)
            self._capacity[link] = hosts * spec.bandwidth_gbps / ratio
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
