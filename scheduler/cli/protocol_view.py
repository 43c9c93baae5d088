"""The fair protocol's table and ratios on a terminal: `simulate` and `compare` print them alike."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from scheduler.simulation.protocol import HEADLINE, Ratio, cell, interval

# the compact view's measures: what a user of a shared cluster asks first (fits 100 columns)
COMPACT = (
    "gpu_hours_lost",
    "jct_mean_s",
    "jct_mean_s_by_class.larger",
    "large_gang_wait_mean_s",
    "utilisation_steady",
)


def print_headline(
    console: Console,
    per_seed: dict[str, list[dict[str, Any]]],
    ratios: Sequence[Ratio],
    wide: bool = True,
) -> None:
    """Each row's measures (mean ±95% interval over seeds), then rackwise over the best
    baseline on each measure; `wide=False`: five measures in 100 columns, then in words."""
    seeds = len(next(iter(per_seed.values()), []))
    shown = HEADLINE if wide else tuple(m for m in HEADLINE if m.key in COMPACT)
    table = Table(title=f"mean ±95% interval over {seeds} seed(s)", box=box.SIMPLE_HEAD)
    table.add_column("row")
    for measure in shown:
        table.add_column(measure.heading, justify="right")
    for row, runs in per_seed.items():
        cells = [brief_cell([m.value(r) for r in runs], m.scale, wide) for m in shown]
        table.add_row(row, *cells)
    if wide:
        Console(width=max(console.width, 200)).print(table)
    else:
        console.print(table, width=100)
    print_uncounted(console, per_seed)
    said = [r for r in ratios if wide or r.measure.key in COMPACT]
    console.print("rackwise / best baseline (paired per-seed ratios):")
    for ratio in said:
        console.print(f"  {ratio.text()}", soft_wrap=wide, width=None if wide else 100)
    if not wide:
        console.print(in_words(said), width=100)


def brief_cell(values: Sequence[float | None], scale: float, wide: bool = False) -> str:
    """mean ±half-width: every digit the protocol keeps (`wide`), or briefly (thousands with
    separators, two digits of the half-width)."""
    if wide:
        return cell(values, scale)
    present = [v / scale for v in values if v is not None]
    if not present:
        return "-"
    mean, half = interval(present)
    spread = "" if math.isnan(half) else f" ±{_short(half, 2)}"
    return f"{_short(mean)}{spread}"


def _short(x: float, digits: int = 3) -> str:
    """Thousands with separators, tens to one decimal, the rest to `digits` digits."""
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}" if digits > 2 else f"{x:.0f}"
    return f"{x:.{digits}g}"


def in_words(ratios: Sequence[Ratio]) -> str:
    """The comparison's conclusion: where rackwise is better, worse, or neither."""
    by: dict[str, list[str]] = {"better": [], "worse": [], "neither": []}
    for r in ratios:
        verdict = r.verdict if r.verdict in ("better", "worse") else "neither"
        by[verdict].append(f"{r.measure.heading} ({r.mean:.2f}x vs {r.baseline})")
    parts = [f"better on {', '.join(by['better'])}" if by["better"] else ""]
    parts.append(f"worse on {', '.join(by['worse'])}" if by["worse"] else "")
    parts.append(f"within the interval on {', '.join(by['neither'])}" if by["neither"] else "")
    said = "; ".join(p for p in parts if p)
    return f"In words: against the best configured peer on each measure, rackwise is {said}."


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
