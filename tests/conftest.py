"""Shared fixtures: small fabrics and snapshots built from the real generators."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from scheduler.placement import Snapshot
from scheduler.topology import Fabric, generate

REPO = Path(__file__).resolve().parents[1]
LINGJUN = REPO / "simulations" / "traces" / "lingjun-topo.csv"


def fragmented(fabric: Fabric, busy: float, seed: int) -> Snapshot:
    """Each GPU busy with probability `busy`, independently (seeded)."""
    snapshot = Snapshot(fabric)
    rng = random.Random(seed)
    for h, host in enumerate(fabric.hosts):
        snapshot.free_gpus[h] = sum(rng.random() >= busy for _ in range(host.gpus))
    return snapshot


@pytest.fixture
def small_fabric() -> Fabric:
    return Fabric(generate(blocks=2, racks=3, hosts=4, gpus=8))


@pytest.fixture
def nvl_fabric() -> Fabric:
    """Heterogeneous: NVLink domains of 4 hosts in spine 0's racks, plain hosts in spine 1."""
    plain = generate(blocks=2, racks=2, hosts=4, gpus=4)
    hosts = []
    for host in plain.hosts:
        domains = dict(host.domains)
        if domains["spine"] == "s0":
            domains["nvlink"] = f"nvl-{domains['rack']}"
        hosts.append(host.model_copy(update={"domains": domains}))
    return Fabric(plain.model_copy(update={"hosts": tuple(hosts)}))
