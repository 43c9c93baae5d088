"""`simulate()`: scenario in, result files out; what the CLI and the benchmarks call."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduler.simulation.metrics import policy_metrics
from scheduler.simulation.report import write_jobs, write_metrics, write_plots, write_reports
from scheduler.simulation.runner import Progress, Task, run_all
from scheduler.simulation.scenario import Scenario, build_jobs, build_topology


@dataclass(frozen=True)
class Outcome:
    metrics: dict[str, Any]
    notes: list[str]
    out: Path


def simulate(
    scenario: Scenario,
    base: Path,
    out: Path,
    workers: int = 2,
    progress: Progress | None = None,
) -> Outcome:
    spec = build_topology(scenario, base)
    jobs, bad_rows = build_jobs(scenario, base)
    config = scenario.sim_config()
    tasks = [Task(spec, jobs, policy, config) for policy in scenario.policies]
    results = run_all(tasks, workers, progress)
    metrics = {r.policy: policy_metrics(r) for r in results}
    gpus = sum(h.gpus for h in spec.hosts)
    notes = [
        f"{len(spec.hosts)} hosts, {gpus} GPUs; {len(jobs)} jobs; seed {scenario.seed}; "
        f"bad trace rows skipped: {bad_rows}",
    ]
    out.mkdir(parents=True, exist_ok=True)
    summary = {
        "name": scenario.name,
        "hosts": len(spec.hosts),
        "gpus": gpus,
        "jobs": len(jobs),
        "seed": scenario.seed,
        "bad_rows_skipped": bad_rows,
    }
    write_metrics(out, summary, metrics)
    write_jobs(out, results)
    plots = write_plots(out, results)
    write_reports(out, scenario.name, notes, metrics, plots)
    return Outcome(metrics, notes, out)
