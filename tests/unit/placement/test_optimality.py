"""rackwise against brute force on small instances, and against every baseline at random."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.model import GangRequest, PlaceConfig
from scheduler.placement import POLICIES, place, validate
from scheduler.topology import Fabric, generate
from tests.conftest import fragmented
from tests.unit.placement.bruteforce import matches_brute_force

TINY = Fabric(generate(blocks=2, racks=2, hosts=2, gpus=4))


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("pods", [2, 3, 5, 7, 9])
@pytest.mark.parametrize("engine", ["auto", "cp-sat"])
def test_rackwise_matches_brute_force(seed, pods, engine):
    snapshot = fragmented(TINY, busy=0.4, seed=seed)
    matches_brute_force(snapshot, GangRequest(name="g", pods=pods, gpus_per_pod=1), engine)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    busy=st.floats(0.0, 0.9),
    pods=st.integers(1, 40),
    gpus_per_pod=st.sampled_from([1, 2, 4, 8]),
    required=st.sampled_from([None, "host", "rack", "spine"]),
)
def test_never_invalid_never_costlier_than_a_baseline(seed, busy, pods, gpus_per_pod, required):
    fabric = Fabric(generate(blocks=3, racks=3, hosts=3, gpus=8))
    snapshot = fragmented(fabric, busy, seed)
    gang = GangRequest(name="g", pods=pods, gpus_per_pod=gpus_per_pod, required_level=required)
    results = {p: place(snapshot, [gang], PlaceConfig.of(policy=p))[0] for p in POLICIES}
    for result in results.values():
        validate(snapshot, gang, result)
    ours = results["rackwise"]
    for policy, theirs in results.items():
        if theirs.placed:
            assert ours.placed, f"{policy} placed what rackwise did not"
            assert ours.cost <= theirs.cost + 1e-9, policy
