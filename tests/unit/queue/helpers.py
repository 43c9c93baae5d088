"""Small fabrics and running gangs for the queue tests."""

from __future__ import annotations

from scheduler.model import GangRequest, Placement, PlacementStatus, PodAssignment
from scheduler.placement import Snapshot
from scheduler.queue import Running
from scheduler.topology import Fabric, generate


def fabric(blocks: int = 2, racks: int = 2, hosts: int = 2) -> Fabric:
    """blocks x racks x hosts hosts of 8 GPUs; hosts are h<rack>-<i>, racks numbered across."""
    return Fabric(generate(blocks=blocks, racks=racks, hosts=hosts, gpus=8))


def gang(name: str, pods: int, priority: int = 0, gpus: int = 8) -> GangRequest:
    return GangRequest(name=name, pods=pods, gpus_per_pod=gpus, priority=priority)


def running(
    snapshot: Snapshot,
    name: str,
    hosts: list[str],
    priority: int = 0,
    started: float = 0.0,
    gpus: int = 8,
    end: float | None = None,
    tenant: str = "",
) -> Running:
    """A gang of one pod per listed host, taken from the snapshot."""
    g = gang(name, len(hosts), priority, gpus)
    pods = tuple(PodAssignment(rank=i, host=h) for i, h in enumerate(hosts))
    placement = Placement(gang=name, policy="test", status=PlacementStatus.PLACED, pods=pods)
    snapshot.apply(g, placement)
    return Running(name, g, placement, started, tenant=tenant, end_s=end)
