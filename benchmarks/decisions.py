"""Decision digests: one seeded run per scenario and policy (and rackwise with defragmentation
on, off by default), cut to its first jobs, reduced to a digest of every start (time, job,
hosts), eviction, move and finish. A change meant to make the simulator or the queue faster
must leave every digest as it was: run this before and after (`python -m benchmarks.decisions`,
~5 minutes on 2 cores) and compare the lines.

Not a pass/fail test: the digests move whenever a decision rule is meant to change."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import time
from pathlib import Path

from scheduler.simulation.compare import VARIANTS, plan, tasks
from scheduler.simulation.records import SimResult
from scheduler.simulation.runner import run_one
from scheduler.simulation.scenario import load_scenario

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "simulations" / "scenarios"
DEFRAG = "rackwise +defrag"  # a variant row: defragmentation is off by default
# (scenario, jobs kept, rows): the protocol's scenarios, cut so that each run takes seconds
CASES: tuple[tuple[str, int, tuple[str, ...]], ...] = (
    ("default.yaml", 3000, ("rackwise", "kueue-best-fit", "slurm-tree", "first-fit", DEFRAG)),
    ("philly-real.yaml", 20000, ("rackwise", "kueue-best-fit")),
    ("tiered-pools.yaml", 3000, ("rackwise",)),
    ("philly-teams.yaml", 6000, ("rackwise",)),
    ("modern-pods.yaml", 600, ("rackwise", "kueue-best-fit")),
    (
        "modern-nvl72.yaml",
        600,
        ("rackwise", "slurm-tree", "kueue-best-fit", "kai-bin-pack", "slurm-block"),
    ),
    ("llm-mix-demand.yaml", 2000, ("rackwise", "kueue-least-free", DEFRAG)),
)


def digest(result: SimResult) -> str:
    h = hashlib.blake2b(digest_size=8)
    for at, job, hosts in result.starts:
        h.update(f"s{at!r}{job}{sorted(hosts.items())}".encode())
    for at, e in result.evictions:
        h.update(f"e{at!r}{e}".encode())
    for at, m in result.moves:
        h.update(f"m{at!r}{m.key}{sorted(m.placement.hosts())}".encode())
    for s in result.jobs:
        h.update(f"f{s.job.id}{s.finish!r}".encode())
    return h.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    for name, keep, rows in CASES:
        scenario, base = load_scenario(SCENARIOS / name)
        policies = [r for r in rows if r not in VARIANTS]
        variants = [r for r in rows if r in VARIANTS]
        rows_run = plan(policies, variants, False)
        for key, task in tasks(scenario, base, [args.seed], rows_run).items():
            task = dataclasses.replace(task, jobs=task.jobs[:keep])
            start = time.perf_counter()
            result = run_one(task)
            wall = time.perf_counter() - start
            print(f"{name:22} {key[0]:18} {digest(result)}  ({wall:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
