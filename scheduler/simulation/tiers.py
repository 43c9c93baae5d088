"""Measures of tiered pools under one scheduler (lending and reclaim, queue/lending.py).

Contract. Takes one run's result, the lending pool and its reclaim deadline. Gives: fleet GPU
utilisation (busy GPUs over all GPUs while load is offered, metrics.utilisation), the GPU-hours
of work each pool's measured jobs completed by the last arrival, the lending pool's
time-to-capacity (its gangs' waits from arrival to start) p50 and p99 and how many waited past
the deadline, the work lost to reclaims (GPU-hours since the victims' last checkpoints) against
the GPU-hours gangs ran on lent hosts, and reclaims per hour of the run."""

from __future__ import annotations

from typing import Any

from scheduler.simulation.metrics import percentile, utilisation
from scheduler.simulation.records import SimResult


def tier_measures(result: SimResult, lender: str, deadline_s: float) -> dict[str, Any]:
    measured = [j for j in result.jobs if j.job.submit_s >= result.warmup_s]
    owner = [j for j in measured if j.job.pool == lender and j.first_start is not None]
    waits = [j.first_start - j.job.submit_s for j in owner if j.first_start is not None]
    reclaims = [e for _, e in result.evictions if e.reclaimed]
    hours = max(result.end, 1.0) / 3600
    lost = sum(e.lost_gpu_s for e in reclaims) / 3600
    borrowed = result.borrowed_gpu_s / 3600
    return {
        "fleet_utilisation": utilisation(result, None),
        "work_gpu_hours": _work_by_pool(measured, result.window[1]),
        "owner_wait_p50_s": percentile(waits, 50),
        "owner_wait_p99_s": percentile(waits, 99),
        "owner_late": sum(w > deadline_s + 1e-6 for w in waits),
        "reclaim_lost_gpu_hours": lost,
        "borrowed_gpu_hours": borrowed,
        "reclaim_lost_share": lost / borrowed if borrowed else 0.0,
        "reclaims_per_hour": len(reclaims) / hours,
    }


def _work_by_pool(jobs: list[Any], end: float) -> dict[str, float]:
    """GPU-hours of the work of each pool's jobs that finished by `end` (the last arrival)."""
    out: dict[str, float] = {}
    for j in jobs:
        if j.finish is not None and j.finish <= end:
            out[j.job.pool] = out.get(j.job.pool, 0.0) + j.job.gpus * j.job.duration_s / 3600
    return out
