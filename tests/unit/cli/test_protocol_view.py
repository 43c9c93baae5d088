"""`rackwise compare`'s compact view (the demo's): five measures in 100 columns, then the
conclusion in words, naming where rackwise is better, worse, or within the interval."""

from __future__ import annotations

import io

from rich.console import Console

from scheduler.cli.protocol_view import print_headline
from scheduler.simulation.protocol import ratios

H = 3600.0


def run(lost: float, jct: float) -> dict:
    return {
        "gpu_hours_lost": lost,
        "jct_mean_s": jct * H,
        "jct_mean_s_by_class": {"larger": 2 * jct * H},
        "large_gang_wait_mean_s": jct * H / 2,
        "utilisation_steady": 0.8,
        "measured_jobs": 10,
    }


PER_SEED = {
    "rackwise": [run(1000 + s, 5.0 + s / 100) for s in range(3)],
    "kueue-best-fit": [run(15600 + 30 * s, 4.5 + s / 100) for s in range(3)],
    "kueue-best-fit untold": [run(17000, 6.0) for _ in range(3)],
}


def test_the_compact_view_fits_100_columns_and_says_its_conclusion():
    out = io.StringIO()
    console = Console(file=out, width=100)
    print_headline(console, PER_SEED, ratios(PER_SEED), wide=False)
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "15,630 ±75" in text  # thousands with separators
    words = text[text.index("In words") :]
    assert "better on GPU-h lost" in words
    assert "worse on JCT h" in words
    assert "untold" not in words  # a row not told is never the baseline
