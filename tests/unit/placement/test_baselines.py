"""Baselines behave as their public descriptions say (table-driven)."""

from __future__ import annotations

import pytest

from scheduler.model import GangRequest
from scheduler.model.placement import PlaceConfig
from scheduler.placement import Snapshot, place_one
from scheduler.placement.baselines import BASELINES
from scheduler.placement.capacity import Capacity
from scheduler.topology import Fabric, generate

FABRIC = Fabric(generate(blocks=2, racks=2, hosts=2, gpus=8))
# free GPUs per host, in fabric order: r0: 8 8 | r1: 2 2 | r2: 6 0 | r3: 8 4
FREE = [8, 8, 2, 2, 6, 0, 8, 4]


def choose(policy: str, pods: int) -> dict[str, int]:
    snapshot = Snapshot(FABRIC, free_gpus=list(FREE))
    counts = BASELINES[policy](
        Capacity.of(snapshot, GangRequest(name="g", pods=pods, gpus_per_pod=1)), 0
    )
    assert counts is not None
    return {FABRIC.hosts[h].name: n for h, n in sorted(counts.items())}


@pytest.mark.parametrize(
    ("policy", "pods", "expected"),
    [
        ("first-fit", 10, {"h0-0": 8, "h0-1": 2}),
        # tightest rack that holds 6: r2 (6 free) rather than r0 (16) or r3 (12)
        ("kueue-best-fit", 6, {"h2-0": 6}),
        ("slurm-tree", 6, {"h2-0": 6}),
        # the lowest level where one domain holds 4 is a host: the least free such is h3-1
        ("kueue-least-free", 4, {"h3-1": 4}),
        # 12 needs a rack: least free rack that fits is r3 (12), not r0 (16)
        ("kueue-least-free", 12, {"h3-0": 8, "h3-1": 4}),
        # 20 spans spines: best fit takes the largest rack (r0, 16) then the tightest for 4
        ("kueue-best-fit", 20, {"h0-0": 8, "h0-1": 8, "h1-0": 2, "h1-1": 2}),
    ],
)
def test_baseline_choices(policy, pods, expected):
    assert choose(policy, pods) == expected


def test_least_allocated_spreads_one_pod_per_emptiest_host():
    got = choose("least-allocated", 3)
    assert set(got) == {"h0-0", "h0-1", "h3-0"}
    assert set(got.values()) == {1}


def test_random_fit_is_seeded():
    assert choose("random-fit", 5) == choose("random-fit", 5)


def test_least_allocated_is_not_first_fit_when_pods_take_whole_hosts():
    """Every free host scores the same for an 8-GPU pod: ties go at random (seeded), so the
    spread does not follow host order as first-fit does."""
    fabric = Fabric(generate(blocks=4, racks=4, hosts=4, gpus=8))
    gang = GangRequest(name="g", pods=4, gpus_per_pod=8)
    capacity = Capacity.of(Snapshot(fabric), gang)
    spread = BASELINES["least-allocated"](capacity, 0)
    first = BASELINES["first-fit"](capacity, 0)
    assert spread is not None
    assert first is not None
    assert sorted(spread) != sorted(first)
    assert BASELINES["least-allocated"](capacity, 0) == spread  # seeded


def hosts_by_rank(policy: str, gang: GangRequest, free: list[int] | None = None) -> list[str]:
    snapshot = Snapshot(FABRIC, free_gpus=list(free or [8] * 8))
    placement = place_one(snapshot, gang, PlaceConfig(policy=policy, seed=3))
    return [p.host for p in sorted(placement.pods, key=lambda p: p.rank)]


def test_least_allocated_ranks_the_pods_as_it_bound_them():
    """kube-scheduler binds a job's pods one by one, each to the emptiest host: on four empty
    hosts, pods 0-3 go one to each and pod 4 starts the round again, so neighbouring ranks
    sit on different hosts (depth-first ranks would keep each host's pods together)."""
    gang = GangRequest(name="g", pods=8, gpus_per_pod=1)
    ranks = hosts_by_rank("least-allocated", gang, [8, 8, 0, 0, 8, 8, 0, 0])
    assert ranks[:4] == ranks[4:]  # the same round of hosts twice
    assert len(set(ranks[:4])) == 4


@pytest.mark.parametrize("policy", ["first-fit", "random-fit"])
def test_a_filling_baseline_ranks_each_host_in_the_order_it_took_them(policy):
    gang = GangRequest(name="g", pods=24, gpus_per_pod=1)
    ranks = hosts_by_rank(policy, gang)
    taken = list(dict.fromkeys(ranks))  # hosts in the order of their first rank
    assert ranks == [h for h in taken for _ in range(8)]  # each host filled before the next
    order = sorted(taken, key=lambda h: FABRIC.dfs_position[FABRIC.host_index[h]])
    assert (taken == order) == (policy == "first-fit")  # random-fit: its own order, not the tree's


def test_a_baseline_that_finds_nothing_says_it_was_its_own_rule(monkeypatch):
    """Not a solver's time limit: the greedy rule stopped (here made to find nothing)."""
    monkeypatch.setitem(BASELINES, "first-fit", lambda _capacity, _seed: None)
    snapshot = Snapshot(FABRIC, free_gpus=list(FREE))
    gang = GangRequest(name="g", pods=1, gpus_per_pod=1)
    found = place_one(snapshot, gang, PlaceConfig(policy="first-fit"))
    assert found.reason == (
        "first-fit's rule found no placement on this free capacity (its greedy pass stops there)"
    )
