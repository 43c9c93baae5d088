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
import hashlib
import json
import math
import multiprocessing as mp
import random
import statistics
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from benchmarks.common import table
from scheduler.placement import POLICIES
from scheduler.simulation.config import Failures, SimConfig
from scheduler.simulation.metrics import policy_metrics
from scheduler.simulation.protocol import HEADLINE, ratios
from scheduler.simulation.protocol import table as protocol_table
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
    patience = args.patience
    days, max_hours = args.llm_days, args.llm_max_hours
    window = tuple(args.philly_days) if args.philly_days else None
    todo: dict[Key, Task] = {}
    plan = rows(policies, args.variants)
    for seed in range(seeds):
        spec, jobs, config = (
            philly(seed, window) if name == "philly" else llm(seed, days, max_hours)
        )
        config = config.model_copy(update={"compact_wait_s": patience})
        for label, policy, changes in plan:
            todo[(label, seed)] = Task(spec, jobs, policy, config.model_copy(update=changes))
    started = time.perf_counter()
    setup = {"workload": name, "window": window, "llm": (days, max_hours), "patience": patience}
    done = measure_all(todo, args.workers, Saved(args.save, setup) if args.save else None)
    results = {label: [done[(label, s)] for s in range(seeds)] for label, _, _ in plan}
    task = next(iter(todo.values()))
    rules = (
        f"backfill {task.config.backfill}, preemption {task.config.preemption}, "
        f"patience {patience:.0f} s for every policy"
    )
    took = time.perf_counter() - started
    print(f"\n{name}: {len(task.jobs)} jobs per seed; queue rules: {rules}; {took:.0f} s")
    report(results, name)
    mechanisms(results)


def measure(task: Task) -> dict[str, Any]:
    """One run's metrics, computed in the worker (the full result stays there)."""
    return policy_metrics(run_one(task))


Key = tuple[str, int]  # (row label, seed)


def measure_all(todo: dict[Key, Task], workers: int, saved: Saved | None) -> dict[Key, Any]:
    """Every task's metrics: those saved by an earlier run of the same code and setup are read
    back; the others run (`workers` at a time) and are saved as each ends, so a long protocol
    that is stopped loses only the runs under way."""
    done = {key: m for key in todo if saved is not None and (m := saved.load(key)) is not None}
    left = [key for key in todo if key not in done]
    if done:
        print(f"{len(done)} runs read back from {saved}; {len(left)} to run", flush=True)
    ctx = mp.get_context("spawn")  # a clean interpreter per worker: no inherited threads
    with ProcessPoolExecutor(max_workers=max(workers, 1), mp_context=ctx) as pool:
        futures = {pool.submit(measure, todo[key]): key for key in left}
        for future in as_completed(futures):
            key = futures[future]
            done[key] = future.result()
            print(f"  {key[0]}, seed {key[1]}: done ({len(done)} of {len(todo)})", flush=True)
            if saved is not None:
                saved.store(key, done[key])
    return done


class Saved:
    """Per-run metrics on disk, valid for one version of the code and one setup: a file is
    read back only when both digests match, so a changed simulator never reuses a result."""

    def __init__(self, folder: Path, setup: dict[str, Any]) -> None:
        self.folder = folder
        self.setup = json.dumps(setup, sort_keys=True)
        self.code = code_digest()
        folder.mkdir(parents=True, exist_ok=True)

    def __str__(self) -> str:
        return str(self.folder)

    def path(self, key: Key) -> Path:
        digest = hashlib.sha256(f"{self.setup}/{key[0]}/{key[1]}".encode()).hexdigest()[:16]
        return self.folder / f"{key[0].replace(' ', '_')}-{key[1]}-{digest}.json"

    def load(self, key: Key) -> Any:
        path = self.path(key)
        if not path.exists():
            return None
        found = json.loads(path.read_text())
        return found["metrics"] if found.get("code") == self.code else None

    def store(self, key: Key, metrics: dict[str, Any]) -> None:
        body = {"code": self.code, "setup": self.setup, "row": key[0], "seed": key[1]}
        path = self.path(key)
        part = path.with_suffix(".part")  # renamed when whole: a stopped write is never read
        part.write_text(json.dumps({**body, "metrics": metrics}, default=float))
        part.replace(path)


def code_digest() -> str:
    """The simulator's and this protocol's sources, hashed: what a saved result depends on."""
    digest = hashlib.sha256()
    for path in sorted([*(REPO / "scheduler").rglob("*.py"), Path(__file__).resolve()]):
        digest.update(path.read_bytes())
    return digest.hexdigest()


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
    # each run's metrics are saved here as it ends and read back by a rerun of the same code
    parser.add_argument("--save", type=Path, metavar="DIR")
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
