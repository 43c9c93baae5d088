"""How much a placement stretches a job (design.md section 6, time model).

A step is compute plus communication. With depth-first ranks every ring edge inside a level
domain stays inside it, so the ring runs at the bandwidth of the highest level the gang spans
(oversubscription included): NVLink inside a host or NVLink domain, the NIC inside a rack, the
ToR uplink across racks, the spine uplink across spines, the core above. The reference is the
most compact placement the empty pool allows. Slowdown = (1 - s) + s * (reference bandwidth /
actual bandwidth), where s is the job's communication share of a compact step.

Default profile (documented in the README; Philly has no model info): 1-GPU jobs do not
communicate (s = 0); jobs inside one host s = 0.2; multi-host jobs s = 0.35, inside the 30-50%
that LLM pre-training reports for communication.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduler.model.gang import GangRequest
from scheduler.topology.fabric import Fabric


@dataclass(frozen=True)
class Profile:
    single_host_share: float = 0.2
    multi_host_share: float = 0.35

    def share(self, gang: GangRequest, gpus_per_host: int) -> float:
        if gang.gpus <= 1:
            return 0.0
        return self.single_host_share if gang.gpus <= gpus_per_host else self.multi_host_share


def ring_gbps(fabric: Fabric, highest_crossed: int) -> float:
    """Bandwidth of a ring whose edges cross at most `highest_crossed` (-1: none)."""
    return fabric.gbps[max(highest_crossed, 0)]


def highest_spanned(fabric: Fabric, domains: Mapping[str, int]) -> int:
    """Highest level at which the gang spans two or more domains (-1 when on one host)."""
    spanned = [i for i, level in enumerate(fabric.levels) if domains.get(level, 1) >= 2]
    return max(spanned, default=-1)


class Reference:
    """Most compact placement of a gang on the empty pool: the lowest level with a domain
    holding its GPUs; cached per (pool, GPUs)."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self._largest: dict[str, list[int]] = {}
        self._cache: dict[tuple[str, int], float] = {}

    def largest(self, pool: str) -> list[int]:
        if pool not in self._largest:
            per_level: list[dict[int, int]] = [{} for _ in range(self.fabric.depth)]
            for h, host in enumerate(self.fabric.hosts):
                if host.pool == pool:
                    for level in range(self.fabric.depth):
                        d = self.fabric.domain[level][h]
                        per_level[level][d] = per_level[level].get(d, 0) + host.gpus
            self._largest[pool] = [max(caps.values(), default=0) for caps in per_level]
        return self._largest[pool]

    def gbps(self, gang: GangRequest) -> float:
        key = (gang.pool, gang.gpus)
        if key not in self._cache:
            largest = self.largest(gang.pool)
            lowest = next(
                (lv for lv, cap in enumerate(largest) if cap >= gang.gpus), self.fabric.depth
            )
            self._cache[key] = ring_gbps(self.fabric, lowest - 1)
        return self._cache[key]


def stretch(share: float, reference_gbps: float, rate_gbps: float) -> float:
    """Step time over a compact step's: compute (1 - s) plus communication s at the ring's rate
    against the compact reference's."""
    if share == 0.0 or rate_gbps <= 0:
        return 1.0
    return max(1.0, (1.0 - share) + share * reference_gbps / rate_gbps)
