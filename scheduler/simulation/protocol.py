"""The fair comparison's arithmetic: per-row means with 95% intervals over seeds, rackwise over
the best baseline as the mean of paired per-seed ratios, and the oracle's gain with the share
of it rackwise captures. Used by `rackwise simulate` and `rackwise compare`
(simulation/compare.py), which give every row the same jobs and the same queue rules."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Metrics = dict[str, Any]


@dataclass(frozen=True)
class Measure:
    key: str  # a metric's key; "a.b" is key b of the mapping under a
    heading: str
    lower_is_better: bool
    scale: float = 1.0  # divide by this to print
    definition: str = ""

    def value(self, metrics: Metrics) -> float | None:
        """The measure in one run's metrics; None where the run has none (no gang of that
        class, say)."""
        found: Any = metrics
        for part in self.key.split("."):
            found = found.get(part) if isinstance(found, dict) else None
        return None if found is None else float(found)


H = 3600.0
# the measures the field reports (docs/design.md, "The fair protocol"), then goodput and makespan
HEADLINE: tuple[Measure, ...] = (
    Measure(
        "gpu_hours_lost",
        "GPU-h lost",
        True,
        definition="sum over finished jobs of GPUs x (time their GPUs were held - run time on a "
        "compact placement): slowdown on shared links, restart time and work redone",
    ),
    Measure(
        "gpu_hours_lost_shared",
        "of it shared",
        True,
        definition="the part of the slowdown's loss that sharing links with other jobs added to "
        "what each job would lose alone on its placement (the rest of the slowdown's is its "
        "placement's own: crossings, its own flows hashed onto few paths)",
    ),
    Measure("jct_mean_s", "JCT h", True, H, "mean of submission to completion"),
    Measure("jct_p95_s", "JCT p95 h", True, H, "95th percentile of submission to completion"),
    Measure("jct_mean_s_by_class.host", "JCT host h", True, H, "mean JCT of gangs within one host"),
    Measure(
        "jct_mean_s_by_class.rack",
        "JCT rack h",
        True,
        H,
        "mean JCT of gangs larger than a host, within the largest rack's GPUs",
    ),
    Measure(
        "jct_mean_s_by_class.larger",
        "JCT >rack h",
        True,
        H,
        "mean JCT of gangs larger than the largest rack",
    ),
    Measure(
        "large_gang_wait_mean_s",
        "wait >rack h",
        True,
        H,
        "mean of submission to first start, gangs larger than a rack",
    ),
    Measure(
        "large_gang_wait_p95_s",
        "wait >rack p95 h",
        True,
        H,
        "95th percentile of the same",
    ),
    Measure(
        "nvlink_gang_wait_mean_s",
        "wait NVL h",
        True,
        H,
        "mean of submission to first start, gangs of a whole multi-host NVLink domain or more"
        " (none where NVLink domains are single hosts)",
    ),
    Measure(
        "utilisation_steady",
        "util steady",
        False,
        definition="effective utilisation: work done at compact speed over the GPU-time offered"
        " from the end of the warm-up to the last arrival (slowed jobs do not inflate it)",
    ),
    Measure(
        "bounded_slowdown_p95",
        "bsld p95",
        True,
        definition="95th percentile of max(1, JCT / max(run time, 10 s)): small jobs starved "
        "show here",
    ),
    Measure(
        "goodput",
        "goodput",
        False,
        definition="GPU-seconds of finished work at compact speed / (all GPUs x makespan)",
    ),
    Measure("makespan_s", "makespan h", True, H, "first arrival to last completion"),
)
# two-sided 95% Student t quantiles by degrees of freedom (seeds - 1), 1..30
T95: tuple[float, ...] = (
    *(12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228),
    *(2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086),
    *(2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042),
)
Z95 = 1.959964


def t95(df: int) -> float:
    """The quantile for df degrees of freedom; past the table, the Cornish-Fisher expansion
    (within 0.001 there). The normal 1.96 alone would narrow a 12-seed interval by 11%."""
    if df <= len(T95):
        return T95[df - 1]
    z = Z95
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def interval(values: Sequence[float]) -> tuple[float, float]:
    """(mean, half-width of the two-sided 95% Student t interval); nan half-width for one."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, math.nan
    return mean, t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


def cell(values: Sequence[float | None], scale: float = 1.0) -> str:
    """mean ±half-width of the runs that have the measure; "-" where none has."""
    present = [v for v in values if v is not None]
    if not present:
        return "-"
    mean, half = interval(present)
    if math.isnan(half):
        return f"{mean / scale:.3g}"
    return f"{mean / scale:.3g} ±{half / scale:.2g}"


def table(per_seed: dict[str, list[Metrics]]) -> list[list[str]]:
    """Rows: policy, then each headline measure as mean ±half-width."""
    return [
        [policy, *(cell([x.value(m) for m in runs], x.scale) for x in HEADLINE)]
        for policy, runs in per_seed.items()
    ]


@dataclass(frozen=True)
class Ratio:
    measure: Measure
    baseline: str
    mean: float
    half: float

    @property
    def verdict(self) -> str:
        """better or worse only when the 95% interval excludes 1.0."""
        if math.isnan(self.half) or abs(self.mean - 1.0) <= self.half:
            return "no difference within the interval"
        lower = self.mean < 1.0
        return "better" if lower == self.measure.lower_is_better else "worse"

    def text(self) -> str:
        spread = "" if math.isnan(self.half) else f" ±{self.half:.3f}"
        return (
            f"{self.measure.heading:<22} {self.mean:.3f}x{spread} vs {self.baseline} "
            f"({self.verdict})"
        )


ORACLE = "oracle"
# a peer's row without what its users tell it (placement/hints.py): shown, never a baseline
UNTOLD = " untold"


def best_baseline(
    per_seed: dict[str, list[Metrics]], measure: Measure, ours: str = "rackwise"
) -> str | None:
    """The baseline with the best mean on a measure. Rows named after rackwise (its variants
    with a mechanism off), peers not told what their users tell them and the oracle are never
    the baseline."""
    means: dict[str, float] = {}
    for row, runs in per_seed.items():
        values = [v for m in runs if (v := measure.value(m)) is not None]
        if values and not row.startswith(ours) and row != ORACLE and not row.endswith(UNTOLD):
            means[row] = statistics.fmean(values)
    if not means:
        return None
    pick = min if measure.lower_is_better else max
    return pick(means, key=lambda p: means[p])


def ratios(per_seed: dict[str, list[Metrics]], ours: str = "rackwise") -> list[Ratio]:
    """For each measure, rackwise over the baseline with the best mean on it, per seed."""
    if ours not in per_seed:
        return []
    out = []
    for measure in HEADLINE:
        best = best_baseline(per_seed, measure, ours)
        if best is not None:
            out.extend(_paired(per_seed, ours, best, measure))
    return out


@dataclass(frozen=True)
class Capture:
    """What the oracle (no link ever shared) gains over the best baseline on a measure, and
    the share of that gain rackwise captures: (best - rackwise) / (best - oracle), on the
    means over seeds; None where the oracle is not better than the baseline."""

    measure: Measure
    baseline: str
    oracle: Ratio  # the oracle over the best baseline, paired per seed
    captured: float | None  # None where the oracle gains nothing

    def text(self) -> str:
        head = (
            f"{self.measure.heading:<18} oracle/{self.baseline} {self.oracle.mean:.3f}x "
            f"±{self.oracle.half:.3f}"
        )
        if self.captured is None:
            return f"{head}; no gain to capture"
        if self.captured < 0:
            return f"{head}; rackwise is behind that baseline: none of the gain captured"
        return f"{head}; rackwise captures {self.captured:.0%} of that gain"


def captures(per_seed: dict[str, list[Metrics]], ours: str = "rackwise") -> list[Capture]:
    if ours not in per_seed or ORACLE not in per_seed:
        return []
    out = []
    for measure in HEADLINE:
        best = best_baseline(per_seed, measure, ours)
        found = _paired(per_seed, ORACLE, best, measure) if best else []
        if best and found:
            mean = {r: _mean_of(per_seed[r], measure) for r in (best, ours, ORACLE)}
            gain = mean[best] - mean[ORACLE]
            # the oracle must be better than the baseline by more than rounding
            better = gain if measure.lower_is_better else -gain
            useful = better > 1e-9 * max(abs(mean[best]), 1.0)
            out.append(
                Capture(
                    measure, best, found[0], (mean[best] - mean[ours]) / gain if useful else None
                )
            )
    return out


def _mean_of(runs: list[Metrics], measure: Measure) -> float:
    return statistics.fmean(v for m in runs if (v := measure.value(m)) is not None)


def against(per_seed: dict[str, list[Metrics]], other: str, ours: str = "rackwise") -> list[Ratio]:
    """For each measure, `ours` over one named row, per seed: what a mechanism switched off in
    `other` is worth, judged by the same paired ratios as the baselines are."""
    if ours not in per_seed or other not in per_seed:
        return []
    return [r for measure in HEADLINE for r in _paired(per_seed, ours, other, measure)]


def _paired(
    per_seed: dict[str, list[Metrics]], ours: str, other: str, measure: Measure
) -> list[Ratio]:
    """The mean and interval of the per-seed ratios (none when `other` is 0 or missing on
    every seed)."""
    pairs = zip(per_seed[ours], per_seed[other], strict=True)
    both = [(measure.value(a), measure.value(b)) for a, b in pairs]
    values = [a / b for a, b in both if a is not None and b]
    return [Ratio(measure, other, *interval(values))] if values else []
