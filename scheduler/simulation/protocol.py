"""The fair comparison: per-policy means with 95% intervals over seeds, and rackwise over the best
baseline as the mean of paired per-seed ratios. Used by `rackwise simulate` (the demo) and by
`benchmarks/compare.py`; both give every policy the same jobs and the same queue rules."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Metrics = dict[str, Any]


@dataclass(frozen=True)
class Measure:
    key: str
    heading: str
    lower_is_better: bool
    scale: float = 1.0  # divide by this to print
    definition: str = ""


HEADLINE: tuple[Measure, ...] = (
    Measure(
        "slowdown_multihost_mean",
        "slowdown multi-host",
        True,
        definition="mean over gangs larger than one host of (finish - first start) / the "
        "job's run time on a compact placement: 1.0 is ideal, waits between restarts count",
    ),
    Measure(
        "goodput",
        "goodput",
        False,
        definition="GPU-seconds of finished work at compact speed / (all GPUs x makespan)",
    ),
    Measure(
        "makespan_s",
        "makespan h",
        True,
        3600,
        "first arrival to last completion",
    ),
    Measure(
        "cross_rack_gb",
        "cross-rack PB",
        True,
        1e6,
        "ring traffic leaving racks (the traffic model's GB per step-second x run time)",
    ),
    Measure("cross_spine_gb", "cross-spine PB", True, 1e6, "the same for spines"),
    Measure(
        "queue_delay_largest5_p99_s",
        "p99 wait largest 5% h",
        True,
        3600,
        "99th percentile of submission to first start, over the 5% largest gangs",
    ),
    Measure("jct_mean_s", "JCT mean h", True, 3600, "mean of submission to completion"),
    Measure(
        "comm_share_of_gpu_time",
        "comm share",
        True,
        definition="share of running GPU-seconds spent in communication at the ring's "
        "contended rate",
    ),
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


def cell(values: Sequence[float], scale: float = 1.0) -> str:
    mean, half = interval(values)
    if math.isnan(half):
        return f"{mean / scale:.3g}"
    return f"{mean / scale:.3g} ±{half / scale:.2g}"


def table(per_seed: dict[str, list[Metrics]]) -> list[list[str]]:
    """Rows: policy, then each headline measure as mean ±half-width."""
    return [
        [policy, *(cell([m[x.key] for m in runs], x.scale) for x in HEADLINE)]
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


def ratios(per_seed: dict[str, list[Metrics]], ours: str = "rackwise") -> list[Ratio]:
    """For each measure, rackwise over the baseline with the best mean on it, per seed. Rows
    named after rackwise (its variants with a mechanism off) are never the baseline."""
    baselines = [p for p in per_seed if not p.startswith(ours)]
    if ours not in per_seed or not baselines:
        return []
    out = []
    for measure in HEADLINE:
        means = {p: statistics.fmean(m[measure.key] for m in per_seed[p]) for p in baselines}
        pick = min if measure.lower_is_better else max
        best = pick(means, key=lambda p: means[p])
        out.extend(_paired(per_seed, ours, best, measure))
    return out


def against(per_seed: dict[str, list[Metrics]], other: str, ours: str = "rackwise") -> list[Ratio]:
    """For each measure, `ours` over one named row, per seed: what a mechanism switched off in
    `other` is worth, judged by the same paired ratios as the baselines are."""
    if ours not in per_seed or other not in per_seed:
        return []
    return [r for measure in HEADLINE for r in _paired(per_seed, ours, other, measure)]


def _paired(
    per_seed: dict[str, list[Metrics]], ours: str, other: str, measure: Measure
) -> list[Ratio]:
    """The mean and interval of the per-seed ratios (none when `other` is 0 on every seed)."""
    pairs = zip(per_seed[ours], per_seed[other], strict=True)
    values = [a[measure.key] / b[measure.key] for a, b in pairs if b[measure.key]]
    return [Ratio(measure, other, *interval(values))] if values else []
