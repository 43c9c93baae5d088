"""What the fair protocol runs: its workloads, rackwise's rows with a mechanism switched off, and
what one run measures. A saved run is valid for this module's and the scheduler's sources
(`benchmarks/compare.py` hashes both); how results are reported is not part of it.

Workloads (each seed is a different draw, the same for every policy):
  philly  the bundled Philly trace (79,940 jobs; --philly-days takes a window of it) on Lingjun
          (847 hosts x 8 GPUs), gang sizes x8, arrivals x2.5 so the trace offers ~70% of the
          GPUs, sustained (not a burst into a pre-fragmented cluster); the seed jitters every
          arrival by up to +-10 minutes and draws node failures (MTBF 2,000 h, 4 h repair,
          checkpoints every 30 min, 5 min restart).
  llm     an LLM-era mix on a generated 100k-GPU fabric (16 spines x 98 racks x 8 hosts x 8
          GPUs): gang sizes 8..2,048 GPUs with most jobs small and most GPU time in few large
          gangs (the distribution is stated below; it is our assumption, not a published
          trace), log-normal run times, Poisson arrivals offering ~70% of the GPUs (--llm-load).
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

from scheduler.simulation.config import Failures, SimConfig
from scheduler.simulation.metrics import policy_metrics
from scheduler.simulation.runner import Task, run_one
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
    failures = Failures(mtbf_hours=2000, mttr_hours=4, checkpoint_minutes=30)
    return from_lingjun_csv(LINGJUN, gpus=8), jittered, SimConfig(seed=seed, failures=failures)


def llm(
    seed: int, days: float, max_hours: float, load: float
) -> tuple[Any, list[TraceJob], SimConfig]:
    """Poisson arrivals offering `load` of the GPUs (GPU-seconds asked per GPU-second)."""
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
    rate = load * capacity / (mean_gpus * mean_s)  # jobs per second
    jobs, now, i = [], 0.0, 0
    while now < days * 86400:
        now += rng.expovariate(rate)
        duration = min(rng.lognormvariate(math.log(median_s), sigma), cap_s)
        gpus = rng.choices(sizes, weights)[0]
        jobs.append(TraceJob(id=f"llm{i}", submit_s=now, duration_s=duration, gpus=gpus))
        i += 1
    return spec, jobs, SimConfig(seed=seed, time_limit_s=0.5)


# rackwise with each of its own mechanisms switched off (SimConfig): rows of their own, never
# taken as the baseline
VARIANTS: dict[str, dict[str, Any]] = {
    "rackwise -frag": {"fragmentation_share": 0.0},
    "rackwise -joint": {"joint_gangs": 0},
    "rackwise -defrag": {"defrag_moves_per_hour": 0.0},
    "rackwise (none)": {"fragmentation_share": 0.0, "joint_gangs": 0, "defrag_moves_per_hour": 0.0},
}


def measure(task: Task) -> dict[str, Any]:
    """One run's metrics, computed in the worker (the full result stays there)."""
    return policy_metrics(run_one(task))
