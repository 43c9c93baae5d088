"""Metrics per policy and per pool, from a simulation result (names documented in README)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduler.simulation.engine import JobState, SimResult


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return float(ordered[rank - 1])


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def job_metrics(jobs: Sequence[JobState]) -> dict[str, Any]:
    done = [j for j in jobs if j.finish is not None]
    jct = [j.finish - j.job.submit_s for j in done if j.finish is not None]
    started = [j for j in jobs if j.first_start is not None]
    wait = [j.first_start - j.job.submit_s for j in started if j.first_start is not None]
    multi = [j for j in done if j.gang.gpus > 0 and j.last_domains.get("host", 1) > 1]
    return {
        "jobs": len(jobs),
        "jobs_finished": len(done),
        "jobs_unplaced": len(jobs) - len(done),
        "jct_mean_s": _mean(jct),
        "jct_p50_s": percentile(jct, 50),
        "jct_p99_s": percentile(jct, 99),
        "queue_delay_mean_s": _mean(wait),
        "queue_delay_p99_s": percentile(wait, 99),
        "racks_per_multihost_gang_mean": _mean([j.last_domains["rack"] for j in multi]),
        "racks_per_multihost_gang_max": max((j.last_domains["rack"] for j in multi), default=0),
        "spines_per_multihost_gang_mean": _mean([j.last_domains["spine"] for j in multi]),
        "spines_per_multihost_gang_max": max((j.last_domains["spine"] for j in multi), default=0),
        "cross_rack_gb": sum(j.rack_gb for j in jobs),
        "cross_spine_gb": sum(j.spine_gb for j in jobs),
        "slowdown_mean": _mean([j.stretch for j in done]),
        "restarts": sum(j.restarts for j in jobs),
    }


def utilisation(result: SimResult, pool: str | None) -> float:
    """Time-weighted busy GPUs over capacity while load is offered: from the first arrival to
    the last (the heavy tail of long jobs afterwards would say more about the trace than the
    scheduler)."""
    if not result.busy:
        return 0.0
    submits = [j.job.submit_s for j in result.jobs]
    start, end = min(submits), max(submits)
    if end <= start:
        end = max(result.end, start + 1.0)
    capacity = sum(result.pool_gpus.values()) if pool is None else result.pool_gpus.get(pool, 0)
    busy: dict[str, int] = {p: g for p, g in result.background.items() if pool in (None, p)}
    base = sum(busy.values())
    area, last = 0.0, start
    running: dict[str, int] = {}
    for at, p, value in result.busy:
        if at > end:
            break
        held = sum(running.values()) if pool is None else running.get(pool, 0)
        area += (base + held) * max(at - last, 0.0)
        running[p] = value
        last = max(at, start)
    held = sum(running.values()) if pool is None else running.get(pool, 0)
    area += (base + held) * max(end - last, 0.0)
    return area / (capacity * (end - start)) if capacity else 0.0


def policy_metrics(result: SimResult) -> dict[str, Any]:
    pools = sorted({j.gang.pool for j in result.jobs})
    stranded = [s for _, s, _ in result.samples]
    largest = [lg for _, _, lg in result.samples]
    out: dict[str, Any] = job_metrics(result.jobs)
    out.update(
        {
            "gpu_utilisation": utilisation(result, None),
            "stranded_free_gpus_mean": _mean(stranded),
            "largest_free_rack_gpus_mean": _mean(largest),
            "decision_latency_p50_ms": percentile(result.latencies, 50) * 1000,
            "decision_latency_p99_ms": percentile(result.latencies, 99) * 1000,
            "decisions": len(result.latencies),
            # None ("n/a") where no decision had a bound: never a 0.0 that reads as optimal
            "gap_to_bound_mean": _mean(result.gaps) if result.gaps else None,
            "simulated_seconds": result.end,
            "wall_seconds": result.wall_seconds,
            "pools": {
                pool: {
                    **job_metrics([j for j in result.jobs if j.gang.pool == pool]),
                    "gpu_utilisation": utilisation(result, pool),
                }
                for pool in pools
            },
        }
    )
    return out
