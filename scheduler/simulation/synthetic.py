"""The LLM-era job mix (`format: llm-mix` in a scenario): a workload drawn per seed, shaped after
the published characterisation of an LLM development cluster (Hu et al., "Characterization of
Large Language Model Development in the Datacenter", NSDI'24, Shanghai AI Lab's Acme: two
clusters of ~2,300-2,400 GPUs). What we take from it is qualitative: most jobs are small and
short (evaluation and debugging, 1-8 GPUs), a few pre-training gangs of hundreds to a thousand
GPUs hold most of the GPU time and run for hours. The exact shares below are our assumption,
stated here and in docs/design.md, not numbers from the paper.
"""

from __future__ import annotations

import math
import random

from scheduler.simulation.trace import TraceJob

# GPUs per job: share of jobs
SIZES: dict[int, float] = {
    1: 0.40, 2: 0.05, 4: 0.10, 8: 0.25, 16: 0.07, 32: 0.05, 64: 0.04,
    128: 0.02, 256: 0.012, 512: 0.006, 1024: 0.002,
}  # fmt: skip
# run time: log-normal with this median by size (seconds), sigma 1.2, clipped to a day
SMALL_MEDIAN_S, MEDIUM_MEDIAN_S, LARGE_MEDIAN_S = 1800.0, 7200.0, 21600.0
SIGMA, CLIP_S = 1.2, 86400.0


def median_s(gpus: int) -> float:
    if gpus <= 8:
        return SMALL_MEDIAN_S
    return MEDIUM_MEDIAN_S if gpus <= 64 else LARGE_MEDIAN_S


def llm_mix(seed: int, days: float, jobs_per_hour: float = 20.0) -> list[TraceJob]:
    """Poisson arrivals at `jobs_per_hour` for `days` (the scenario's `load` then rescales the
    arrivals to an offered load); a different draw for every seed."""
    rng = random.Random(f"llm-mix/{seed}")
    sizes, weights = list(SIZES), list(SIZES.values())
    out: list[TraceJob] = []
    now, rate = 0.0, jobs_per_hour / 3600.0
    while True:
        now += rng.expovariate(rate)
        if now >= days * 86400:
            return out
        gpus = rng.choices(sizes, weights)[0]
        duration = min(rng.lognormvariate(math.log(median_s(gpus)), SIGMA), CLIP_S)
        out.append(TraceJob(id=f"llm{len(out)}", submit_s=now, duration_s=duration, gpus=gpus))
