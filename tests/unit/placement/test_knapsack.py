"""The tree DP's merge: exact against enumeration; many parents merged together give what each
merged alone gives, choices included; coarse merges bound the exact one from both sides; a
coarse tree solve is valid, within its reported bound, and exact when too loose; levels that
cannot beat the best found are not built."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from scheduler.model import GangRequest, PlaceConfig
from scheduler.model.topology import HostSpec, LevelSpec, TopologySpec
from scheduler.placement import knapsack as knapsack_module
from scheduler.placement import place_one
from scheduler.placement.capacity import Capacity
from scheduler.placement.knapsack import (
    INF,
    Offers,
    frontier,
    knapsack,
    merge,
    merge_many,
    scale_for,
)
from scheduler.placement.scoring import fresh_rack_weight, level_weights, preference_weights
from scheduler.placement.snapshot import Snapshot
from scheduler.placement.treedp import TreeDP, solve_tree
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


def vector(rng: random.Random, n: int) -> np.ndarray:
    """A child's F: 0 at 0, nondecreasing with ties (x pods cost what x + 1 do at times),
    ending where its capacity does."""
    steps = np.asarray([0.0] + [rng.choice([0.0, 0.0, rng.uniform(0.1, 3.0)]) for _ in range(n)])
    return np.cumsum(steps)[: rng.randint(1, n + 1)]


@pytest.mark.parametrize(
    "block", [(1, 1), (7, 2), (knapsack_module.BLOCK, knapsack_module.BLOCK_OFFERS)]
)
@pytest.mark.parametrize("seed", range(30))
def test_merging_many_parents_at_once_gives_what_each_gives_alone(seed, block, monkeypatch):
    """Whatever the blocks of offers the candidates are built in ((1, 1): one offer at a
    time)."""
    monkeypatch.setattr(knapsack_module, "BLOCK", block[0])
    monkeypatch.setattr(knapsack_module, "BLOCK_OFFERS", block[1])
    rng = random.Random(seed)
    n = rng.randint(1, 40)
    families = [
        [
            (vector(rng, n), rng.choice([0.0, 1.0, rng.uniform(0, 2)]))
            for _ in range(rng.randint(1, 6))
        ]
        for _ in range(rng.randint(1, 5))
    ]
    together = merge_many(n, families)
    for family, merged in zip(families, together, strict=True):
        alone = merge(n, [frontier(c, e) for c, e in family], 1)
        assert merged is not None
        assert merged.cost.tolist() == alone.cost.tolist()  # the same sums, exactly
        for child in range(len(family)):  # every choice the trace-back could ask for
            for x in range(len(alone.choices[child])):
                assert merged.taken(child, x) == alone.taken(child, x), (child, x)


def test_merging_many_leaves_a_wide_parent_to_the_coarse_merge():
    wide = [(np.arange(101, dtype=np.float64), 0.5)] * 3
    narrow = [(np.arange(3, dtype=np.float64), 0.5)] * 2
    merged = merge_many(100, [wide, narrow], work=10_000)
    assert merged[0] is None
    assert merged[1] is not None


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


def test_levels_above_a_domain_that_holds_the_gang_cheaper_are_not_built():
    """A gang that fits one rack: any placement spanning racks costs at least two rack
    crossings, more than the best rack, so no spine or root is merged; the answer is the same."""
    capacity, found = tree(0, 12, INF)
    gang, fabric = capacity.gang, capacity.snapshot.fabric
    weights = level_weights(fabric, gang)
    prefs = preference_weights(fabric, gang, weights)
    dp = TreeDP(capacity, weights, 0.0, fabric.top, prefs)
    assert dp.solve() is not None
    assert found is not None
    assert len(found.counts) > 1  # several hosts: the tree DP decided
    assert len({fabric.domain[2][h] for h in found.counts}) == 1
    assert max(node.level for node in dp.nodes) == 2  # racks, nothing above


def test_a_gang_across_two_spines_still_wins_when_one_spine_holds_it_dearer():
    """Equal weights per level: one spine holds 16 pods only on 3 racks (8 + 4 + 4 free, 4 hosts,
    J = 4 + 4 + 3 = 11); two spines hold them on 2 whole hosts in 2 racks (J = 2 x 4 = 8).
    Building stops only where a level cannot win (2 w per level below it, 8 here < 11)."""
    levels = tuple(
        LevelSpec(name=name, cost_weight=1.0, nvlink=name == "nvlink")
        for name in ("host", "nvlink", "rack", "spine")
    )
    racks = {"a1": [8], "a2": [4], "a3": [4], "b1": [8], "b2": [4]}
    hosts = tuple(
        HostSpec(
            name=f"{rack}h{i}",
            gpus=8,
            domains={"nvlink": f"{rack}h{i}", "rack": rack, "spine": rack[0]},
        )
        for rack, frees in racks.items()
        for i in range(len(frees))
    )
    fabric = Fabric(TopologySpec(levels=levels, hosts=hosts))
    snapshot = Snapshot(fabric, [free for frees in racks.values() for free in frees])
    gang = GangRequest(name="g", pods=16, gpus_per_pod=1)
    placed = place_one(snapshot, gang, PlaceConfig.of(fragmentation_share=0))
    assert sorted(placed.hosts()) == ["a1h0", "b1h0"]
    assert placed.optimal
