"""The engines' labels against brute force on seeded tiny fabrics (tinyfabric.py): for both
engines, a placement exists exactly when brute force finds one, it is valid, its J is what it
scores, its bound is at most the optimum and `optimal` only where it is the optimum. Every
baseline places the gang too where it fits (on fabrics this small each finds a way), validly
and labelled as truthfully.

`make test` runs RACKWISE_LABEL_CASES seeds (300 by default); `make test-labels` runs 10,000."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scheduler.cli.inputs import snapshot_from
from scheduler.io import load_gangs
from scheduler.model import GangRequest, PlaceConfig
from scheduler.placement import Snapshot, place, validate
from scheduler.placement.baselines import BASELINES
from tests.conftest import run_cli
from tests.unit.placement.bruteforce import j_of, minimum
from tests.unit.placement.tinyfabric import case

CASES = int(os.environ.get("RACKWISE_LABEL_CASES", "300"))
ENGINES = {
    "tree-dp": PlaceConfig.of(engine="auto", fragmentation_share=0),
    "auto": PlaceConfig.of(engine="auto"),
    "cp-sat": PlaceConfig.of(engine="cp-sat", work_limit=5),
}
CONFIGS = ENGINES | {p: PlaceConfig.of(policy=p) for p in BASELINES}
FALSE_OPTIMUM = Path(__file__).parent / "data" / "false-optimum"


def labels_hold(snapshot: Snapshot, gang: GangRequest, best: float | None, engine: str) -> None:
    [placement] = place(snapshot, [gang], CONFIGS[engine])
    if best is None:
        assert not placement.placed, engine
        return
    assert placement.placed, f"{engine}: {placement.reason}"
    validate(snapshot, gang, placement)
    index = snapshot.fabric.host_index
    counts = {index[h]: n for h, n in placement.hosts().items()}
    assert placement.objective == pytest.approx(j_of(snapshot, gang, counts), abs=1e-9), engine
    assert best <= placement.objective + 1e-9, engine
    if placement.bound is not None:
        assert placement.bound <= best + 1e-9, f"{engine}: bound {placement.bound} > {best}"
    if placement.optimal:
        assert placement.objective == pytest.approx(best, abs=1e-9), f"{engine}: false optimum"
    if engine == "tree-dp" and placement.engine == "tree-dp":
        assert placement.optimal, "the exact engine proves its answers"


@pytest.mark.parametrize("seed", range(CASES))
def test_labels_on_tiny_fabrics_match_brute_force(seed):
    c = case(seed)
    best = minimum(c.snapshot, c.gang)
    for engine in CONFIGS:
        labels_hold(c.snapshot, c.gang, best, engine)


def test_the_reported_false_optimum_is_fixed():
    """Issue 38: a rack whose hosts are partly in NVLink domains and partly in none lost the
    slice its two parts make together, so the tree search crossed spines and called it optimal."""
    snapshot = snapshot_from(FALSE_OPTIMUM / "topology.yaml", FALSE_OPTIMUM / "state.yaml")
    [gang] = load_gangs(FALSE_OPTIMUM / "gangs.yaml")
    best = minimum(snapshot, gang)
    assert best == pytest.approx(120.6667, abs=1e-3)
    for engine in ENGINES:
        labels_hold(snapshot, gang, best, engine)
    [placement] = place(snapshot, [gang], ENGINES["tree-dp"])
    assert {h.rsplit("/", 1)[0] for h in placement.hosts()} <= {"h000", "h001", "h010", "h012"}


def test_the_cli_places_the_reported_gang_inside_one_spine():
    out = run_cli(
        "place",
        *("--topology", str(FALSE_OPTIMUM / "topology.yaml")),
        *("--gangs", str(FALSE_OPTIMUM / "gangs.yaml")),
        *("--state", str(FALSE_OPTIMUM / "state.yaml")),
    )
    assert out.returncode == 0, out.stderr
    assert "spine=1" in out.stdout
    assert "120.667 (bound 120.667, proven optimal" in out.stdout
