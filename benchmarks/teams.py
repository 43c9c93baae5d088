"""Teams sharing a cluster: quotas, borrowing and reclaim (teams/queues.py, teams/quotas.py).

Scenario `simulations/scenarios/philly-teams.yaml` (its header says what it models): Philly's
virtual clusters as teams, each a queue of one cohort with a nominal quota proportional to its
share of the trace's GPU-time. Four rows, each with rackwise placement and the same queue rules;
only how quotas are handled changes:
- none: no queues at all (what the quotas cost in utilisation is measured against it);
- static: each team only its nominal quota, nothing lent;
- kueue: cohort borrowing as Kueue does it, reclaim of the newest borrowers at once;
- rackwise: reclaim of the borrowers that lose the least work (those with a checkpoint before the
  owner's deadline wait for it), then the fewest gangs.
Measures per run (simulation/tenants.py): utilisation while jobs arrive; each team's entitled
share (GPU-time it held of what it was owed while it had work waiting), the least over teams and
Jain's index over teams; work lost to reclaims; each team's wait p95, and the worst ratio of a
team's wait p95 to its wait p95 under the kueue row. Mean and 95% interval over seeds; not a
pass/fail test."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from benchmarks.common import pooled_worst, table, worst_wait
from scheduler.model.policy import LendingMode
from scheduler.simulation.metrics import utilisation
from scheduler.simulation.protocol import cell
from scheduler.simulation.runner import Task, in_processes, run_one
from scheduler.simulation.scenario import build_topology, load_scenario, seed_jobs, with_teams
from scheduler.simulation.tenants import tenant_measures
from scheduler.teams import Teams

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "simulations" / "scenarios" / "philly-teams.yaml"
ROWS: dict[str, LendingMode | None] = {
    "none": None,
    "static": LendingMode.OFF,
    "kueue": LendingMode.QUOTA,
    "rackwise": LendingMode.TOPOLOGY,
}


def measure(task: Task, report: Any, key: tuple[str, int]) -> dict[str, Any]:
    result = run_one(task, report, key)
    found = tenant_measures(result)
    found["utilisation"] = utilisation(result, None)
    found["wall_s"] = result.wall_seconds
    return found


def tasks(path: Path, seeds: int, rows: list[str]) -> dict[tuple[str, int], Task]:
    scenario, base = load_scenario(path)
    spec = build_topology(scenario, base)
    scenario = with_teams(scenario, base, spec)
    out = {}
    for seed in range(seeds):
        jobs = seed_jobs(scenario, base, spec, seed)
        config = scenario.sim_config(seed)
        for row in rows:
            mode = ROWS[row]
            if mode is None:
                changed = config.model_copy(update={"teams": Teams()})
            else:
                policy = config.scheduling.model_copy(update={"lending": mode})
                changed = config.model_copy(update={"scheduling": policy})
            out[(row, seed)] = Task(spec, jobs, "rackwise", changed)
    return out


def report(found: dict[tuple[str, int], dict[str, Any]], seeds: int, rows: list[str]) -> str:
    def of(row: str, name: str) -> list[float]:
        values = [found[(row, s)][name] for s in range(seeds)]
        return [v for v in values if v is not None]

    names = (
        ("utilisation", "utilisation", 0.01),
        ("least_entitled_share", "least entitled share", 0.01),
        ("jain_index", "Jain (entitled shares)", 1.0),
        ("reclaimed_gpu_h_lost", "lost to reclaims GPU-h", 1.0),
        ("reclaims", "reclaims", 1.0),
        ("wall_s", "run s", 1.0),
    )
    body = [[row, *(cell(of(row, n), scale) for n, _, scale in names)] for row in rows]
    lines = [table(["row", *(h for _, h, _ in names)], body)]
    if "kueue" in rows:
        for row in (r for r in rows if r not in ("kueue", "none")):
            lines.append(
                f"worst team wait p95 / kueue's, {row}: "
                + worst_wait(found, seeds, row, "kueue", "tenants")
                + "; each team's p95 averaged over seeds first: "
                + pooled_worst(found, seeds, row, "kueue", "tenants")
            )
        if "rackwise" in rows:  # the same the other way round: what chance alone gives
            lines.append(
                "worst team wait p95 / rackwise's, kueue: "
                + worst_wait(found, seeds, "kueue", "rackwise", "tenants")
                + "; averaged first: "
                + pooled_worst(found, seeds, "kueue", "rackwise", "tenants")
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--scenario", type=Path, default=SCENARIO)
    parser.add_argument("--rows", default=",".join(ROWS), help="rows, comma-separated")
    args = parser.parse_args()
    rows = args.rows.split(",")
    todo = tasks(args.scenario, args.seeds, rows)
    start = time.perf_counter()
    done: set[tuple[str, int]] = set()

    def tell(key: tuple[str, int], n: int, total: int) -> None:
        if n == total and key not in done:
            done.add(key)
            print(f"  {key[0]} seed {key[1]} done ({len(done)}/{len(todo)})", flush=True)

    found = dict(in_processes(measure, todo, args.workers, tell))
    print(f"{args.scenario.name}: {args.seeds} seeds, {time.perf_counter() - start:.0f} s")
    print(report(found, args.seeds, rows))


if __name__ == "__main__":
    main()
