"""`simulate()`: scenario in, result files out; what the CLI and the benchmarks call."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.simulation.metrics import policy_metrics
from scheduler.simulation.protocol import Ratio, ratios
from scheduler.simulation.report import write_jobs, write_metrics, write_plots, write_reports
from scheduler.simulation.runner import Progress, Task, run_all
from scheduler.simulation.scenario import (
    Scenario,
    build_jobs,
    build_topology,
    seed_jobs,
    with_teams,
)


@dataclass(frozen=True)
class Outcome:
    metrics: dict[str, Any]  # per policy, the first seed's full metrics
    notes: list[str]
    out: Path
    per_seed: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    headline: list[Ratio] = field(default_factory=list)


def simulate(
    scenario: Scenario,
    base: Path,
    out: Path,
    workers: int = 2,
    progress: Progress | None = None,
) -> Outcome:
    spec = build_topology(scenario, base)
    scenario = with_teams(scenario, base, spec)
    jobs, bad_rows = build_jobs(scenario, base, scenario.seed)
    seeds = [scenario.seed + i for i in range(scenario.seeds)]
    drawn = {seed: seed_jobs(scenario, base, spec, seed) for seed in seeds}
    tasks = [
        Task(spec, drawn[seed], policy, scenario.sim_config(seed))
        for seed in seeds
        for policy in scenario.policies
    ]
    results = run_all(tasks, workers, progress)
    per_seed: dict[str, list[dict[str, Any]]] = {p: [] for p in scenario.policies}
    for result in results:
        per_seed[result.policy].append(policy_metrics(result))
    metrics = {p: runs[0] for p, runs in per_seed.items()}
    first = results[: len(scenario.policies)]
    gpus = sum(h.gpus for h in spec.hosts)
    rules = (
        f"queue rules for every policy: {scenario.scheduling.queue_rules}; "
        f"fabric {scenario.fabric.name}{_ecmp(scenario)}"
    )
    notes = [
        f"{len(spec.hosts)} hosts, {gpus} GPUs; {len(jobs)} jobs; seeds {seeds[0]}..{seeds[-1]} "
        f"(arrival jitter +-{scenario.jitter_minutes:g} min, failures drawn per seed); "
        f"bad trace rows skipped: {bad_rows}",
        rules,
        *_unmeasured(per_seed, scenario.warmup_s),
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
    headline = ratios(per_seed)
    write_metrics(out, summary, metrics, per_seed, headline)
    write_jobs(out, first)
    plots = write_plots(out, first)
    write_reports(out, scenario.name, notes, per_seed, headline, plots)
    return Outcome(metrics, notes, out, per_seed, headline)


def _ecmp(scenario: Scenario) -> str:
    ecmp = scenario.fabric.ecmp
    return f" with ECMP at {', '.join(ecmp)}" if ecmp else ""


def _unmeasured(per_seed: dict[str, list[dict[str, Any]]], warmup_s: float) -> list[str]:
    """A warning when no run measured a job: every job arrived within the warm-up, so every
    measure of the protocol is empty (its zeros are not results)."""
    if any(m["measured_jobs"] for runs in per_seed.values() for m in runs):
        return []
    return [
        f"WARNING: no job was measured: every job arrived within the {warmup_s / 3600:g} h "
        "warm-up, so the measures below are empty, not zero; give more jobs (--jobs) or a "
        "scenario with a shorter warmup_s"
    ]
