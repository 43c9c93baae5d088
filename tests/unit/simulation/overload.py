"""Seeded overloaded traces for replay tests: about three times a 192-GPU fabric's GPU-hours
within the window, so hundreds of gangs wait at once and backfill, reservations and (with
several priorities) preemption all happen."""

from __future__ import annotations

import random
from collections.abc import Sequence

from scheduler.simulation.trace import TraceJob
from scheduler.topology import Fabric

SIZES = (8, 8, 8, 16, 16, 32, 64, 96, 4, 2)


def overload(
    seed: int, n: int = 300, sizes: Sequence[int] = SIZES, priorities: Sequence[int] = (0,)
) -> list[TraceJob]:
    """Sorted by submit time: the simulator queues in list order."""
    rng = random.Random(seed)
    jobs = []
    for i in range(n):
        submit, duration, gpus = rng.uniform(0, 20_000), rng.lognormvariate(8, 1), rng.choice(sizes)
        priority = rng.choice(priorities) if len(priorities) > 1 else priorities[0]
        jobs.append(
            TraceJob(id=f"j{i}", submit_s=submit, duration_s=duration, gpus=gpus, priority=priority)
        )
    return sorted(jobs, key=lambda j: j.submit_s)


def two_pools(fabric: Fabric, pool: str = "online-inference") -> Fabric:
    """The fabric with its second spine's hosts in `pool`, which may lend them to training."""
    spec = fabric.spec
    hosts = tuple(
        h.model_copy(update={"pool": pool}) if h.domains["spine"] == "s1" else h for h in spec.hosts
    )
    return Fabric(spec.model_copy(update={"hosts": hosts}))
