"""What each team received against what it is owed, over a run's steady window.

Contract. Takes a run's record (its tenants' changes of GPUs in use and of GPUs their waiting
gangs ask, its teams' nominal GPUs) and gives, per tenant owed some GPUs: `entitled_share`, over
the steady window's moments when it had a gang waiting, the GPU-seconds it held of what it was
owed, over what it was owed: owed = its nominal quota, or less when it asked less (in use plus
waiting); 1.0: whenever it waited, it had what it was owed; None: it never waited. And its wait
p95 (seconds from submission to first start, jobs submitted in the window). Over tenants:
Jain's index of their entitled shares, the least of them, and GPU-hours lost to reclaims (work
since the victims' checkpoints). What a tenant holds beyond what it is owed is borrowed, not
owed: it does not count."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from scheduler.simulation.metrics import percentile
from scheduler.simulation.records import SimResult


def tenant_measures(result: SimResult) -> dict[str, Any]:
    shares = entitled_shares(result)
    waits = _waits(result)
    known = [s for s in shares.values() if s is not None]
    return {
        "tenants": {
            t: {
                "entitled_gpus": result.entitled.get(t, 0),
                "entitled_share": shares.get(t),
                "wait_p95_s": waits.get(t),
            }
            for t in sorted(set(shares) | set(waits))
        },
        "jain_index": jain(known),
        "least_entitled_share": min(known, default=None),
        "reclaimed_gpu_h_lost": sum(e.lost_gpu_s for _, e in result.evictions if e.reclaimed)
        / 3600,
        "reclaims": sum(1 for _, e in result.evictions if e.reclaimed),
    }


def entitled_shares(result: SimResult) -> dict[str, float | None]:
    start, end = result.window
    used: dict[str, int] = defaultdict(int)
    waiting: dict[str, int] = defaultdict(int)
    owed: dict[str, float] = defaultdict(float)
    got: dict[str, float] = defaultdict(float)
    last = start
    for at, tenant, gpus, waits in result.tenants:
        _accrue(result, used, waiting, owed, got, last, min(max(at, start), end))
        last = min(max(at, start), end)
        used[tenant] += gpus
        waiting[tenant] += waits
    _accrue(result, used, waiting, owed, got, last, end)
    return {
        t: (got[t] / owed[t] if owed[t] > 0 else None)
        for t, nominal in result.entitled.items()
        if nominal > 0
    }


def _accrue(
    result: SimResult,
    used: dict[str, int],
    waiting: dict[str, int],
    owed: dict[str, float],
    got: dict[str, float],
    since: float,
    until: float,
) -> None:
    dt = until - since
    if dt <= 0:
        return
    for tenant, asks in waiting.items():
        due = min(result.entitled.get(tenant, 0), used[tenant] + asks)
        if asks > 0 and due > 0:
            owed[tenant] += due * dt
            got[tenant] += min(used[tenant], due) * dt


def _waits(result: SimResult) -> dict[str, float]:
    start, end = result.window
    by: dict[str, list[float]] = defaultdict(list)
    for s in result.jobs:
        job = s.job
        if job.tenant and start <= job.submit_s <= end and s.first_start is not None:
            by[job.tenant].append(s.first_start - job.submit_s)
    return {t: percentile(w, 95) for t, w in by.items()}


def jain(xs: list[float]) -> float | None:
    """Jain's fairness index: 1 when all are equal, 1/n when one has everything."""
    if not xs or not any(xs):
        return None
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))
