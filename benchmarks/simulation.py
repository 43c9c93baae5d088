"""Simulation benchmark: the whole Philly CSV (79,940 jobs) on the Lingjun topology (8 GPUs per
host), rackwise only, the default fabric model: wall time and peak memory (max RSS of this
process).

Policy comparisons live in `rackwise compare` (the fair protocol: same queue rules for every
policy, several seeds, intervals, the oracle). The earlier LLM-era comparison here gave
patience to rackwise alone and burst 10,000 jobs into a 75%-busy fabric; it is gone rather
than kept beside it.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from scheduler.simulation.config import SimConfig
from scheduler.simulation.metrics import policy_metrics
from scheduler.simulation.runner import Task, run_one
from scheduler.simulation.trace import load_trace
from scheduler.topology import from_lingjun_csv

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
    print(f"\n== whole Philly ({len(jobs)} jobs) on Lingjun (847 hosts x 8 GPUs), rackwise")
    print(
        f"wall {wall:.1f} s (loading {loaded:.1f} s), peak RSS {peak_mb:.0f} MB, "
        f"{m['decisions']} decisions, p99 {m['decision_latency_p99_ms']:.1f} ms, "
        f"finished {m['jobs_finished']}, unplaced {m['jobs_unplaced']}"
    )


def main() -> None:
    argparse.ArgumentParser(description=__doc__).parse_args()
    whole_philly()


if __name__ == "__main__":
    main()
