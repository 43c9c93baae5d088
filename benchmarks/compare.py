"""The fair protocol: every policy under the same queue rules, several seeds, 95% intervals.

Workloads (each seed is a different draw, the same for every policy):
  philly  the bundled Philly trace (79,940 jobs; --philly-days takes a window of it) on Lingjun
          (847 hosts x 8 GPUs), gang sizes x8, arrivals x2.5 so the trace offers ~70% of the
          GPUs, sustained (not a burst into a pre-fragmented cluster); the seed jitters every
          arrival by up to +-10 minutes and draws node failures (MTBF 2,000 h, 4 h repair,
          checkpoints every 30 min, 5 min restart).
  llm     an LLM-era mix on a generated 100k-GPU fabric (16 spines x 98 racks x 8 hosts x 8
          GPUs): gang sizes 8..2,048 GPUs with most jobs small and most GPU time in few large
          gangs (the distribution is stated below; it is our assumption, not a published
          trace), log-normal run times, Poisson arrivals offering ~70% of the GPUs.
Queue rules are identical for every policy and printed: EASY backfill with reservations,
preemption, patience off unless --patience is given (then every policy gets it). rackwise's
own mechanisms (fragmentation-aware objective, joint placement, moves at checkpoints) are its
policy: the baselines never get them, and rows "rackwise -frag", "-joint", "-defrag" and
"(none)" show rackwise with each, or all, switched off.

Per policy: mean [95% interval, Student t over seeds] of each metric. Then rackwise over the
best baseline on that metric (best by mean), as the mean [interval] of the per-seed ratios.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import table
from scheduler.placement import POLICIES
from scheduler.simulation.config import Failures, SimConfig
from scheduler.simulation.metrics import policy_metrics
from scheduler.simulation.protocol import HEADLINE, ratios
from scheduler.simulation.protocol import table as protocol_table
from scheduler.simulation.runner import Task, run_all
from scheduler.simulation.trace import TraceJob, load_trace, transform
from scheduler.topology import from_lingjun_csv, generate

REPO = Path(__file__).resolve().parents[1]
PHILLY = REPO / "simulations" / "traces" / "philly.csv.gz"
LINGJUN = REPO / "simulations" / "traces" / "lingjun-topo.csv"
# LLM-era gang sizes (GPUs) and their share of jobs: our stated assumption
LLM_SIZES = {8: 0.45, 16: 0.15, 32: 0.12, 64: 0.10, 128: 0.08, 256: 0.05, 512: 0.03}
LLM_SIZES |= {1024: 0.015, 2048: 0.005}


def philly(
    seed: int, days: tuple[float, float] | None = None
) -> tuple[Any, list[TraceJob], SimConfig]:
    """The whole trace, or the jobs submitted within `days` (first, last) of it, shifted to
    start at 0."""
    rng = random.Random(f"philly/{seed}")
    jobs = transform(load_trace(PHILLY, "philly").jobs, scale=8, load=2.5)
    if days is not None:
        first, last = days[0] * 86400, days[1] * 86400
        jobs = [
            j.model_copy(update={"submit_s": j.submit_s - first})
            for j in jobs
            if first <= j.submit_s < last
        ]
    jittered = [
        j.model_copy(update={"submit_s": max(0.0, j.submit_s + rng.uniform(-600, 600))})
        for j in jobs
    ]
    jittered.sort(key=lambda j: (j.submit_s, j.id))
    failures = Failures(mtbf_hours=2000, mttr_hours=4, checkpoint_minutes=30, restart_minutes=5)
    return from_lingjun_csv(LINGJUN, gpus=8), jittered, SimConfig(seed=seed, failures=failures)


def llm(seed: int, days: float, max_hours: float) -> tuple[Any, list[TraceJob], SimConfig]:
    spec = generate(blocks=16, racks=98, hosts=8, gpus=8)
    capacity = sum(h.gpus for h in spec.hosts)
    rng = random.Random(f"llm/{seed}")
    sizes, weights = list(LLM_SIZES), list(LLM_SIZES.values())
    mean_gpus = sum(s * w for s, w in LLM_SIZES.items())
    median_s, sigma, cap_s = 2 * 3600, 1.5, max_hours * 3600
    # mean of the clipped log-normal, estimated from the same draw the jobs use
    probe = random.Random(f"llm-mean/{seed}")
    draws = [min(probe.lognormvariate(math.log(median_s), sigma), cap_s) for _ in range(20_000)]
    mean_s = sum(draws) / len(draws)
    rate = 0.7 * capacity / (mean_gpus * mean_s)  # jobs per second for ~70% offered load
    jobs, now, i = [], 0.0, 0
    while now < days * 86400:
        now += rng.expovariate(rate)
        duration = min(rng.lognormvariate(math.log(median_s), sigma), cap_s)
        gpus = rng.choices(sizes, weights)[0]
        jobs.append(TraceJob(id=f"llm{i}", submit_s=now, duration_s=duration, gpus=gpus))
        i += 1
    return spec, jobs, SimConfig(seed=seed, time_limit_s=0.5)


def report(per_seed: dict[str, list[dict[str, Any]]], title: str) -> None:
    seeds = len(next(iter(per_seed.values())))
    print(f"\n== {title}: mean ±95% interval over {seeds} seeds")
    print(table(["policy", *(m.heading for m in HEADLINE)], protocol_table(per_seed)))
    print("\nrackwise / best baseline on each measure (paired per-seed ratios):")
    for ratio in ratios(per_seed):
        print("  " + ratio.text())


# rackwise with each of its own mechanisms switched off (SimConfig): rows of their own, never
# taken as the baseline
VARIANTS: dict[str, dict[str, Any]] = {
    "rackwise -frag": {"fragmentation_share": 0.0},
    "rackwise -joint": {"joint_gangs": 0},
    "rackwise -defrag": {"defrag_moves_per_hour": 0.0},
    "rackwise (none)": {"fragmentation_share": 0.0, "joint_gangs": 0, "defrag_moves_per_hour": 0.0},
}
MECHANISMS = (
    ("defrag_moves", "moves"),
    ("joint_joined", "joined"),
    ("joint_gain", "joint J saved"),
    ("fragmentation_trades", "frag trades"),
    ("fragmentation_premium_mean", "premium"),
    ("cycle_p99_ms", "cycle p99 ms"),
    ("decision_latency_p99_ms", "decision p99 ms"),
)


def rows(policies: Sequence[str], variants: Sequence[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """(row label, policy, SimConfig changes) for each policy, then each rackwise variant."""
    out: list[tuple[str, str, dict[str, Any]]] = [(p, p, {}) for p in policies]
    return out + [(v, "rackwise", VARIANTS[v]) for v in variants]


def run(name: str, seeds: int, policies: Sequence[str], args: argparse.Namespace) -> None:
    patience, workers = args.patience, args.workers
    days, max_hours = args.llm_days, args.llm_max_hours
    tasks, keys = [], []
    plan = rows(policies, args.variants)
    for seed in range(seeds):
        window = tuple(args.philly_days) if args.philly_days else None
        spec, jobs, config = (
            philly(seed, window) if name == "philly" else llm(seed, days, max_hours)
        )
        config = config.model_copy(update={"compact_wait_s": patience})
        for label, policy, changes in plan:
            tasks.append(Task(spec, jobs, policy, config.model_copy(update=changes)))
            keys.append((label, seed))
    started = time.perf_counter()
    outcomes = run_all(tasks, workers)
    results: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in plan}
    for (label, _), result in zip(keys, outcomes, strict=True):
        results[label].append(policy_metrics(result))
    jobs_n = len(tasks[0].jobs)
    rules = (
        f"backfill {config.backfill}, preemption {config.preemption}, patience {patience:.0f} s "
        "for every policy"
    )
    took = time.perf_counter() - started
    print(f"\n{name}: {jobs_n} jobs per seed; queue rules: {rules}; {took:.0f} s")
    report(results, name)
    mechanisms(results)


def mechanisms(results: dict[str, list[dict[str, Any]]]) -> None:
    """What rackwise's own mechanisms did, per row (means over seeds)."""
    print("\nrackwise's mechanisms (mean per seed):")
    body = [
        [label, *(f"{statistics.fmean(m[key] for m in runs):.4g}" for key, _ in MECHANISMS)]
        for label, runs in results.items()
        if label.startswith("rackwise")
    ]
    print(table(["row", *(h for _, h in MECHANISMS)], body))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", choices=["philly", "llm", "both"], default="both")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--policies", nargs="+", default=list(POLICIES))
    parser.add_argument(
        "--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS), metavar="ROW"
    )
    parser.add_argument("--patience", type=float, default=0.0)
    parser.add_argument("--workers", type=int, default=2)
    # arrivals must last several mean run times for the fabric to reach a steady load: 0.5 day
    # with a 7-day clip left 100k GPUs mostly idle (no job waited)
    # a window of the Philly trace (days from its first submission); default the whole trace
    parser.add_argument("--philly-days", type=float, nargs=2, metavar=("FIRST", "LAST"))
    parser.add_argument("--llm-days", type=float, default=3.0)
    parser.add_argument("--llm-max-hours", type=float, default=24.0)
    args = parser.parse_args()
    for name in ("philly", "llm") if args.workload == "both" else (args.workload,):
        run(name, args.seeds, args.policies, args)


if __name__ == "__main__":
    main()
