"""Metrics per policy and per pool, from a simulation result (names documented in README)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduler.simulation.records import JobState, SimResult

# measured on the wall clock: they differ between runs of the same seed
WALL_CLOCK = ("wall_seconds", "decision_latency_p50_ms", "decision_latency_p99_ms", "cycle_p99_ms")


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


# gang sizes (GPUs) for the per-size tables: upper bounds of each bucket
SIZE_BUCKETS: tuple[int, ...] = (8, 32, 128, 512, 1 << 30)


def bucket(gpus: int) -> str:
    low = 1
    for high in SIZE_BUCKETS:
        if gpus <= high:
            return f"{low}-{high}" if high < 1 << 30 else f">{low - 1}"
        low = high + 1
    return f">{SIZE_BUCKETS[-2]}"


def slowdown(state: JobState) -> float:
    """Actual over ideal runtime: first start to finish (restarts and waits between runs
    included) over the job's work at compact speed."""
    assert state.finish is not None
    assert state.first_start is not None
    return (state.finish - state.first_start) / state.job.duration_s


def time_metrics(result: SimResult) -> dict[str, Any]:
    """What placement does to time: goodput, makespan, slowdown of multi-host gangs (gangs
    larger than a host, whatever a policy did with them), queueing by size, communication."""
    jobs = result.jobs
    done = [j for j in jobs if j.finish is not None]
    first = min((j.job.submit_s for j in jobs), default=0.0)
    last = max((j.finish for j in done if j.finish is not None), default=first)
    makespan = max(last - first, 1e-9)
    capacity = sum(result.pool_gpus.values())
    ideal = sum(j.gang.gpus * j.job.duration_s for j in done)
    multi = [j for j in done if j.gang.gpus > result.gpus_per_host]
    started = [j for j in jobs if j.first_start is not None]
    largest = sorted(started, key=lambda j: -j.gang.gpus)[: max(1, len(started) // 20)]
    busy = sum(j.run_gpu_s for j in jobs)
    out: dict[str, Any] = {
        "goodput": ideal / (capacity * makespan) if capacity else 0.0,
        "makespan_s": makespan,
        "slowdown_multihost_mean": _mean([slowdown(j) for j in multi]),
        "slowdown_multihost_p99": percentile([slowdown(j) for j in multi], 99),
        "multihost_gangs": len(multi),
        "queue_delay_largest5_p99_s": percentile([_wait(j) for j in largest], 99),
        "comm_share_of_gpu_time": sum(j.comm_gpu_s for j in jobs) / busy if busy else 0.0,
        "by_size": {},
    }
    for name in sorted({bucket(j.gang.gpus) for j in started}, key=bucket_order):
        group = [j for j in started if bucket(j.gang.gpus) == name]
        finished = [j for j in group if j.finish is not None]
        out["by_size"][name] = {
            "jobs": len(group),
            "slowdown_mean": _mean([slowdown(j) for j in finished]),
            "queue_delay_mean_s": _mean([_wait(j) for j in group]),
            "queue_delay_p99_s": percentile([_wait(j) for j in group], 99),
        }
    return out


def _wait(state: JobState) -> float:
    assert state.first_start is not None
    return state.first_start - state.job.submit_s


def bucket_order(name: str) -> int:
    return int(name.lstrip(">").split("-")[0])


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


# size classes of the protocol: a gang within one host, within one rack, or larger
CLASSES = ("host", "rack", "larger")
BOUND_S = 10.0  # bounded slowdown's floor on run time (Feitelson's usual 10 s)


def size_class(gpus: int, per_host: int, per_rack: int) -> str:
    if gpus <= per_host:
        return "host"
    return "rack" if gpus <= per_rack else "larger"


def measured(result: SimResult) -> list[JobState]:
    """The jobs the measures count: those submitted after the warm-up."""
    return [j for j in result.jobs if j.job.submit_s >= result.warmup_s]


def field_metrics(result: SimResult) -> dict[str, Any]:
    """The measures the field reports (the fair protocol's headline), over measured jobs: JCT
    by size class, GPU-hours lost to placement, the wait of gangs larger than a rack,
    utilisation in the steady window, bounded slowdown (fairness to small jobs), and the
    calibration figures (share of multi-host jobs that shared a link, their slowdown)."""
    jobs = measured(result)
    done = [j for j in jobs if j.finish is not None]
    kind = {id(j): size_class(j.gang.gpus, result.gpus_per_host, result.rack_gpus) for j in jobs}
    jct = {c: [_jct(j) for j in done if kind[id(j)] == c] for c in CLASSES}
    large = [_wait(j) for j in jobs if kind[id(j)] == "larger" and j.first_start is not None]
    domain = result.nvlink_gpus
    whole = [
        _wait(j) for j in jobs if domain and j.gang.gpus >= domain and j.first_start is not None
    ]
    multi = [j for j in done if j.last_domains.get("host", 1) > 1]  # rings that left a host
    slowed = [j for j in multi if j.contended_s > 0]
    return {
        "measured_jobs": len(jobs),
        "jct_mean_s": _mean([_jct(j) for j in done]),
        "jct_p95_s": percentile([_jct(j) for j in done], 95),
        "jobs_by_class": {c: len(v) for c, v in jct.items()},
        "jct_mean_s_by_class": {c: _mean(v) if v else None for c, v in jct.items()},
        "jct_p95_s_by_class": {c: percentile(v, 95) if v else None for c, v in jct.items()},
        "gpu_hours_lost": sum(_lost_gpu_s(j) for j in done) / 3600,
        "gpu_hours_lost_alone": sum(j.alone_lost_gpu_s for j in done) / 3600,
        "gpu_hours_lost_shared": sum(j.shared_lost_gpu_s for j in done) / 3600,
        "large_gangs": len(large),
        "large_gang_wait_mean_s": _mean(large) if large else None,
        "large_gang_wait_p95_s": percentile(large, 95) if large else None,
        "nvlink_gang_wait_mean_s": _mean(whole) if whole else None,
        "utilisation_steady": effective_utilisation(result),
        "bounded_slowdown_mean": _mean([_bsld(j) for j in done]),
        "bounded_slowdown_p95": percentile([_bsld(j) for j in done], 95),
        "multihost_contended_share": len(slowed) / len(multi) if multi else 0.0,
        "multihost_contended_slowdown_mean": _mean([j.fabric_slowdown for j in slowed]),
    }


def effective_utilisation(result: SimResult) -> float:
    """Work done at compact speed inside the steady window over the GPU-time it offers: a
    job slowed by shared links holds its GPUs longer but does no more work."""
    start, end = result.window
    capacity = sum(result.pool_gpus.values())
    if end <= start or not capacity:
        return 0.0
    return result.useful_gpu_s / (capacity * (end - start))


def _lost_gpu_s(state: JobState) -> float:
    """GPU-seconds held beyond the compact run time; float noise below a millisecond per GPU
    is none (a run at the compact rate holds exactly its run time)."""
    lost = state.held_gpu_s - state.gang.all_gpus * state.job.duration_s
    return lost if lost > 1e-3 * state.gang.all_gpus else 0.0


def _jct(state: JobState) -> float:
    assert state.finish is not None
    return state.finish - state.job.submit_s


def _bsld(state: JobState) -> float:
    """max(1, response time / max(run time, 10 s)): long waits of short jobs show, and a
    seconds-long job cannot dominate the mean."""
    return max(1.0, _jct(state) / max(state.job.duration_s, BOUND_S))


def policy_metrics(result: SimResult) -> dict[str, Any]:
    pools = sorted({j.gang.pool for j in result.jobs})
    stranded = [s for _, s, _ in result.samples]
    largest = [lg for _, _, lg in result.samples]
    # every statistic of a job over one population, the measured jobs (submitted after the
    # warm-up); only the counts of jobs run and finished are of all of them
    counted = measured(result)
    out: dict[str, Any] = job_metrics(counted)
    out.update({k: v for k, v in job_metrics(result.jobs).items() if k.startswith("jobs")})
    out.update(time_metrics(result))
    out.update(field_metrics(result))
    out.update(
        {
            "gpu_utilisation": utilisation(result, None),
            "stranded_free_gpus_mean": _mean(stranded),
            "largest_free_rack_gpus_mean": _mean(largest),
            "decision_latency_p50_ms": percentile(result.latencies, 50) * 1000,
            "decision_latency_p99_ms": percentile(result.latencies, 99) * 1000,
            "decisions": len(result.latencies),
            # a whole queue cycle (every gang tried, joint placement, defragmentation)
            "cycle_p99_ms": percentile(result.cycle_seconds, 99) * 1000,
            "defrag_moves": len(result.moves),
            "joint_joined": result.joint_joined,
            "joint_gain": result.joint_gain,
            "fragmentation_trades": len(result.premiums),
            "fragmentation_premium_mean": _mean(result.premiums) if result.premiums else 0.0,
            # None ("n/a") where no decision had a bound: never a 0.0 that reads as optimal
            "gap_to_bound_mean": _mean(result.gaps) if result.gaps else None,
            "simulated_seconds": result.end,
            "wall_seconds": result.wall_seconds,
            "pools": {
                pool: {
                    **job_metrics([j for j in counted if j.gang.pool == pool]),
                    "gpu_utilisation": utilisation(result, pool),
                }
                for pool in pools
            },
        }
    )
    return out
