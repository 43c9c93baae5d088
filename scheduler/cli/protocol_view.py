"""The fair protocol's table and ratios on a terminal: `simulate` and `compare` print them alike."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from scheduler.simulation.protocol import HEADLINE, Ratio
from scheduler.simulation.protocol import table as protocol_table


def print_headline(
    console: Console, per_seed: dict[str, list[dict[str, Any]]], ratios: Sequence[Ratio]
) -> None:
    """Each row's measures (mean ±95% interval over seeds), then rackwise over the best
    baseline on each measure."""
    seeds = len(next(iter(per_seed.values()), []))
    table = Table(title=f"mean ±95% interval over {seeds} seed(s)")
    table.add_column("row")
    for measure in HEADLINE:
        table.add_column(measure.heading, justify="right")
    for cells in protocol_table(per_seed):
        table.add_row(*cells)
    Console(width=max(console.width, 200)).print(table)
    print_uncounted(console, per_seed)
    console.print("rackwise / best baseline (paired per-seed ratios):")
    for ratio in ratios:
        console.print(f"  {ratio.text()}", soft_wrap=True)


def print_uncounted(console: Console, per_seed: dict[str, list[dict[str, Any]]]) -> None:
    """What the measures leave out, said under the table: no job after the warm-up at all,
    and each row whose replays ended with jobs that never finished (a row could otherwise look
    better for what it never ran)."""
    parts = []
    for row, runs in per_seed.items():
        left = [r["jobs"] - r["jobs_finished"] for r in runs if "jobs" in r]
        if any(left):
            parts.append(f"{row} {statistics.fmean(left):g} of {runs[0]['jobs']}")
    if all(r.get("measured_jobs") == 0 for runs in per_seed.values() for r in runs):
        console.print("no job was submitted after the warm-up: every measure counts nothing")
    if parts:
        console.print(
            f"jobs that never finished (mean per seed): {', '.join(parts)}; a job larger than "
            "any domain its pool allows, or in a pool without hosts, never starts, and no "
            "measure counts it",
            soft_wrap=True,
        )
