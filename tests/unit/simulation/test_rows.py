"""The comparison's rows: each peer told what its users tell it, a peer's untold row and the
oracle without it, and neither ever the best baseline."""

from __future__ import annotations

from scheduler.simulation.compare import UNTOLD_ROWS, plan, varied
from scheduler.simulation.config import SimConfig, queue_config
from scheduler.simulation.protocol import HEADLINE, best_baseline


def test_untold_rows_and_the_oracle_run_without_the_segments():
    rows = plan(["rackwise", "kueue-best-fit"], ["kueue-best-fit untold"], oracle=True)
    changes = {r.label: r.changes for r in rows}
    assert changes["kueue-best-fit"] == {}
    assert changes["kueue-best-fit untold"] == {"hints": False}
    assert changes["oracle"]["hints"] is False
    assert {r.label: r.policy for r in rows}["kueue-best-fit untold"] == "kueue-best-fit"
    told = queue_config(varied(SimConfig(), changes["kueue-best-fit"]), "kueue-best-fit")
    untold = queue_config(varied(SimConfig(), changes["kueue-best-fit untold"]), "kueue-best-fit")
    assert (told.place.hints, untold.place.hints) == (True, False)
    assert set(UNTOLD_ROWS) >= {
        "kueue-best-fit untold",
        "kai-bin-pack untold",
        "slurm-block untold",
    }


def test_a_row_not_told_is_never_the_best_baseline():
    lost = HEADLINE[0]
    per_seed = {
        "rackwise": [{"gpu_hours_lost": 5.0}],
        "kueue-best-fit": [{"gpu_hours_lost": 4.0}],
        "kueue-best-fit untold": [{"gpu_hours_lost": 1.0}],
        "oracle": [{"gpu_hours_lost": 0.0}],
    }
    assert best_baseline(per_seed, lost) == "kueue-best-fit"
