"""Tiered pools: idle online-inference racks lent to training and taken back (queue/lending.py).

Scenario `simulations/scenarios/tiered-pools.yaml` (its header says what it models and what is
assumed). Four rows, each with rackwise placement and the same queue rules; only how the
online pool lends changes:
- static: nothing is lent (isolation, as before);
- quota: Kueue-style borrowing: every idle host beyond the reserve lent at once; reclaim
  evicts the newest borrowed gangs at once until the owner's gang fits;
- rackwise: hosts idle for idleAfterSeconds, whole racks first (the scenario's `unit: host`),
  the reserve kept; reclaim takes the fewest borrowed gangs, each at its checkpoint or at the
  deadline, whichever comes first, and defers a reclaim that would lose work to the deadline;
- rackwise racks: the same, lending whole racks only (`unit: rack`).
Measures per run (simulation/tiers.py); and each pool measured as a team whose nominal quota is
its own GPUs (simulation/tenants.py: its share of what it was owed while it had work waiting,
the least over pools, its wait p95 against the quota row's); mean ±95% interval over seeds;
differences are paired per seed. Not a pass/fail test."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from benchmarks.common import pooled_worst, table, worst_wait
from scheduler.model.policy import LendingMode
from scheduler.pools import LendUnit, PoolSpec
from scheduler.simulation.protocol import cell
from scheduler.simulation.runner import Task, in_processes, run_one
from scheduler.simulation.scenario import build_topology, load_scenario, seed_jobs
from scheduler.simulation.tenants import tenant_measures
from scheduler.simulation.tiers import tier_measures

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "simulations" / "scenarios" / "tiered-pools.yaml"
ROWS: dict[str, tuple[LendingMode, LendUnit | None]] = {
    "static": (LendingMode.OFF, None),
    "quota": (LendingMode.QUOTA, None),
    "rackwise": (LendingMode.TOPOLOGY, None),  # as the scenario says
    "rackwise racks": (LendingMode.TOPOLOGY, LendUnit.RACK),  # whole racks only
}
LENDER = "online-inference"


def measure(task: Task, report: Any, key: tuple[str, int]) -> dict[str, Any]:
    rules = next(p.lend for p in task.config.pool_rules if p.name == LENDER)
    assert rules is not None
    result = run_one(task, report, key)
    found = tier_measures(result, LENDER, rules.reclaim_within_s)
    result.entitled = dict(result.pool_gpus)  # each pool a team owed its own GPUs
    teams = tenant_measures(result)
    found["least_entitled_share"] = teams["least_entitled_share"]
    found["pools"] = teams["tenants"]
    return found


def tasks(path: Path, seeds: int) -> dict[tuple[str, int], Task]:
    scenario, base = load_scenario(path)
    spec = build_topology(scenario, base)
    out = {}
    for seed in range(seeds):
        # each job's tenant its pool (measured as teams; no queue uses it: teams are off)
        jobs = [
            j.model_copy(update={"tenant": j.pool}) for j in seed_jobs(scenario, base, spec, seed)
        ]
        config = scenario.sim_config(seed)
        for row, (mode, unit) in ROWS.items():
            policy = config.scheduling.model_copy(update={"lending": mode})
            rules = tuple(lent_by(p, unit) for p in config.pool_rules)
            update = {"scheduling": policy, "pool_rules": rules}
            out[(row, seed)] = Task(spec, jobs, "rackwise", config.model_copy(update=update))
    return out


def lent_by(pool: PoolSpec, unit: LendUnit | None) -> PoolSpec:
    if pool.lend is None or unit is None:
        return pool
    return pool.model_copy(update={"lend": pool.lend.model_copy(update={"unit": unit})})


def report(found: dict[tuple[str, int], dict[str, Any]], seeds: int) -> str:
    def of(row: str, name: str) -> list[float]:
        return [found[(row, s)][name] for s in range(seeds)]

    names = (
        ("fleet_utilisation", "fleet util", 0.01),
        ("owner_wait_p50_s", "owner p50 s", 1.0),
        ("owner_wait_p99_s", "owner p99 s", 1.0),
        ("reclaim_lost_gpu_hours", "lost GPU-h", 1.0),
        ("borrowed_gpu_hours", "borrowed GPU-h", 1.0),
        ("reclaim_lost_share", "lost/borrowed %", 0.01),
        ("reclaims_per_hour", "reclaims/h", 1.0),
        ("least_entitled_share", "least pool share %", 0.01),
    )
    rows = []
    for row in ROWS:
        late = of(row, "owner_late")
        work = [found[(row, s)]["work_gpu_hours"] for s in range(seeds)]
        pools = sorted({p for w in work for p in w})
        rows.append(
            [
                row,
                *(cell(of(row, n), scale) for n, _, scale in names),
                f"{sum(late):.0f} ({max(late):.0f})",
            ]
            + [cell([w.get(p, 0.0) for w in work]) for p in pools]
        )
    pools = sorted({p for s in range(seeds) for p in found[("static", s)]["work_gpu_hours"]})
    header = [
        "row",
        *(h for _, h, _ in names),
        "owner late (max/seed)",
        *(f"work {p} GPU-h" for p in pools),
    ]
    gain = paired(of("rackwise", "fleet_utilisation"), of("static", "fleet_utilisation"))
    quota_gain = paired(of("quota", "fleet_utilisation"), of("static", "fleet_utilisation"))
    lost_r = sum(of("rackwise", "reclaim_lost_gpu_hours"))
    lost_q = sum(of("quota", "reclaim_lost_gpu_hours"))
    ratio = f" = {lost_r / lost_q:.3f}x" if lost_q else ""
    lines = [
        table(header, rows),
        "fleet utilisation over static, points (paired per seed): "
        f"rackwise {cell(gain, 0.01)}, quota {cell(quota_gain, 0.01)}",
        "work lost to reclaims, rackwise / quota (sums over seeds): "
        f"{lost_r:.1f} / {lost_q:.1f} GPU-h{ratio}",
        "worst pool wait p95 / quota row's, rackwise: "
        + worst_wait(found, seeds, "rackwise", "quota", "pools")
        + "; each pool's p95 averaged over seeds first: "
        + pooled_worst(found, seeds, "rackwise", "quota", "pools"),
        "the same the other way round (quota row's / rackwise's): "
        + worst_wait(found, seeds, "quota", "rackwise", "pools")
        + "; averaged first: "
        + pooled_worst(found, seeds, "quota", "rackwise", "pools"),
    ]
    return "\n".join(lines)


def paired(ours: list[float], other: list[float]) -> list[float]:
    return [a - b for a, b in zip(ours, other, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--scenario", type=Path, default=SCENARIO)
    args = parser.parse_args()
    todo = tasks(args.scenario, args.seeds)
    start = time.perf_counter()
    done = 0

    def tell(key: tuple[str, int], n: int, total: int) -> None:
        nonlocal done
        if n == total:
            done += 1
            print(f"  {key[0]} seed {key[1]} done ({done}/{len(todo)})", flush=True)

    found = dict(in_processes(measure, todo, args.workers, tell))
    print(f"{args.scenario.name}: {args.seeds} seeds, {time.perf_counter() - start:.0f} s")
    print(report(found, args.seeds))


if __name__ == "__main__":
    main()
