"""Simulation benchmark: how long replays take, and how that grows.

1. The whole Philly trace (79,940 jobs) as the fair protocol runs it
   (simulations/scenarios/philly-real.yaml: Lingjun, 85% offered load, EASY backfill, seed 0):
   Kueue BestFit and rackwise, one core each, and their ratio.
2. Scaling: the LLM-era mix (scheduler/simulation/synthetic.py) at 85% offered load, EASY
   backfill, on leaf-spine fabrics of 2,560, 25,600 and 100,352 GPUs, with 10k and 100k jobs
   (and 1M on the largest with --million, ~1 hour); per policy and fabric, the exponent of a
   least-squares fit of log(run time) on log(jobs) (1: linear; n log n over 10k-1M reads
   about 1.1).

Wall time on this machine (2 shared cores), the load average printed beside it: a
measurement, not a test."""

from __future__ import annotations

import argparse
import math
import os
import resource
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import table
from scheduler.model.policy import Backfill
from scheduler.simulation.compare import plan, tasks
from scheduler.simulation.config import SimConfig
from scheduler.simulation.runner import Task, run_one
from scheduler.simulation.scenario import at_load, load_scenario
from scheduler.simulation.synthetic import llm_mix
from scheduler.simulation.trace import TraceJob
from scheduler.topology import generate

REPO = Path(__file__).resolve().parents[1]
PHILLY = REPO / "simulations" / "scenarios" / "philly-real.yaml"
POLICIES = ("kueue-best-fit", "rackwise")
# name -> (spines, racks per spine): 8 hosts x 8 GPUs per rack
FABRICS = {"2,560": (5, 8), "25,600": (10, 40), "100,352": (16, 98)}
JOBS_PER_HOUR = 20.0


def timed(task: Task) -> float:
    start = time.perf_counter()
    run_one(task)
    return time.perf_counter() - start


def whole_philly() -> None:
    scenario, base = load_scenario(PHILLY)
    runs = tasks(scenario, base, [0], plan(POLICIES, [], False))
    took = {key[0]: timed(task) for key, task in runs.items()}
    jobs = len(next(iter(runs.values())).jobs)
    print(f"\n== whole Philly ({jobs} jobs), philly-real.yaml seed 0, one core each")
    for policy, seconds in took.items():
        print(f"{policy:16} {seconds:7.1f} s")
    print(f"rackwise / BestFit: {took['rackwise'] / took['kueue-best-fit']:.2f}x")


def synthetic(gpus: int, jobs: int, seed: int = 0) -> list[TraceJob]:
    days = jobs / (JOBS_PER_HOUR * 24)
    drawn = llm_mix(seed, days * 1.05, JOBS_PER_HOUR)[:jobs]
    return at_load(drawn, gpus, 0.85)


def scaling(sizes: Sequence[int], fabrics: Sequence[str], policies: Sequence[str]) -> None:
    rows = []
    config = SimConfig.of(backfill=Backfill.EASY)
    for name in fabrics:
        spines, racks = FABRICS[name]
        spec = generate(blocks=spines, racks=racks, hosts=8, gpus=8)
        gpus = sum(h.gpus for h in spec.hosts)
        for policy in policies:
            times = []
            for n in sizes:
                jobs = synthetic(gpus, n)
                seconds = timed(Task(spec, jobs, policy, config))
                times.append(seconds)
                print(f"{name} GPUs, {policy}, {n:,} jobs: {seconds:.1f} s", flush=True)
            rows.append([name, policy, *(f"{t:.1f}" for t in times), f"{slope(sizes, times):.2f}"])
    head = ["GPUs", "policy", *(f"{n:,} jobs (s)" for n in sizes), "exponent"]
    print("\n== run time against jobs (LLM-era mix, 85% offered load, EASY backfill)")
    print(table(head, rows))


def slope(xs: Sequence[int], ys: Sequence[float]) -> float:
    """Least-squares slope of log(y) on log(x)."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(max(y, 1e-9)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    den = sum((x - mx) ** 2 for x in lx)
    return sum((x - mx) * (y - my) for x, y in zip(lx, ly, strict=True)) / den if den else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--million", action="store_true", help="add 1M jobs (~1 hour)")
    parser.add_argument("--skip-philly", action="store_true")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--fabrics", default=";".join(FABRICS), help="GPUs, ';'-separated")
    parser.add_argument("--policies", default=",".join(POLICIES))
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    if not args.skip_philly:
        whole_philly()
    sizes = [10_000, 100_000, 1_000_000] if args.million else [10_000, 100_000]
    if not args.skip_scaling:
        scaling(sizes, args.fabrics.split(";"), args.policies.split(","))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"load average after: {os.getloadavg()[0]:.2f}; peak RSS {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
