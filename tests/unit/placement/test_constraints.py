"""Structural rules: pools, required and preferred levels, TP groups, rack caps, reasons."""

from __future__ import annotations

import pytest

from scheduler.model import GangRequest, ParallelShape, PlaceConfig, PlacementStatus
from scheduler.placement import POLICIES, Snapshot, place, validate
from scheduler.topology import Fabric, generate
from tests.conftest import fragmented


def placed_hosts(placement):
    return set(placement.hosts())


@pytest.mark.parametrize("policy", POLICIES)
def test_pool_isolation_even_when_own_pool_is_full(policy):
    fabric = Fabric(generate(2, 2, 2, gpus=8, pools={"training": 1, "online-inference": 1}))
    snapshot = Snapshot(fabric)
    for h, host in enumerate(fabric.hosts):
        if host.pool == "training":
            snapshot.free_gpus[h] = 0
    gang = GangRequest(name="t", pods=1, gpus_per_pod=8)
    [result] = place(snapshot, [gang], PlaceConfig.of(policy=policy))
    assert not result.placed
    assert "pool training" in result.reason
    inference = GangRequest(name="i", pods=2, gpus_per_pod=8, pool="online-inference")
    [ok] = place(snapshot, [inference], PlaceConfig.of(policy=policy))
    validate(snapshot, inference, ok)
    assert all(fabric.hosts[fabric.host_index[h]].pool == "online-inference" for h in ok.hosts())


def test_required_rack_reason_names_freest_rack_and_alternative(small_fabric):
    snapshot = fragmented(small_fabric, busy=0.5, seed=3)
    gang = GangRequest(name="big", pods=40, gpus_per_pod=1, required_level="rack")
    [result] = place(snapshot, [gang])
    per_rack: dict[str, int] = {}
    for h, host in enumerate(small_fabric.hosts):
        per_rack[host.domains["rack"]] = (
            per_rack.get(host.domains["rack"], 0) + snapshot.free_gpus[h]
        )
    freest = max(per_rack, key=lambda r: per_rack[r])
    ranked = sorted(per_rack.values(), reverse=True)
    racks_needed = next(k for k in range(1, 7) if sum(ranked[:k]) >= 40)
    assert not result.placed
    assert result.reason == (
        f"needs 40 pods in one rack; the freest rack {freest} has room for {per_rack[freest]}; "
        f"without the required level it fits across {racks_needed} racks"
    )


@pytest.mark.parametrize("policy", POLICIES)
def test_required_level_is_kept(policy, small_fabric):
    snapshot = fragmented(small_fabric, busy=0.3, seed=5)
    gang = GangRequest(name="g", pods=12, gpus_per_pod=1, required_level="rack")
    [result] = place(snapshot, [gang], PlaceConfig.of(policy=policy))
    assert result.placed
    validate(snapshot, gang, result)
    assert result.domains["rack"] == 1


def test_preferred_level_trades_against_traffic(small_fabric):
    """A strong spine preference keeps the gang in one spine even where spanning two would
    cross fewer racks."""
    snapshot = Snapshot(small_fabric)
    # spine 0: 3 racks with 3 free GPUs each; spine 1: racks with 8 free in one host each
    for h, host in enumerate(small_fabric.hosts):
        idx = int(host.name[1:].split("-")[1])
        rack = int(host.name[1:].split("-")[0])
        snapshot.free_gpus[h] = (3 if idx == 0 else 0) if rack < 3 else (8 if idx == 0 else 0)
    gang = GangRequest(name="g", pods=9, gpus_per_pod=1)
    [plain] = place(snapshot, [gang])
    assert plain.domains["spine"] == 2 or plain.domains["rack"] == 2
    prefer = gang.model_copy(update={"preferred_levels": {"spine": 100.0}})
    [kept] = place(snapshot, [prefer])
    validate(snapshot, prefer, kept)
    assert kept.domains["spine"] == 1


@pytest.mark.parametrize("policy", POLICIES)
def test_tp_groups_never_leave_an_nvlink_domain_or_host(policy, nvl_fabric):
    snapshot = fragmented(nvl_fabric, busy=0.25, seed=11)
    gang = GangRequest(name="tp", pods=8, gpus_per_pod=2, shape=ParallelShape(dp=4, tp=4, pp=1))
    [result] = place(snapshot, [gang], PlaceConfig.of(policy=policy))
    validate(snapshot, gang, result)  # raises if a TP group leaves its domain
    assert result.placed


def test_tp_group_on_plain_hosts_needs_whole_groups():
    fabric = Fabric(generate(1, 1, 4, gpus=4))
    snapshot = Snapshot(fabric)
    snapshot.free_gpus[:] = [3, 3, 3, 3]  # a TP group of 2 pods x 2 GPUs fits nowhere
    gang = GangRequest(name="g", pods=2, gpus_per_pod=2, shape=ParallelShape(dp=1, tp=4))
    [result] = place(snapshot, [gang])
    assert not result.placed
    assert "whole TP groups of 2 pods" in result.reason


@pytest.mark.parametrize("policy", POLICIES)
def test_online_inference_respects_rack_cap(policy):
    fabric = Fabric(generate(2, 3, 2, gpus=8, pools={"online-inference": 1}))
    snapshot = Snapshot(fabric)
    gang = GangRequest(
        name="serve", pods=6, gpus_per_pod=2, pool="online-inference", max_pods_per_rack=1
    )
    [result] = place(snapshot, [gang], PlaceConfig.of(policy=policy))
    validate(snapshot, gang, result)
    assert result.domains["rack"] == 6


def test_online_inference_spreads_over_racks_by_default():
    fabric = Fabric(generate(2, 3, 2, gpus=8, pools={"online-inference": 1}))
    gang = GangRequest(
        name="serve", pods=4, gpus_per_pod=1, pool="online-inference", max_pods_per_rack=2
    )
    [result] = place(Snapshot(fabric), [gang])
    assert result.domains["rack"] == 4  # spread wins over packing under the cap


def test_batch_inference_fills_fragments_first():
    fabric = Fabric(generate(1, 2, 2, gpus=8, pools={"batch-inference": 1}))
    snapshot = Snapshot(fabric)
    snapshot.free_gpus[3] = 2  # one host partly used
    gang = GangRequest(name="b", pods=2, gpus_per_pod=1, pool="batch-inference")
    [result] = place(snapshot, [gang])
    assert result.hosts() == {fabric.hosts[3].name: 2}


def test_fragmentation_keeps_whole_racks_free():
    """Equal traffic either way: rackwise takes the partly used rack, not a fresh one."""
    fabric = Fabric(generate(1, 2, 2, gpus=8))
    snapshot = Snapshot(fabric)
    snapshot.free_gpus[2] = 4  # rack r1 partly used, still has 12 free GPUs
    gang = GangRequest(name="g", pods=1, gpus_per_pod=8)
    [result] = place(snapshot, [gang])
    assert result.hosts() == {fabric.hosts[3].name: 1}


def test_gangs_are_placed_in_priority_order_all_or_nothing(small_fabric):
    snapshot = Snapshot(small_fabric)
    total = sum(snapshot.free_gpus)
    low = GangRequest(name="low", pods=total // 8, gpus_per_pod=8, priority=0)
    high = GangRequest(name="high", pods=2, gpus_per_pod=8, priority=5)
    results = place(snapshot, [low, high])
    assert [r.gang for r in results] == ["high", "low"]
    assert results[0].placed
    assert not results[1].placed
    assert sum(snapshot.free_gpus) == total  # place() never mutates its input


def test_down_hosts_are_never_used(small_fabric):
    snapshot = Snapshot(small_fabric)
    snapshot.down.update(range(0, len(small_fabric.hosts), 2))
    gang = GangRequest(name="g", pods=6, gpus_per_pod=8)
    [result] = place(snapshot, [gang])
    validate(snapshot, gang, result)
    assert all(small_fabric.host_index[h] % 2 == 1 for h in result.hosts())


def test_patience_waits_for_one_spine_then_gives_in():
    """2 spines x 1 rack x 2 hosts: one host busy in each rack, so 2 hosts exist only across
    spines. With patience the gang waits; once its patience is spent it takes the spread."""
    fabric = Fabric(generate(blocks=2, racks=1, hosts=2, gpus=8))
    snapshot = Snapshot(fabric)
    snapshot.use("h0-1", 8)
    snapshot.use("h1-1", 8)
    gang = GangRequest(name="g", pods=2, gpus_per_pod=8)
    [waiting] = place(snapshot, [gang], PlaceConfig.of(compact_wait_s=60, waited_s=10))
    assert waiting.status is PlacementStatus.WAITING
    assert waiting.reason == (
        "waiting up to 50 s more for a placement inside one spine (the best now spans 2)"
    )
    [spread] = place(snapshot, [gang], PlaceConfig.of(compact_wait_s=60, waited_s=60))
    assert spread.placed
    assert spread.domains["spine"] == 2
    # patience is a queue rule, available to every policy alike (the fair protocol)
    [baseline] = place(snapshot, [gang], PlaceConfig.of(policy="slurm-tree", compact_wait_s=60))
    assert baseline.status is PlacementStatus.WAITING
    [greedy] = place(snapshot, [gang], PlaceConfig.of(policy="slurm-tree"))
    assert greedy.placed
