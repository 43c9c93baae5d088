"""How much a placement stretches a job (docs/design.md, "The fabric model").

A step is compute plus communication. A ring inside one host or NVLink domain runs at NVLink
rate; any other ring runs at the NIC rate when it shares no link, wherever it goes (an idle
fabric does not slow a lone ring: MegaScale, Meta's RoCE fabric); it slows only where it
shares links with other rings (simulation/network.py). The reference is the compact rate: the
NVLink rate when the gang fits in one NVLink domain of its pool, else the NIC rate.
Slowdown = (1 - s) + s * (reference rate / actual rate), s being the job's communication share
of a compact step (simulation/profiles.py: CommShare); the formula is topology/sharing.stretch,
shared with the demand model (simulation/fabricload.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduler.model.gang import GangRequest
from scheduler.model.topology import Tier
from scheduler.topology.fabric import Fabric


def nvlink_gbps(fabric: Fabric) -> float:
    """Per-host rate of traffic that stays inside a host or NVLink domain."""
    return fabric.spec.levels[Tier.HOST].bandwidth_gbps


def nic_gbps(fabric: Fabric) -> float:
    """Per-host rate of traffic that leaves a host or NVLink domain: its NIC."""
    return fabric.spec.levels[Tier.NVLINK].bandwidth_gbps


def uncontended_gbps(fabric: Fabric, hosts: Iterable[int]) -> float:
    """A ring's rate when it shares no link: NVLink inside one NVLink domain, else the NIC."""
    domains = {fabric.domain[Tier.NVLINK][h] for h in hosts}
    return nvlink_gbps(fabric) if len(domains) <= 1 else nic_gbps(fabric)


class Reference:
    """The compact rate of a gang: NVLink when some NVLink domain of its pool holds its GPUs,
    else the NIC; cached per (pool, GPUs)."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self._cache: dict[tuple[str, int], float] = {}

    def largest(self, pool: str) -> int:
        """GPUs of the pool's largest NVLink domain."""
        return self.fabric.largest_nvlink.get(pool, 0)

    def gbps(self, gang: GangRequest) -> float:
        key = (gang.pool, gang.gpus)
        if key not in self._cache:
            fits = gang.pods == 1 or self.largest(gang.pool) >= gang.gpus
            self._cache[key] = nvlink_gbps(self.fabric) if fits else nic_gbps(self.fabric)
        return self._cache[key]
