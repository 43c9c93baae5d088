"""How fast each job's communication goes when jobs share the fabric, by what they demand.

Contract. Takes the wires (links.py) and, as jobs start and stop, each job's GB per step on
every resource it touches (loads.py). Decides each job's speed in (0, 1]: its demand on a
resource is the bandwidth it uses there running alone, at the rate its own bottleneck allows;
speeds are max-min fair, raised together until a resource fills (the sum of speed x demand
reaches its capacity) or a job reaches 1. A change moves only the jobs connected to it through
shared resources, and only those are computed again. Promises: no resource carries more than
its capacity; a job that shares no resource runs at speed 1; its step's communication takes
its lone time over its speed.

Assumptions, stated: a job's classes run one after another (its lone communication time is the
sum of each class's bottleneck time, loads.StepLoad), and its demand on a resource is its
step's bytes there over that time, which averages the phases over the step; traffic inside
a GPU is free; no two jobs share a GPU, so NVLink ports are never shared. Max-min fair
sharing of links among jobs as in Crux (Cao et al., SIGCOMM'24); flows hashed onto paths, a
collective as fast as its slowest flow, as Meta's RoCE fabric reports (Gangidi et al.,
SIGCOMM'24).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from scheduler.topology.links import Resource, Wires
from scheduler.topology.loads import Load, StepLoad


@dataclass(frozen=True)
class Demand:
    load: Load  # GB per step per resource
    alone: float  # seconds of communication per step with the fabric to itself

    def rate(self, resource: Resource) -> float:
        return self.load[resource] / self.alone


class Sharing:
    def __init__(self, wires: Wires) -> None:
        self.wires = wires
        self.jobs: dict[int, Demand] = {}
        self.users: dict[Resource, set[int]] = {}
        self.speed: dict[int, float] = {}

    def add(self, job: int, step: StepLoad) -> set[int]:
        """A job starts; returns the jobs whose speed may have changed (itself included)."""
        load = step.total
        demand = Demand(load, step.seconds(self.wires))
        self.jobs[job] = demand
        self.speed[job] = 1.0
        if demand.alone <= 0:
            return {job}
        for resource in load:
            self.users.setdefault(resource, set()).add(job)
        return self._refill({job})

    def remove(self, job: int) -> set[int]:
        """A job stops; returns the jobs whose speed may have changed."""
        demand = self.jobs.pop(job, None)
        self.speed.pop(job, None)
        neighbours: set[int] = set()
        for resource in demand.load if demand and demand.alone > 0 else ():
            users = self.users[resource]
            users.discard(job)
            neighbours |= users
            if not users:
                del self.users[resource]
        return self._refill(neighbours) if neighbours else set()

    def comm_seconds(self, job: int) -> float:
        return self.jobs[job].alone / self.speed[job]

    def _refill(self, seeds: set[int]) -> set[int]:
        jobs = self._component(seeds)
        demand = {j: self.jobs[j] for j in jobs}
        self.speed.update(water_fill(demand, self.users, self.wires.capacity))
        return jobs

    def _component(self, seeds: set[int]) -> set[int]:
        """Jobs connected to the seeds through shared resources: the only ones a change moves."""
        seen, todo = set(seeds), list(seeds)
        while todo:
            for resource in self.jobs[todo.pop()].load:
                for other in self.users.get(resource, set()) - seen:
                    seen.add(other)
                    todo.append(other)
        return seen


def stretch(share: float, compact: float, actual: float, overlap: float = 0.0) -> float:
    """Step time over a compact step's: compute (1 - s) plus exposed communication s, at the
    actual communication time against the compact one. With `overlap` o of the communication
    hidden behind compute at the compact time, the window it hid in stays as long: the
    exposed part grows by all of the slowdown, s (actual / compact - 1) / (1 - o)."""
    if share == 0.0 or compact <= 0.0:
        return 1.0
    if overlap == 0.0:  # kept as it was written, so runs without overlap repeat to the digit
        return max(1.0, (1.0 - share) + share * actual / compact)
    return max(1.0, 1.0 + share * (actual / compact - 1.0) / (1.0 - overlap))


def water_fill(
    demand: Mapping[int, Demand],
    users: Mapping[Resource, set[int]],
    capacity: Callable[[Resource], float],
) -> dict[int, float]:
    """Max-min fair speeds in [0, 1]: raise every unfrozen job's speed together until a
    resource fills (its jobs freeze) or a job reaches 1."""
    speed = dict.fromkeys(demand, 0.0)
    left = {r: capacity(r) for d in demand.values() for r in d.load}
    active = set(demand)
    while active:
        rates = {r: sum(demand[j].rate(r) for j in users[r] if j in active) for r in left}
        step = min([1.0 - speed[j] for j in active] + [left[r] / x for r, x in rates.items() if x])
        step = max(step, 0.0)
        for j in active:
            speed[j] += step
        for r, x in rates.items():
            left[r] -= step * x
        full = {r for r, x in rates.items() if x and left[r] <= 1e-9 * (1 + capacity(r))}
        active = {j for j in active if speed[j] < 1 - 1e-12 and not full & demand[j].load.keys()}
    return speed
