"""What a simulation run starts from: each job's state before its arrival, the run's result
record, the pools' GPUs, the hosts taken by work outside the trace, and the fragmentation
samples' arithmetic."""

from __future__ import annotations

import random

import numpy as np

from scheduler.model.topology import Tier
from scheduler.placement import Snapshot
from scheduler.simulation.config import SimConfig
from scheduler.simulation.records import JobState, SimResult
from scheduler.simulation.trace import TraceJob
from scheduler.teams import Resource
from scheduler.topology.fabric import Fabric, nvlink_gpus


def state_of(job: TraceJob, order: int, per_host: int, config: SimConfig) -> JobState:
    """A job before its arrival: all its work left, its communication share drawn."""
    share = job.comm_share
    if share is None:
        share = config.comm_share.draw(job.id, job.gpus, config.seed)
    return JobState(job, job.gang(per_host), order, job.duration_s, share=share)


def result_of(policy: str, states: list[JobState], fabric: Fabric, config: SimConfig) -> SimResult:
    """The run's record before it starts: the fabric's facts and the steady window."""
    result = SimResult(policy, states, [], [], [], [], pool_gpus(fabric), 0.0)
    result.gpus_per_host = max(h.gpus for h in fabric.hosts)
    result.rack_gpus = int(np.bincount(fabric.columns[Tier.RACK], fabric.gpus).max())
    real = list(fabric.real_nvlink)
    nvlink = nvlink_gpus(fabric, np.ones(len(fabric.hosts), dtype=bool))
    result.nvlink_gpus = int(nvlink[real].max()) if real else 0
    result.warmup_s = config.warmup_s
    result.entitled = {
        q.name: sum(p.owned(Resource.GPUS) for p in q.quotas) for q in config.teams.queues
    }
    last = max((s.job.submit_s for s in states), default=0.0)
    result.window = (min(config.warmup_s, last), last)
    return result


def pool_gpus(fabric: Fabric) -> dict[str, int]:
    """Per pool, its GPUs in service at once (spare trays left out)."""
    return {pool: fabric.gpus_in_service(mask) for pool, mask in fabric.pool_mask.items()}


def background(snapshot: Snapshot, result: SimResult, share: float, seed: int) -> None:
    """A share of hosts fully taken for the whole run by work outside the trace (seeded)."""
    hosts = snapshot.fabric.hosts
    rng = random.Random(f"background/{seed}")
    for h in rng.sample(range(len(hosts)), round(share * len(hosts))):
        snapshot.free_gpus[h] = 0
        pool = hosts[h].pool
        result.background[pool] = result.background.get(pool, 0) + hosts[h].gpus


def fragmentation(fabric: Fabric, snapshot: Snapshot) -> tuple[int, int]:
    """Free GPUs stranded in partly used racks, and the largest free rack."""
    rack = fabric.columns[Tier.RACK]
    free = np.bincount(rack, weights=snapshot.free_gpus * snapshot.up_mask())
    total = np.bincount(rack, weights=fabric.gpus)
    return int(free[(free > 0) & (free < total)].sum()), int(free.max(initial=0))
