"""The fair protocol's arithmetic (simulation/protocol.py): intervals, which baseline rackwise
is held against, and rackwise over its own rows with mechanisms off; each computed by hand."""

from __future__ import annotations

import math

import pytest

from scheduler.simulation.compare import PROTOCOL_KEYS, VARIANTS, varied
from scheduler.simulation.config import SimConfig
from scheduler.simulation.profiles import FabricProfile, ProfileName, SharingModel
from scheduler.simulation.protocol import (
    HEADLINE,
    Ratio,
    against,
    captures,
    interval,
    ratios,
    t95,
)

GOODPUT = next(m for m in HEADLINE if m.key == "goodput")
SLOWDOWN = HEADLINE[0]  # GPU-hours lost: lower is better


def run_of(value: float) -> dict[str, object]:
    """One run's metrics with every headline measure equal to `value` (dotted keys nested)."""
    out: dict[str, object] = {}
    for m in HEADLINE:
        *path, last = m.key.split(".")
        node = out
        for part in path:
            node = node.setdefault(part, {})  # type: ignore[assignment]
        node[last] = value  # type: ignore[index]
    return out


def runs(*values: float) -> list[dict[str, object]]:
    return [run_of(v) for v in values]


def by_measure(found: list[Ratio]) -> dict[str, Ratio]:
    return {r.measure.key: r for r in found}


def test_interval_is_students_t():
    mean, half = interval([1.0, 2.0, 3.0])
    assert mean == 2.0
    assert half == pytest.approx(4.303 / math.sqrt(3))  # t(2 df) x stdev 1 / sqrt(3)
    assert math.isnan(interval([5.0])[1])


@pytest.mark.parametrize(("df", "t"), [(4, 2.776), (11, 2.201), (30, 2.042), (60, 2.000)])
def test_t_quantiles_past_ten_seeds_are_not_the_normal_ones(df, t):
    assert t95(df) == pytest.approx(t, abs=0.001)
    assert t95(120) == pytest.approx(1.980, abs=0.001)


def test_rackwise_is_held_against_the_best_baseline_on_each_measure():
    per_seed = {
        "rackwise": runs(1.0, 1.0),
        "a": runs(2.0, 4.0),  # mean 3: best where lower is better
        "b": runs(4.0, 4.0),  # mean 4: best where higher is better (goodput)
        "rackwise (none)": runs(0.5, 0.5),  # better than both, never the baseline
    }
    found = by_measure(ratios(per_seed))
    assert found[SLOWDOWN.key].baseline == "a"
    assert found[SLOWDOWN.key].mean == pytest.approx(0.375)  # 1/2 and 1/4, paired
    assert found[SLOWDOWN.key].half == pytest.approx(12.706 * math.sqrt(0.03125) / math.sqrt(2))
    assert found[GOODPUT.key].baseline == "b"
    assert found[GOODPUT.key].mean == pytest.approx(0.25)
    assert found[GOODPUT.key].half == 0.0


def test_rackwise_over_one_of_its_rows():
    per_seed = {
        "rackwise": runs(1.0, 2.0),
        "kueue": runs(9.0, 9.0),
        "rackwise -frag": runs(2.0, 2.0),
    }
    found = by_measure(against(per_seed, "rackwise -frag"))
    assert set(found) == {m.key for m in HEADLINE}
    slowdown = found[SLOWDOWN.key]
    assert slowdown.baseline == "rackwise -frag"
    assert slowdown.mean == pytest.approx(0.75)  # 1/2 and 2/2
    assert slowdown.half == pytest.approx(12.706 * 0.5 / math.sqrt(2) / math.sqrt(2))
    assert slowdown.verdict == "no difference within the interval"


def test_seeds_where_the_other_row_is_zero_are_left_out():
    per_seed = {"rackwise": runs(1.0, 1.0), "rackwise -joint": runs(0.0, 2.0)}
    assert by_measure(against(per_seed, "rackwise -joint"))[SLOWDOWN.key].mean == 0.5
    per_seed["rackwise -joint"] = runs(0.0, 0.0)
    assert against(per_seed, "rackwise -joint") == []
    assert against(per_seed, "rackwise -defrag") == []  # a row that was not run


def test_a_ratio_is_better_or_worse_only_outside_its_interval():
    assert Ratio(SLOWDOWN, "b", 0.9, 0.05).verdict == "better"
    assert Ratio(SLOWDOWN, "b", 1.1, 0.05).verdict == "worse"
    assert Ratio(SLOWDOWN, "b", 1.0, 0.0).verdict == "no difference within the interval"
    assert Ratio(SLOWDOWN, "b", 0.97, 0.05).verdict == "no difference within the interval"
    assert Ratio(GOODPUT, "b", 1.1, 0.05).verdict == "better"


def test_the_oracle_gain_and_the_share_rackwise_captures():
    """Lower is better: best baseline a (mean 10), oracle 6, rackwise 8: the oracle gains 4,
    rackwise 2 of it (50%). Where higher is better (goodput) the best baseline is b (12) and
    the oracle (6) gains nothing: no share is claimed."""
    per_seed = {
        "rackwise": runs(8.0, 8.0),
        "a": runs(10.0, 10.0),
        "b": runs(12.0, 12.0),
        "oracle": runs(6.0, 6.0),
    }
    found = {c.measure.key: c for c in captures(per_seed)}
    lost = found[SLOWDOWN.key]
    assert lost.baseline == "a"
    assert lost.oracle.mean == pytest.approx(0.6)
    assert lost.captured == pytest.approx(0.5)
    goodput = found[GOODPUT.key]
    assert goodput.baseline == "b"  # the best where higher is better; the oracle never is
    assert goodput.captured is None


def test_a_measure_a_run_lacks_is_left_out():
    larger = next(m for m in HEADLINE if m.key == "jct_mean_s_by_class.larger")
    assert larger.value({"jct_mean_s_by_class": {"larger": None}}) is None
    assert larger.value({"jct_mean_s_by_class": {"larger": 3.0}}) == 3.0


def test_every_headline_measure_is_kept_from_a_run():
    """A measure the table heads must be among the keys a run's measures keep, or its column
    reads '-' for every row."""
    assert {m.key.split(".")[0] for m in HEADLINE} <= set(PROTOCOL_KEYS)


def test_the_alone_row_keeps_the_scenarios_fabric_and_gives_each_job_its_own():
    """`rackwise alone` changes the scenario's own profile (its ratios, ECMP, flows kept),
    where the oracle replaces it; a policy knob still goes to the policy."""
    fabric = FabricProfile(sharing=SharingModel.DEMAND, ratios={"spine": 7}, ecmp=("spine",))
    config = SimConfig(fabric=fabric)
    alone = varied(config, VARIANTS["rackwise alone"])
    assert alone.fabric == fabric.model_copy(update={"alone": True})
    assert not config.fabric.alone
    both = varied(config, {"alone": True, "contention": True})
    assert both.fabric.alone
    assert both.scheduling.contention
    oracle = varied(config, {"fabric": FabricProfile(name=ProfileName.ORACLE)})
    assert oracle.fabric.name is ProfileName.ORACLE
    assert not oracle.fabric.ratios
