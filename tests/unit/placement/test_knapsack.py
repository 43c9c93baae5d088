"""The tree DP's merge: exact against enumeration; coarse merges bound the exact one from both
sides; a coarse tree solve is valid, within its reported bound, and exact when too loose."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from scheduler.model import GangRequest
from scheduler.placement.capacity import Capacity
from scheduler.placement.knapsack import INF, Offers, knapsack, merge, scale_for
from scheduler.placement.scoring import fresh_rack_weight, level_weights, preference_weights
from scheduler.placement.treedp import solve_tree
from scheduler.topology import Fabric, generate
from tests.conftest import fragmented


def offers(rng: random.Random, children: int) -> list[Offers]:
    out = []
    for _ in range(children):
        caps = sorted(rng.sample(range(1, 12), rng.randint(0, 4)))
        prices = sorted(rng.uniform(0.5, 9.0) for _ in caps)
        out.append((np.asarray(caps, dtype=np.int64), np.asarray(prices)))
    return out


def enumerate_min(n: int, items: list[Offers]) -> list[float]:
    """Least cost for capacity >= x, trying every child with no offer or one of its offers."""
    best = [INF] * (n + 1)
    choices = [[(0, 0.0), *zip(c.tolist(), p.tolist(), strict=True)] for c, p in items]
    for pick in itertools.product(*choices):
        cap = min(n, sum(c for c, _ in pick))
        price = sum(p for _, p in pick)
        for x in range(cap + 1):
            best[x] = min(best[x], price)
    return best


def padded(cost: np.ndarray, n: int) -> np.ndarray:
    return np.concatenate([cost, np.full(n + 1 - len(cost), INF)])


@pytest.mark.parametrize("seed", range(20))
def test_knapsack_matches_enumeration(seed):
    rng = random.Random(seed)
    n, items = rng.randint(1, 25), offers(rng, rng.randint(1, 4))
    cost, _ = knapsack(n, items)
    assert padded(cost, n).tolist() == pytest.approx(enumerate_min(n, items))


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("scale", [2, 3, 5])
def test_coarse_merges_bound_the_exact_one(seed, scale):
    rng = random.Random(seed)
    n, items = rng.randint(4, 30), offers(rng, rng.randint(1, 5))
    exact = padded(merge(n, items, 1).cost, n)
    upper = padded(merge(n, items, scale).cost, n)
    lower = padded(merge(n, items, scale, up=True).cost, n)
    assert np.all(upper >= exact - 1e-9)
    assert np.all(lower <= exact + 1e-9)


def test_scale_grows_with_the_work_only_past_the_limit():
    wide = [(np.arange(1, 101), np.linspace(1, 2, 100))] * 10
    assert scale_for(999, wide, limit=2_000_000) == 1
    assert scale_for(999, wide, limit=10_000) == 10


FABRIC = Fabric(generate(blocks=3, racks=4, hosts=4, gpus=8))


def tree(seed: int, pods: int, work: float):
    snapshot = fragmented(FABRIC, busy=0.5, seed=seed)
    gang = GangRequest(name="g", pods=pods, gpus_per_pod=1)
    capacity = Capacity.of(snapshot, gang)
    weights = level_weights(FABRIC, gang)
    fresh = fresh_rack_weight(capacity, weights, 0.05)
    prefs = preference_weights(FABRIC, gang, weights)
    return capacity, solve_tree(capacity, weights, FABRIC.top, fresh, prefs, work=work)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("work", [400, 2_000])
def test_a_coarse_tree_solve_is_valid_and_bounded_by_the_exact_optimum(seed, work):
    capacity, exact = tree(seed, 70, INF)
    _, coarse = tree(seed, 70, work)
    assert exact is not None
    assert coarse is not None
    assert exact.bound == exact.value
    assert coarse.bound <= exact.value + 1e-9 <= coarse.value + 2e-9
    assert coarse.value <= coarse.bound * 1.01 + 1e-9  # kept only within 1%, else exact
    slots = capacity.slots
    assert sum(coarse.counts.values()) == 70
    assert all(0 < k <= slots[h] for h, k in coarse.counts.items())
