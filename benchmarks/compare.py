"""The fair protocol: every policy under the same queue rules, several seeds, 95% intervals.

Workloads (benchmarks/workloads.py): the whole Philly trace on Lingjun, and an LLM-era mix on
a generated 100k-GPU fabric; each seed is a different draw, the same for every policy.
Queue rules are identical for every policy and printed: EASY backfill with reservations,
preemption, patience off unless --patience is given (then every policy gets it). rackwise's
own mechanisms (fragmentation-aware objective, joint placement, moves at checkpoints) are its
policy: the baselines never get them, and rows "rackwise -frag", "-joint", "-defrag" and
"(none)" show rackwise with each, or all, switched off.

Per policy: mean [95% interval, Student t over seeds] of each metric. Then rackwise over the
best baseline on that metric (best by mean), and rackwise over each of its rows with mechanisms
off, as the mean [interval] of the per-seed ratios.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import statistics
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from benchmarks import workloads
from benchmarks.common import table
from benchmarks.workloads import REPO, VARIANTS, llm, measure, philly
from scheduler.placement import POLICIES
from scheduler.simulation.protocol import HEADLINE, against, ratios
from scheduler.simulation.protocol import table as protocol_table
from scheduler.simulation.runner import Task


def report(per_seed: dict[str, list[dict[str, Any]]], title: str) -> None:
    seeds = len(next(iter(per_seed.values())))
    print(f"\n== {title}: mean ±95% interval over {seeds} seeds")
    print(table(["policy", *(m.heading for m in HEADLINE)], protocol_table(per_seed)))
    print("\nrackwise / best baseline on each measure (paired per-seed ratios):")
    for ratio in ratios(per_seed):
        print("  " + ratio.text())
    for row in (label for label in per_seed if label.startswith("rackwise ")):
        print(f"\nrackwise / {row}: what switching those mechanisms off costs (paired):")
        for ratio in against(per_seed, row):
            print("  " + ratio.text())


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
    days, max_hours, load = args.llm_days, args.llm_max_hours, args.llm_load
    window = tuple(args.philly_days) if args.philly_days else None
    todo: dict[Key, Task] = {}
    plan = rows(policies, args.variants)
    for seed in range(seeds):
        spec, jobs, config = (
            philly(seed, window) if name == "philly" else llm(seed, days, max_hours, load)
        )
        config = config.model_copy(update={"compact_wait_s": patience})
        for label, policy, changes in plan:
            todo[(label, seed)] = Task(spec, jobs, policy, config.model_copy(update=changes))
    started = time.perf_counter()
    llm_setup = (days, max_hours, load)
    setup = {"workload": name, "window": window, "llm": llm_setup, "patience": patience}
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
    """The scheduler's and the workloads' sources, hashed: what a saved result depends on (how
    it is reported is not)."""
    digest = hashlib.sha256()
    for path in sorted([*(REPO / "scheduler").rglob("*.py"), Path(workloads.__file__).resolve()]):
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
    parser.add_argument("--llm-days", type=float, default=1.0)  # what `make bench-compare` runs
    parser.add_argument("--llm-max-hours", type=float, default=24.0)
    # offered load of the LLM mix: at 0.7 no job waits, so only traffic can differ
    parser.add_argument("--llm-load", type=float, default=0.7)
    args = parser.parse_args()
    for name in ("philly", "llm") if args.workload == "both" else (args.workload,):
        run(name, args.seeds, args.policies, args)


if __name__ == "__main__":
    main()
