"""Helpers shared by the benchmarks: plain-text tables, the worst team's wait ratio."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduler.simulation.protocol import cell

Found = dict[tuple[str, int], dict[str, Any]]


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def worst_wait(found: Found, seeds: int, row: str, base: str, part: str) -> str:
    """Per seed, the largest ratio over a run's teams (`found[...][part]`, simulation/tenants.py)
    of a team's wait p95 to its wait p95 in the `base` row (a p95 under a minute compares
    against a minute); mean and interval over seeds."""
    ratios = []
    for s in range(seeds):
        ours, theirs = found[(row, s)][part], found[(base, s)][part]
        pairs = [
            (m["wait_p95_s"], (theirs.get(t) or {}).get("wait_p95_s")) for t, m in ours.items()
        ]
        known = [a / max(b, 60.0) for a, b in pairs if a is not None and b is not None]
        ratios.append(max(known, default=0.0))
    return cell(ratios, 1.0)


def pooled_worst(found: Found, seeds: int, row: str, base: str, part: str) -> str:
    """Per team, its wait p95 averaged over seeds in `row` over the same in `base` (each at
    least a minute); the largest over teams, and which. A maximum of per-seed ratios over
    several teams exceeds 1 by chance alone; this one averages the noise out first."""
    ours: dict[str, list[float]] = {}
    theirs: dict[str, list[float]] = {}
    for s in range(seeds):
        for mine, source in ((ours, found[(row, s)][part]), (theirs, found[(base, s)][part])):
            for team, m in source.items():
                if m["wait_p95_s"] is not None:
                    mine.setdefault(team, []).append(m["wait_p95_s"])
    ratios = {
        t: max(sum(ours[t]) / len(ours[t]), 60.0) / max(sum(theirs[t]) / len(theirs[t]), 60.0)
        for t in ours.keys() & theirs.keys()
    }
    if not ratios:
        return "-"
    team = max(sorted(ratios), key=lambda t: ratios[t])
    return f"{ratios[team]:.2f} ({team})"
