"""Priorities over simulated days: what preemption and reservations buy, and what they cost.

Workload: one day of the bundled Philly trace per seed (days 30..34 after the first job), gang
sizes x8, run times clipped to 12 h, on a generated fabric (blocks of 4 racks x 8 hosts x 8
GPUs) sized so that the day offers ~90% of its GPU-time (the load is printed per seed). Three
priority tiers drawn per job from the seed: high 10%, mid 30%, low 60% (our assumption; Philly
has no priorities). Jobs checkpoint every 30 minutes; a preempted job restarts from its last
checkpoint. Every run uses rackwise placement and the same queue; only the rule under test
changes. EASY backfilling uses the trace's run time as the estimate (exact: optimistic).

1. Preemption (EASY backfill in every run): off, lowest-priority-first (the baseline: lowest
   priority, newest first, until the gang fits), topology-aware (queue/preemption.py).
   Measures: the high tier's p99 queueing delay, GPU-hours of work lost to preemption.
2. Starvation (one priority, no preemption): greedy backfill vs EASY with reservations.
   Measure: p99 wait of the largest 5% of gangs, and what the others pay (mean wait).

Mean [95% interval over seeds]; ratios are per-seed paired ratios. Not a pass/fail test."""

from __future__ import annotations

import argparse
import math
import random
import time
from pathlib import Path
from typing import Any

from benchmarks.common import table
from scheduler.simulation.config import SimConfig
from scheduler.simulation.metrics import percentile
from scheduler.simulation.protocol import cell, interval
from scheduler.simulation.records import SimResult
from scheduler.simulation.runner import Task, run_all
from scheduler.simulation.trace import TraceJob, load_trace, transform
from scheduler.topology import generate

REPO = Path(__file__).resolve().parents[1]
PHILLY = REPO / "simulations" / "traces" / "philly.csv.gz"
TIERS = {2: 0.10, 1: 0.30, 0: 0.60}
HOSTS_PER_BLOCK = 32


def day(seed: int, all_jobs: list[TraceJob]) -> tuple[Any, list[TraceJob], float]:
    jobs = transform(
        all_jobs, start_s=(30 + seed) * 86400, days=1, scale=8, max_duration_s=12 * 3600
    )
    rng = random.Random(f"tiers/{seed}")
    tiers, weights = list(TIERS), list(TIERS.values())
    jobs = [j.model_copy(update={"priority": rng.choices(tiers, weights)[0]}) for j in jobs]
    offered = sum(j.gpus * j.duration_s for j in jobs) / 86400
    blocks = max(1, round(offered / 0.9 / (HOSTS_PER_BLOCK * 8)))
    spec = generate(blocks=blocks, racks=4, hosts=8, gpus=8)
    return spec, jobs, offered / (blocks * HOSTS_PER_BLOCK * 8)


def delays(result: SimResult, tier: int | None = None) -> list[float]:
    return [
        s.first_start - s.job.submit_s
        for s in result.jobs
        if s.first_start is not None and (tier is None or s.gang.priority == tier)
    ]


def largest(result: SimResult) -> list[float]:
    started = [s for s in result.jobs if s.first_start is not None]
    started.sort(key=lambda s: -s.gang.gpus)
    top = started[: max(1, math.ceil(len(started) * 0.05))]
    return [s.first_start - s.job.submit_s for s in top if s.first_start is not None]


def measures(result: SimResult) -> dict[str, float]:
    return {
        "high_p99_min": percentile(delays(result, 2), 99) / 60,
        "mid_p99_min": percentile(delays(result, 1), 99) / 60,
        "all_mean_min": sum(delays(result)) / max(1, len(delays(result))) / 60,
        "lost_gpu_h": sum(e.lost_gpu_s for _, e in result.evictions) / 3600,
        "preemptions": float(len(result.evictions)),
        "largest5_p99_min": percentile(largest(result), 99) / 60,
        "unfinished": float(sum(s.finish is None for s in result.jobs)),
    }


def run(seeds: int, workers: int) -> None:
    all_jobs = load_trace(PHILLY, "philly").jobs
    setups: dict[str, dict[str, Any]] = {
        "preempt off": {"preemption": "off"},
        "lowest-first": {"preemption": "lowest-priority-first"},
        "topology": {"preemption": "topology"},
        "greedy backfill, one tier": {"preemption": "off", "backfill": "greedy", "flat": True},
        "EASY, one tier": {"preemption": "off", "backfill": "easy", "flat": True},
    }
    tasks, keys = [], []
    for seed in range(seeds):
        spec, jobs, load = day(seed, all_jobs)
        print(
            f"seed {seed}: day {30 + seed}, {len(jobs)} jobs, {len(spec.hosts)} hosts, "
            f"offered load {load:.0%}"
        )
        for name, setup in setups.items():
            flat = setup.get("flat", False)
            rules = {k: v for k, v in setup.items() if k != "flat"}
            config = SimConfig.of(seed=seed, **rules)
            chosen = [j.model_copy(update={"priority": 0}) for j in jobs] if flat else jobs
            tasks.append(Task(spec, chosen, "rackwise", config))
            keys.append((name, seed))
    started = time.perf_counter()
    results = run_all(tasks, workers)
    per: dict[str, list[dict[str, float]]] = {name: [] for name in setups}
    for (name, _), result in zip(keys, results, strict=True):
        per[name].append(measures(result))
    print(f"({len(tasks)} runs in {time.perf_counter() - started:.0f} s)")
    report(per)


def report(per: dict[str, list[dict[str, float]]]) -> None:
    columns = ["high_p99_min", "mid_p99_min", "all_mean_min", "lost_gpu_h", "preemptions"]
    print("\n== preemption: mean [95% interval] over seeds")
    rows = [[n, *(cell([m[c] for m in per[n]]) for c in columns)] for n in list(per)[:3]]
    print(table(["rule", *columns], rows))
    print(
        ratio(
            "lost GPU-hours, topology / lowest-first", per, "topology", "lowest-first", "lost_gpu_h"
        )
    )
    print(
        ratio(
            "high-tier p99 delay, topology / lowest-first",
            per,
            "topology",
            "lowest-first",
            "high_p99_min",
        )
    )
    print(
        ratio("high-tier p99 delay, topology / off", per, "topology", "preempt off", "high_p99_min")
    )
    columns = ["largest5_p99_min", "all_mean_min", "unfinished"]
    print("\n== starvation (one tier, no preemption)")
    rows = [[n, *(cell([m[c] for m in per[n]]) for c in columns)] for n in list(per)[3:]]
    print(table(["rule", *columns], rows))
    print(
        ratio(
            "largest 5% p99 wait, EASY / greedy",
            per,
            "EASY, one tier",
            "greedy backfill, one tier",
            "largest5_p99_min",
        )
    )
    print(
        ratio(
            "mean wait, EASY / greedy",
            per,
            "EASY, one tier",
            "greedy backfill, one tier",
            "all_mean_min",
        )
    )


def ratio(title: str, per: dict[str, list[dict[str, float]]], a: str, b: str, key: str) -> str:
    pairs = [(x[key], y[key]) for x, y in zip(per[a], per[b], strict=True) if y[key] > 0]
    if not pairs:
        return f"  {title}: no ratio (the baseline is 0 in every seed)"
    values = [x / y for x, y in pairs]
    mean, half = interval(values)
    return f"  {title}: {mean:.2f}x ±{half:.2f} over {len(values)} seeds"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    run(args.seeds, args.workers)


if __name__ == "__main__":
    main()
