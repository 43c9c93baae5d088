"""Shared fixtures: small fabrics and snapshots built from the real generators."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.placement import Snapshot
from scheduler.placement.snapshot import random_occupancy
from scheduler.topology import Fabric, generate

REPO = Path(__file__).resolve().parents[1]
LINGJUN = REPO / "simulations" / "traces" / "lingjun-topo.csv"


def place_raises_for(monkeypatch: pytest.MonkeyPatch, gang_name: str) -> None:
    """The queue's placement raises the unexpected for one gang; the others are placed as
    usual (each driver must report the failure and go on, or stop, as its contract says)."""
    from scheduler.queue import consider as module

    real = module.place_one

    def boom(view, gang, config):
        if gang.name == gang_name:
            raise RuntimeError("surprise")
        return real(view, gang, config)

    monkeypatch.setattr(module, "place_one", boom)


def fragmented(fabric: Fabric, busy: float, seed: int) -> Snapshot:
    return random_occupancy(fabric, busy, seed)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`rackwise ARGS` as a user runs it: its own process, from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )


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
