"""`rackwise compare SCENARIO`: the fair protocol on any scenario, from the command line."""

from __future__ import annotations

import datetime
import json
import os
import textwrap
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from scheduler.cli.protocol_view import COMPACT, print_headline
from scheduler.placement import POLICIES, UnknownPolicyError
from scheduler.placement.hints import PEERS
from scheduler.simulation.compare import (
    UNTOLD_ROWS,
    VARIANTS,
    Comparison,
    Saved,
    compare,
    described_row,
    input_digests,
    plan,
)
from scheduler.simulation.profiles import ProfileName
from scheduler.simulation.protocol import ORACLE, UNTOLD
from scheduler.simulation.scenario import Scenario, load_scenario
from scheduler.simulation.sweep import Key

RESULTS = Path("rackwise-results")


def _names(text: str, known: list[str], flag: str) -> list[str]:
    chosen = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in known]
    if unknown:
        raise UnknownPolicyError(f"{flag}: unknown {unknown}; choose from {', '.join(known)}")
    return chosen


def _scenario(
    path: Path, load: float | None, profile: ProfileName | None, jobs: int | None
) -> tuple[Scenario, Path]:
    spec, base = load_scenario(path)
    updates: dict[str, Any] = {}
    if load is not None:
        updates["load"] = load
    if profile is not None:
        updates["fabric"] = spec.fabric.model_copy(update={"name": profile})
    if jobs is not None:
        updates["traces"] = [t.model_copy(update={"jobs": jobs}) for t in spec.traces]
    return spec.model_copy(update=updates), base


def compare_cmd(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML")],
    seeds: Annotated[
        int | None,
        typer.Option(min=1, help="seeds, draws of the workload (default: the scenario's)"),
    ] = None,
    policies: Annotated[
        str | None, typer.Option(help="comma-separated (default: the scenario's)")
    ] = None,
    variants: Annotated[
        str,
        typer.Option(
            help="rackwise rows with a mechanism off or on ('rackwise alone': every job with "
            f"the fabric to itself, a ceiling): {', '.join(VARIANTS)}; or a peer not told the "
            f"segments its users state: {', '.join(UNTOLD_ROWS)}"
        ),
    ] = "rackwise (none)",
    load: Annotated[float | None, typer.Option(min=0.01, help="offered load")] = None,
    profile: Annotated[ProfileName | None, typer.Option(help="fabric profile")] = None,
    oracle: Annotated[bool, typer.Option(help="run the oracle row")] = True,
    jobs: Annotated[int | None, typer.Option(min=1, help="at most N jobs per trace")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the document")] = None,
    wide: Annotated[
        bool,
        typer.Option(help="every measure in the table (200 columns; the document has them all)"),
    ] = False,
    save: Annotated[
        Path, typer.Option(help="each run's measures, read back by a rerun of the same code")
    ] = RESULTS / "runs",
    workers: Annotated[int, typer.Option(min=1)] = min(2, os.cpu_count() or 1),
    ray: Annotated[
        str | None,
        typer.Option(help="run on a Ray cluster: its address, or auto (needs rackwise[ray])"),
    ] = None,
) -> None:
    """Every policy on the same jobs and queue rules, several seeds, 95% intervals, the oracle
    beside them; rackwise over the best baseline on each measure."""
    spec, base = _scenario(scenario, load, profile, jobs)
    chosen = _names(policies, list(POLICIES), "--policies") if policies else spec.policies
    rows = plan(
        chosen,
        _names(variants, [*VARIANTS, *UNTOLD_ROWS], "--variants") if variants else [],
        oracle,
    )
    first = spec.seed
    seed_list = list(range(first, first + (seeds or spec.seeds)))
    # a run's key holds its row and seed, so rows and seeds can be added later and the runs
    # already saved are read back
    scenario_setup = spec.model_dump(mode="json", exclude={"policies", "seeds"})
    inputs = input_digests(spec, base)  # an edited trace is a new setup
    setup = {"scenario": scenario_setup, "base": str(base.resolve()), "inputs": inputs}
    # the compact view is laid out for 100 columns, whatever the terminal (or a pipe) says
    console = Console(width=max(Console().width, 100))
    started = time.perf_counter()
    with Progress(
        TextColumn("{task.description:<34}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        tick = _Bars(bar, len(rows) * len(seed_list))
        saved = Saved(save, setup)
        found = compare(spec, base, seed_list, rows, workers, saved, tick, ray)
    took = time.perf_counter() - started
    _print(console, spec, found, took, wide)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        document = {
            **found.document(setup),
            "date": datetime.datetime.now(datetime.UTC).date().isoformat(),
            "code": saved.code,  # the code the runs were made (or read back) with
            "described": {row: described_row(row) for row in found.per_seed},
        }
        json_out.write_text(json.dumps(document, indent=1, default=float))
        console.print(f"wrote {json_out}")


class _Bars:
    """One bar for the runs, and one per run under way (its jobs done), gone when it ends."""

    def __init__(self, bar: Progress, runs: int) -> None:
        self.bar = bar
        self.all = bar.add_task("runs", total=runs)
        self.each: dict[Key, TaskID] = {}

    def __call__(self, key: Key | None, done: int, total: int) -> None:
        if key is None or done >= 0:  # read back, or a run ended
            self.bar.update(self.all, completed=done, total=total)
            if key in self.each:
                self.bar.remove_task(self.each.pop(key))
            return
        if key not in self.each:
            self.each[key] = self.bar.add_task(f"  {key[0]}, seed {key[1]}", total=total)
        self.bar.update(self.each[key], completed=-done, total=total)


def _print(console: Console, spec: Scenario, found: Comparison, took: float, wide: bool) -> None:
    ecmp = f", ECMP at {', '.join(spec.fabric.ecmp)}" if spec.fabric.ecmp else ""
    load = "as traced" if spec.load is None else f"{spec.load:.0%}"
    console.print(
        f"{spec.name}: fabric {spec.fabric.name}{ecmp}; offered load {load}; warm-up "
        f"{spec.warmup_s / 3600:g} h; queue rules for every row: {spec.scheduling.queue_rules}; "
        f"{len(found.seeds)} seeds; {took:.0f} s",
        width=100,
    )
    console.print("rows (each peer configured as its users configure it):")
    for row in found.per_seed:
        if row in PEERS or row.endswith(UNTOLD) or row == ORACLE:
            for i, line in enumerate(textwrap.wrap(described_row(row), 74, break_on_hyphens=False)):
                console.print(f"  {row if i == 0 else '':<22} {line}", width=100)
    print_headline(console, found.per_seed, found.ratios, wide)
    gains = [c for c in found.captures if wide or c.captured is not None]
    if gains:
        console.print("the oracle (no link ever shared) over the best baseline:")
        for capture in gains:
            console.print(f"  {capture.text()}", soft_wrap=True)
    elif found.captures:
        console.print("the oracle (no link ever shared) gains nothing over the best baseline")
    for row, paired in found.variants.items():
        console.print(f"rackwise / {row} (paired):")
        for ratio in paired:
            if wide or ratio.measure.key in COMPACT:
                console.print(f"  {ratio.text()}", soft_wrap=True)
