"""Host failures in a simulation run: drawn per host (exponential times between failures and
repairs, `SimConfig.failures`), a failed host's jobs stopped and queued again with the work of
their last checkpoint kept, the host down until its repair."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from scheduler.simulation.records import FAILURE, REPAIR

if TYPE_CHECKING:
    from scheduler.simulation.engine import Simulation


def schedule(sim: Simulation) -> None:
    if sim.config.failures is None:
        return
    for h in range(len(sim.fabric.hosts)):
        sim.push(sim.rng.expovariate(1.0 / sim.config.failures.mtbf_s), FAILURE, h)


def fail(sim: Simulation, host: int, now: float) -> None:
    if host in sim.snapshot.down:
        return
    for order in sorted(sim.on_host.get(host, set())):
        state = sim.states[order]
        worked = sim.stop(state, now)
        every = sim.config.checkpoint_s
        kept = math.floor(worked / every) * every
        state.work_left -= kept
        state.restarts += 1
        sim.enqueue(state, now)
    sim.snapshot.down.add(host)
    assert sim.config.failures is not None  # failures are drawn only when configured
    sim.push(now + sim.config.failures.mttr_s, REPAIR, host)


def repair(sim: Simulation, host: int, now: float) -> None:
    failures = sim.config.failures
    assert failures is not None
    sim.snapshot.down.discard(host)
    sim.push(now + sim.rng.expovariate(1.0 / failures.mtbf_s), FAILURE, host)
