"""Truthful labels: for every gang shape, every pool, both engines and every baseline, `bound` is a
valid lower bound of the reported objective J, `optimal` only when J is proven minimal, and J is
what the placement really scores. The oracle is brute force over every feasible spread, judged
feasible by the independent validator."""

from __future__ import annotations

import pytest

from scheduler.model import GangRequest, ParallelShape, PlaceConfig, Placement
from scheduler.placement import POLICIES, Snapshot, place, validate
from scheduler.topology import Fabric, generate
from tests.conftest import fragmented
from tests.unit.placement.bruteforce import j_of, minimum

TRAINING = Fabric(generate(blocks=2, racks=2, hosts=2, gpus=4))
NVLINK = Fabric(generate(blocks=1, racks=2, hosts=4, gpus=2, nvlink=2))
BATCH = Fabric(generate(blocks=2, racks=2, hosts=2, gpus=4, pools={"batch-inference": 1}))
ONLINE = Fabric(generate(blocks=2, racks=2, hosts=2, gpus=4, pools={"online-inference": 1}))
SHAPES = {
    "dp": (TRAINING, {"pods": 5, "gpus_per_pod": 1}),
    "pp": (TRAINING, {"pods": 6, "gpus_per_pod": 1, "shape": ParallelShape(dp=3, pp=2)}),
    "tp": (NVLINK, {"pods": 4, "gpus_per_pod": 1, "shape": ParallelShape(dp=2, tp=2)}),
    "prefs": (TRAINING, {"pods": 5, "gpus_per_pod": 1, "preferred_levels": {"rack": 2.0}}),
    "prefs-spine": (TRAINING, {"pods": 6, "gpus_per_pod": 1, "preferred_levels": {"spine": 3.0}}),
    # wider than any rack: every placement pays the rack preference
    "prefs-wide": (TRAINING, {"pods": 10, "gpus_per_pod": 1, "preferred_levels": {"rack": 1.0}}),
    # heavy enough to trade host crossings for staying in one rack
    "prefs-trade": (TRAINING, {"pods": 4, "gpus_per_pod": 1, "preferred_levels": {"rack": 40.0}}),
    "required": (TRAINING, {"pods": 3, "gpus_per_pod": 1, "required_level": "rack"}),
    "batch": (BATCH, {"pods": 3, "gpus_per_pod": 1, "pool": "batch-inference"}),
    "online": (
        ONLINE,
        {"pods": 3, "gpus_per_pod": 1, "pool": "online-inference", "max_pods_per_rack": 1},
    ),
}


def counts_of(snapshot: Snapshot, placement: Placement) -> dict[int, int]:
    index = snapshot.fabric.host_index
    return {index[h]: n for h, n in placement.hosts().items()}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("seed", range(6))
def test_bound_optimum_and_objective_are_ordered(shape, seed):
    fabric, fields = SHAPES[shape]
    snapshot = fragmented(fabric, busy=0.35, seed=seed)
    gang = GangRequest(name="g", **fields)
    best = minimum(snapshot, gang)
    configs = [PlaceConfig.of(engine="auto"), PlaceConfig.of(engine="cp-sat", work_limit=5)]
    configs += [PlaceConfig.of(policy=p) for p in POLICIES if p != "rackwise"]
    for config in configs:
        [placement] = place(snapshot, [gang], config)
        label = f"{config.policy}/{config.solver.engine}"
        if best is None:
            assert not placement.placed, label
            continue
        if not placement.placed:
            assert config.policy != "rackwise", label
            continue
        validate(snapshot, gang, placement)
        value = j_of(snapshot, gang, counts_of(snapshot, placement))
        assert placement.objective == pytest.approx(value, abs=1e-9), label
        assert best <= placement.objective + 1e-9, label
        if placement.bound is not None:
            assert placement.bound <= best + 1e-9, f"{label}: bound above the optimum"
        if placement.optimal:
            assert placement.objective == pytest.approx(best, abs=1e-9), label
        if fields.get("pool", "training") != "training":
            assert placement.bound is None, label  # nothing is claimed for inference pools
            assert not placement.optimal, label


J_ONLY = PlaceConfig.of(fragmentation_share=0)  # the J-optimum, nothing traded for breakage


@pytest.mark.parametrize("seed", range(6))
def test_the_exact_engine_proves_what_it_reports(seed):
    snapshot = fragmented(TRAINING, busy=0.35, seed=seed)
    for shape in ("dp", "prefs", "prefs-spine", "prefs-wide", "prefs-trade", "pp"):
        gang = GangRequest(name="g", **SHAPES[shape][1])
        [placement] = place(snapshot, [gang], J_ONLY)
        best = minimum(snapshot, gang)
        assert placement.optimal, shape
        assert placement.objective == pytest.approx(best, abs=1e-9), shape
        # trading J for less breakage (the default) pays at most its share, and says so
        [traded] = place(snapshot, [gang])
        share = PlaceConfig().scheduling.fragmentation_share
        assert traded.objective <= best * (1 + share) + 1e-9, shape
        paid = traded.objective / best - 1 if best else 0.0
        assert traded.premium == pytest.approx(paid, abs=1e-9), shape
        assert traded.optimal == (traded.objective <= best * (1 + 1e-9)), shape


@pytest.mark.parametrize("engine", ["auto", "cp-sat"])
@pytest.mark.parametrize("shape", ["dp", "prefs-wide", "pp"])
def test_labels_on_a_fabric_of_fresh_racks(engine, shape):
    """Every rack free: the fresh-rack term is in play for every gang that spans racks."""
    fabric, fields = SHAPES[shape]
    snapshot = fragmented(fabric, busy=0.0, seed=0)
    for pods in (fields["pods"], 9, 12):
        gang = GangRequest(name="g", **{**fields, "pods": pods, "shape": None})
        best = minimum(snapshot, gang)
        config = PlaceConfig.of(engine=engine, work_limit=5)
        [placement] = place(snapshot, [gang], config)
        value = j_of(snapshot, gang, counts_of(snapshot, placement))
        assert placement.objective == pytest.approx(value, abs=1e-9)
        assert placement.bound is not None
        assert placement.bound <= best + 1e-9
        assert best <= placement.objective + 1e-9
