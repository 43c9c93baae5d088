"""How many pods of a gang each host, and each domain, can take right now."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from scheduler.model.gang import GangRequest
from scheduler.placement.snapshot import Snapshot


def _fit(free: int, need: int) -> int:
    return free // need if need else 1 << 30


@dataclass(frozen=True)
class Capacity:
    """Pods per eligible host for one gang, and per domain at every level.

    With tensor-parallel groups wider than a pod, a host outside a real NVLink domain only
    counts whole groups; inside an NVLink domain the group may span hosts of that domain."""

    snapshot: Snapshot
    gang: GangRequest
    slots: dict[int, int]

    @classmethod
    def of(cls, snapshot: Snapshot, gang: GangRequest) -> Capacity:
        fabric = snapshot.fabric
        group = gang.tp_pods
        nvlink = fabric.domain[1]
        slots: dict[int, int] = {}
        for h, host in enumerate(fabric.hosts):
            if host.pool != gang.pool or h in snapshot.down:
                continue
            pods = min(
                _fit(snapshot.free_gpus[h], gang.gpus_per_pod),
                _fit(snapshot.free_cpu[h], gang.cpu_milli_per_pod),
                _fit(snapshot.free_mem[h], gang.memory_mib_per_pod),
            )
            if group > 1 and nvlink[h] not in fabric.real_nvlink:
                pods -= pods % group
            if pods > 0:
                slots[h] = pods
        return cls(snapshot, gang, slots)

    @property
    def total(self) -> int:
        return sum(self.slots.values())

    @cached_property
    def per_domain(self) -> tuple[dict[int, int], ...]:
        """level -> {domain index: pods it can hold}."""
        fabric = self.snapshot.fabric
        out: list[dict[int, int]] = []
        for column in fabric.domain:
            caps: dict[int, int] = {}
            for h, pods in self.slots.items():
                d = column[h]
                caps[d] = caps.get(d, 0) + pods
            out.append(caps)
        group = self.gang.tp_pods
        if group > 1:
            out[1] = {d: c - c % group for d, c in out[1].items()}
        rack_cap = self.gang.max_pods_per_rack
        if rack_cap is not None:
            out[2] = {d: min(c, rack_cap) for d, c in out[2].items()}
            for level in range(3, len(out)):
                up = fabric.ancestor[2][level]
                capped: dict[int, int] = {}
                for d, c in out[2].items():
                    capped[up[d]] = capped.get(up[d], 0) + c
                out[level] = capped
        return tuple(out)
