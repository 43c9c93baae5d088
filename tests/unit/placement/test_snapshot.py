"""What a placed gang takes from a snapshot (placement/snapshot.py): a few pods applied one
element at a time, as many as the ufunc pass applies; a gang without roles read as one request
repeated, extended resources included; a copy shares nothing it can change."""

from __future__ import annotations

import random

import numpy as np
import pytest

import scheduler.placement.snapshot as snapshot_module
from scheduler.model import GangRequest
from scheduler.model.placement import Placement, PlacementStatus, PodAssignment
from scheduler.model.topology import HostSpec, TopologySpec
from scheduler.placement.snapshot import FEW_PODS, Snapshot, usage_of
from scheduler.topology import Fabric

FABRIC = Fabric(
    TopologySpec(
        hosts=tuple(
            HostSpec(name=f"h{i}", gpus=8, domains={"rack": f"r{i // 2}"}) for i in range(6)
        )
    )
)


def columns(s: Snapshot) -> list[list[int]]:
    return [c.tolist() for c in (s.free_gpus, s.free_cpu, s.free_mem, s.free_pods)]


@pytest.mark.parametrize("seed", range(30))
def test_few_pods_apply_as_the_ufunc_pass_does(seed, monkeypatch):
    rng = random.Random(seed)
    pods = rng.randint(1, FEW_PODS)
    at = np.array([rng.randrange(6) for _ in range(pods)], dtype=np.int64)  # repeats too
    rows = np.array([[rng.randint(0, 8), rng.randint(0, 9000), rng.randint(0, 99)] for _ in at])
    sign = rng.choice((1, -1))
    few, whole = Snapshot(FABRIC), Snapshot(FABRIC)
    few.apply_rows(at, rows, sign)
    monkeypatch.setattr(snapshot_module, "FEW_PODS", 0)
    whole.apply_rows(at, rows, sign)
    assert columns(few) == columns(whole)
    assert columns(few) != columns(Snapshot(FABRIC))


def test_a_gang_without_roles_takes_its_request_on_each_pods_host():
    gang = GangRequest(
        name="g",
        pods=3,
        gpus_per_pod=2,
        cpu_milli_per_pod=500,
        memory_mib_per_pod=64,
        extended_per_pod={"rdma/ib": 1, "fpga": 0},
    )
    pods = tuple(PodAssignment(rank=i, host=h) for i, h in enumerate(("h4", "h1", "h4")))
    placement = Placement(gang="g", policy="p", status=PlacementStatus.PLACED, pods=pods)
    usage = usage_of(FABRIC, gang, placement)
    assert usage.at.tolist() == [4, 1, 4]
    assert usage.amounts.tolist() == [[2, 500, 64]] * 3
    # a resource asked at 0 is still named, as the per-role path names it
    assert {n: (h.tolist(), u.tolist()) for n, (h, u) in usage.extended.items()} == {
        "rdma/ib": ([4, 1, 4], [1, 1, 1]),
        "fpga": ([4, 1, 4], [0, 0, 0]),
    }
    none = usage_of(FABRIC, gang, placement.model_copy(update={"pods": ()}))
    assert (none.at.tolist(), none.amounts.shape, none.extended) == ([], (0, 3), {})


def test_a_copy_shares_nothing_it_can_change():
    """What a copy's gangs take leaves the original as it was: every column, the down hosts
    and extended resources (a copy passes its columns to the constructor, which copies them)."""
    ext = TopologySpec(
        hosts=(
            HostSpec(name="h0", gpus=8, domains={"rack": "r0"}, extended={"rdma": 4}),
            HostSpec(name="h1", gpus=8, domains={"rack": "r0"}),
        )
    )
    original = Snapshot(Fabric(ext))
    before = (columns(original), set(original.down), original.free_ext["rdma"].tolist())
    copy = original.copy()
    for column in (copy.free_gpus, copy.free_cpu, copy.free_mem, copy.free_pods):
        column[0] -= 1
    copy.down.add(1)
    copy.free_ext["rdma"][0] -= 1
    assert (columns(original), set(original.down), original.free_ext["rdma"].tolist()) == before
