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
from collections.abc import Iterator

from scheduler.model.gang import ParallelShape
from scheduler.model.training import Model
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
    for now in arrivals(rng, days, jobs_per_hour):
        gpus = rng.choices(sizes, weights)[0]
        duration = min(rng.lognormvariate(math.log(median_s(gpus)), SIGMA), CLIP_S)
        out.append(TraceJob(id=f"llm{len(out)}", submit_s=now, duration_s=duration, gpus=gpus))
    return out


def arrivals(rng: random.Random, days: float, jobs_per_hour: float) -> Iterator[float]:
    """Poisson arrival times over `days`, drawn from `rng` one at a time (the caller's draws
    for each job come between, so a mix's sequence is the same however it is written)."""
    now, rate = 0.0, jobs_per_hour / 3600.0
    while True:
        now += rng.expovariate(rate)
        if now >= days * 86400:
            return
        yield now


# Online inference that follows a day (`format: diurnal-serving`): a service adds replicas as its
# traffic rises and lets them go as it falls, once a day. The daily cycle is the one production
# LLM serving shows (Jaiswal et al., "SageServe: Optimizing LLM Serving on Cloud Data Centers
# with Forecast Aware Auto-Scaling", SIGMETRICS'26, Microsoft Office 365: interactive load peaks
# in working hours and leaves GPUs idle off-peak). The shape is our assumption, not the paper's
# numbers: a raised cosine peaking at PEAK_HOUR, its trough PEAK_TO_TROUGH times below the peak;
# replicas of one or two 8-GPU hosts living an hour on average (exponential).
PEAK_HOUR, PEAK_TO_TROUGH = 14.0, 3.0
REPLICA_S, REPLICA_HOSTS = 3600.0, {8: 0.7, 16: 0.3}


def demand(t: float, peak_gpus: float) -> float:
    """GPUs the service wants at time t (seconds from midnight of day 0)."""
    phase = 2 * math.pi * (t / 86400.0 - PEAK_HOUR / 24.0)
    low = 1.0 / PEAK_TO_TROUGH
    return peak_gpus * (low + (1.0 - low) * (1.0 + math.cos(phase)) / 2.0)


def diurnal_serving(seed: int, days: float, peak_gpus: float) -> list[TraceJob]:
    """Replica arrivals whose concurrency follows `demand` (Little's law: arrivals at
    demand / (mean replica GPUs x mean life), thinned from the peak rate), a draw per seed."""
    rng = random.Random(f"diurnal-serving/{seed}")
    sizes, weights = list(REPLICA_HOSTS), list(REPLICA_HOSTS.values())
    mean_gpus = sum(g * w for g, w in REPLICA_HOSTS.items())
    peak_rate = peak_gpus / (mean_gpus * REPLICA_S)
    out: list[TraceJob] = []
    now = 0.0
    while peak_rate > 0:
        now += rng.expovariate(peak_rate)
        if now >= days * 86400:
            break
        if rng.random() * peak_gpus > demand(now, peak_gpus):
            continue
        gpus = rng.choices(sizes, weights)[0]
        life = rng.expovariate(1.0 / REPLICA_S)
        out.append(
            TraceJob(
                id=f"srv{len(out)}",
                submit_s=now,
                duration_s=max(life, 60.0),
                gpus=gpus,
                pods=gpus // 8,
                pool="online-inference",
            )
        )
    return out


# Today's mix (`format: modern-mix`): jobs that state their parallel shape and model, so their
# communication follows from them (topology/traffic.py). The classes and the shapes are shaped
# after published practice; every share, size range and run time is our assumption:
# - debugging and evaluation, 1-8 GPUs, compute only: they state no model and communicate
#   nothing the fabric model counts, wherever they land (Acme, NSDI'24: most jobs are small
#   and short);
# - dense fine-tunes, 16-128 GPUs, data parallel (FSDP) over an 8B or 70B model (Llama 3);
# - MoE training with expert parallelism 8-64 over 1-8 hosts of 8 GPUs (DeepSeek-V3 limits a
#   token to 4 nodes; Mixtral-8x7B-like sizes: 32 layers, hidden 4096, top-2 of 8 experts);
# - dense pre-training, 256-1,024 GPUs, TP 8 inside a host, PP 4-8 (Llama 3 70B: 80 layers,
#   hidden 8,192, sequences of 8,192).
# Each class: (share of jobs, GPU sizes, median run time in seconds).
MODERN = {
    "debug": (0.45, (1, 2, 4, 8), 1800.0),
    "finetune": (0.30, (16, 32, 64, 128), 7200.0),
    "moe": (0.15, (64, 128, 256), 14400.0),
    "pretrain": (0.10, (256, 512, 1024), 21600.0),
}
LLAMA_8B = Model(params_b=8, hidden=4096, layers=32, seq=8192, micro_batches=4)
LLAMA_70B = Model(params_b=70, hidden=8192, layers=80, seq=8192, micro_batches=16)
# what each GPU of an EP group reduces (attention and its share of the experts), and the
# parameters a token uses: Mixtral-8x7B-like, 47B in all, 13B active
MIXTRAL = Model(
    params_b=8, active_params_b=13, hidden=4096, layers=32, seq=4096, micro_batches=8,
    moe_share=1.0, topk=2,
)  # fmt: skip


def modern_mix(
    seed: int, days: float, largest: int, jobs_per_hour: float = 20.0, overlap: float = 0.0
) -> list[TraceJob]:
    """Poisson arrivals of the classes above, sizes up to `largest` GPUs (a class with no size
    that small is left out), a draw per seed; every model hides `overlap` of its communication
    behind compute (traffic.Model)."""
    rng = random.Random(f"modern-mix/{seed}")
    names = [n for n, (_, sizes, _) in MODERN.items() if min(sizes) <= largest]
    weights = [MODERN[n][0] for n in names]
    out: list[TraceJob] = []
    for now in arrivals(rng, days, jobs_per_hour):
        kind = rng.choices(names, weights)[0]
        gpus = rng.choice([g for g in MODERN[kind][1] if g <= largest])
        duration = min(rng.lognormvariate(math.log(MODERN[kind][2]), SIGMA), CLIP_S)
        shape, model = _shaped(rng, kind, gpus)
        if model is not None and overlap:
            model = model.model_copy(update={"overlap": overlap})
        out.append(
            TraceJob(
                id=f"{kind}{len(out)}",
                submit_s=now,
                duration_s=duration,
                gpus=gpus,
                shape=shape,
                model=model,
                comm_share=0.0 if kind == "debug" else None,
            )
        )
    return out


def _shaped(rng: random.Random, kind: str, gpus: int) -> tuple[ParallelShape | None, Model | None]:
    if kind == "debug":
        return None, None
    if kind == "finetune":
        return ParallelShape(dp=gpus), rng.choice([LLAMA_8B, LLAMA_8B, LLAMA_70B])
    if kind == "moe":
        ep = rng.choice([e for e in (8, 16, 32, 64) if gpus % e == 0])
        return ParallelShape(dp=gpus, ep=ep), MIXTRAL
    pp = rng.choice([4, 8]) if gpus >= 512 else 4
    return ParallelShape(dp=gpus // (8 * pp), tp=8, pp=pp), LLAMA_70B
