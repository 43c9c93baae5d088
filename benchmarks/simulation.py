"""Simulation benchmark (issue 3).

A. The whole Philly CSV (79,940 jobs) on the Lingjun topology (8 GPUs per host), rackwise only:
   wall time and peak memory (max RSS of this process).
B. LLM-era: a generated 100k-GPU fabric (16 spines x 98 racks x 8 hosts x 8 GPUs), the first
   10,000 Philly jobs with gang sizes x8; rackwise and every baseline, two policies at a time.
   Those jobs request 95,072 GPUs in all and most finish within minutes, so no compression of
   their arrivals alone keeps 100k GPUs 80% busy (at most ~16% on average). The fabric is
   therefore loaded as a production cluster is: 75% of hosts (seeded, scattered) stay busy with
   work outside the trace, and arrivals are compressed so the trace offers ~60% of the remaining
   quarter on average (queues absorb the bursts). Utilisation counts the background load.
   Prints the comparison and rackwise's ratios to Kueue BestFit and Slurm tree.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from benchmarks.common import table
from scheduler.placement import POLICIES
from scheduler.simulation.config import SimConfig
from scheduler.simulation.metrics import policy_metrics
from scheduler.simulation.runner import Task, run_all, run_one
from scheduler.simulation.trace import TraceJob, load_trace, transform
from scheduler.topology import from_lingjun_csv, generate

REPO = Path(__file__).resolve().parents[1]
PHILLY = REPO / "simulations" / "traces" / "philly.csv.gz"
LINGJUN = REPO / "simulations" / "traces" / "lingjun-topo.csv"


def whole_philly() -> None:
    start = time.perf_counter()
    jobs = load_trace(PHILLY, "philly").jobs
    spec = from_lingjun_csv(LINGJUN, gpus=8)
    loaded = time.perf_counter() - start
    result = run_one(Task(spec, jobs, "rackwise", SimConfig()))
    wall = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    m = policy_metrics(result)
    print(f"\n== A. whole Philly ({len(jobs)} jobs) on Lingjun (847 hosts x 8 GPUs), rackwise")
    print(
        f"wall {wall:.1f} s (loading {loaded:.1f} s), peak RSS {peak_mb:.0f} MB, "
        f"{m['decisions']} decisions, p99 {m['decision_latency_p99_ms']:.1f} ms, "
        f"finished {m['jobs_finished']}, unplaced {m['jobs_unplaced']}"
    )


def busy_share(jobs: list[TraceJob], gpus: int, load: float) -> float:
    """Mean share of GPUs the jobs would hold during their (compressed) arrival window if none
    ever waited: what arrival compression `load` offers."""
    first = jobs[0].submit_s
    window = max((jobs[-1].submit_s - first) / load, 1.0)
    held = sum(j.gpus * min(j.duration_s, window - (j.submit_s - first) / load) for j in jobs)
    return held / (gpus * window)


def offered_load(jobs: list[TraceJob], gpus: int, target: float) -> float:
    """Arrival compression (bisection) at which the arrival window is `target` busy."""
    low, high = 1.0, 1e6
    for _ in range(60):
        mid = (low * high) ** 0.5
        low, high = (mid, high) if busy_share(jobs, gpus, mid) < target else (low, mid)
    return high


def llm_era(jobs_n: int, target: float, background: float, patience: float, workers: int) -> None:
    spec = generate(blocks=16, racks=98, hosts=8, gpus=8)
    gpus = sum(h.gpus for h in spec.hosts)
    free = round(gpus * (1 - background))
    raw = transform(load_trace(PHILLY, "philly").jobs, scale=8, limit=jobs_n)
    load = offered_load(raw, free, target)
    jobs = transform(raw, load=load)
    print(f"rackwise patience (compact_wait_s): {patience:.0f} s")
    print(
        f"\n== B. LLM-era: {len(spec.hosts)} hosts, {gpus} GPUs, {background:.0%} of hosts busy "
        f"outside the trace; {len(jobs)} Philly jobs x8 ({sum(j.gpus for j in jobs)} GPUs in "
        f"all), arrivals compressed x{load:.0f} to offer {target:.0%} of the free GPUs"
    )
    start = time.perf_counter()
    config = SimConfig(seed=1, background_hosts=background, compact_wait_s=patience)
    tasks = [Task(spec, jobs, p, config) for p in POLICIES]
    results = run_all(tasks, workers)
    wall = time.perf_counter() - start
    metrics = {r.policy: policy_metrics(r) for r in results}
    keys = (
        "jct_mean_s",
        "queue_delay_mean_s",
        "gpu_utilisation",
        "racks_per_multihost_gang_mean",
        "spines_per_multihost_gang_mean",
        "cross_rack_gb",
        "cross_spine_gb",
        "decision_latency_p99_ms",
        "jobs_unplaced",
        "wall_seconds",
    )
    rows = [[p, *(f"{m[k]:.3g}" for k in keys)] for p, m in metrics.items()]
    print(table(["policy", *keys], rows))
    ours = metrics["rackwise"]
    for base in ("kueue-best-fit", "slurm-tree"):
        theirs = metrics[base]
        if not theirs["cross_spine_gb"] or not theirs["cross_rack_gb"]:
            # a ratio to zero is undefined: give both sides' totals instead
            print(
                f"rackwise / {base}: cross-rack GB {ours['cross_rack_gb']:.3g} vs "
                f"{theirs['cross_rack_gb']:.3g}, cross-spine GB {ours['cross_spine_gb']:.3g} vs "
                f"{theirs['cross_spine_gb']:.3g}"
            )
            continue
        print(
            f"rackwise / {base}: "
            f"cross-spine {ours['cross_spine_gb'] / theirs['cross_spine_gb']:.3f}x"
            f" (target <= 0.5), cross-rack {ours['cross_rack_gb'] / theirs['cross_rack_gb']:.3f}x"
            f" (target <= 0.8), mean JCT {ours['jct_mean_s'] / theirs['jct_mean_s']:.3f}x"
            f" (target <= 1), utilisation {ours['gpu_utilisation']:.3f} vs"
            f" {theirs['gpu_utilisation']:.3f}"
        )
    print(
        f"run wall time {wall:.0f} s for {len(POLICIES)} policies on {workers} workers "
        "(target <= 600 s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--part", choices=["a", "b", "all"], default="all")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--load", type=float, default=0.6, help="offered share of free GPUs")
    parser.add_argument("--background", type=float, default=0.75, help="share of hosts busy")
    parser.add_argument(
        "--patience",
        type=float,
        default=1200.0,
        help="rackwise: seconds a gang may wait for a one-spine placement",
    )
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if args.part in ("a", "all"):
        whole_philly()
    if args.part in ("b", "all"):
        llm_era(args.jobs, args.load, args.background, args.patience, args.workers)


if __name__ == "__main__":
    main()
