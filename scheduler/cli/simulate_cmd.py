"""`rackwise simulate [SCENARIO]`: replay traces through rackwise and the baselines."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from scheduler.bundled import bundled
from scheduler.cli.protocol_view import print_headline
from scheduler.placement import POLICIES, UnknownPolicyError
from scheduler.simulation.api import simulate
from scheduler.simulation.report import COLUMNS, rows
from scheduler.simulation.scenario import load_scenario

DEFAULT = Path("simulations/scenarios/default.yaml")
SHORT = {
    "least-allocated": "least-alloc",
    "kueue-best-fit": "kueue-bf",
    "kueue-least-free": "kueue-lf",
}


def default_scenario() -> Path:
    """The default scenario: in the working directory (a checkout), else the bundled one."""
    here = Path.cwd() / DEFAULT
    return here if here.exists() else bundled(str(DEFAULT))


def simulate_cmd(
    scenario: Annotated[
        Path | None, typer.Argument(help="scenario YAML (default: bundled)")
    ] = None,
    out: Annotated[Path, typer.Option(help="folder for metrics, jobs, plots, report")] = Path(
        "rackwise-results/latest"
    ),
    policies: Annotated[str | None, typer.Option(help="comma-separated subset")] = None,
    seed: Annotated[int | None, typer.Option(help="override the scenario's seed")] = None,
    jobs: Annotated[int | None, typer.Option(min=1, help="at most N jobs per trace")] = None,
    skip_bad_rows: Annotated[bool, typer.Option(help="count malformed rows, do not stop")] = False,
    workers: Annotated[int, typer.Option(min=1, help="policies simulated in parallel")] = min(
        2, os.cpu_count() or 1
    ),
) -> None:
    """Simulate a scenario with every policy and compare them side by side."""
    spec, base = load_scenario(scenario or default_scenario())
    updates: dict[str, object] = {"skip_bad_rows": skip_bad_rows or spec.skip_bad_rows}
    if policies:
        chosen = [p.strip() for p in policies.split(",") if p.strip()]
        unknown = [p for p in chosen if p not in POLICIES]
        if unknown:
            raise UnknownPolicyError(
                f"--policies: unknown {unknown}; choose from {', '.join(POLICIES)}"
            )
        updates["policies"] = chosen
    if seed is not None:
        updates["seed"] = seed
    if jobs is not None:
        updates["traces"] = [t.model_copy(update={"jobs": jobs}) for t in spec.traces]
    spec = spec.model_copy(update=updates)
    console = Console()
    with Progress(
        TextColumn("{task.description:>18}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} jobs"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        tasks: dict[str, TaskID] = {}

        def tick(policy: str, done: int, total: int) -> None:
            if policy not in tasks:
                tasks[policy] = bar.add_task(policy, total=total)
            bar.update(tasks[policy], completed=done)

        outcome = simulate(spec, base, out, workers=workers, progress=tick)
    # metrics as rows, policies as columns: seven policies fit a terminal, eleven metrics do not
    table = Table(title=f"rackwise simulate: {spec.name}")
    table.add_column("metric")
    body = rows(outcome.metrics)
    for row in body:
        table.add_column(SHORT.get(row[0], row[0]), justify="right")
    for i, (_, heading, _) in enumerate(COLUMNS, start=1):
        table.add_row(heading, *(row[i] for row in body))
    Console(width=max(console.width, 110)).print(table)
    for note in outcome.notes:
        console.print(note, soft_wrap=True)
    print_headline(console, outcome.per_seed, outcome.headline)
    console.print(f"wrote {out}/metrics.json, jobs.csv, report.md, report.html and plots")
