"""Free capacity at one instant, over a fabric. Mutable on purpose: the simulator and the
controller apply and release placements thousands of times; `place()` never mutates it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.model.gang import GangRequest
from scheduler.model.placement import Placement
from scheduler.topology.fabric import Fabric


@dataclass
class Snapshot:
    fabric: Fabric
    free_gpus: list[int] = field(default_factory=list)
    free_cpu: list[int] = field(default_factory=list)
    free_mem: list[int] = field(default_factory=list)
    # hosts that take no new pods (cordoned, failed, not ready)
    down: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        hosts = self.fabric.hosts
        if not self.free_gpus:
            self.free_gpus = [h.gpus for h in hosts]
        if not self.free_cpu:
            self.free_cpu = [h.cpu_milli for h in hosts]
        if not self.free_mem:
            self.free_mem = [h.memory_mib for h in hosts]

    @classmethod
    def empty(cls, fabric: Fabric) -> Snapshot:
        return cls(fabric)

    def copy(self) -> Snapshot:
        return Snapshot(
            self.fabric,
            list(self.free_gpus),
            list(self.free_cpu),
            list(self.free_mem),
            set(self.down),
        )

    def use(self, host: str, gpus: int, cpu_milli: int = 0, memory_mib: int = 0) -> None:
        """Record usage by a workload this scheduler did not place (e.g. a state file)."""
        h = self.fabric.host_index[host]
        self.free_gpus[h] -= gpus
        self.free_cpu[h] -= cpu_milli
        self.free_mem[h] -= memory_mib

    def apply(self, gang: GangRequest, placement: Placement, sign: int = 1) -> None:
        """Take (sign=1) or give back (sign=-1) the resources of a placed gang."""
        index = self.fabric.host_index
        for host, pods in placement.hosts().items():
            h = index[host]
            self.free_gpus[h] -= sign * pods * gang.gpus_per_pod
            self.free_cpu[h] -= sign * pods * gang.cpu_milli_per_pod
            self.free_mem[h] -= sign * pods * gang.memory_mib_per_pod

    def release(self, gang: GangRequest, placement: Placement) -> None:
        self.apply(gang, placement, sign=-1)

    def is_empty(self, h: int) -> bool:
        return self.free_gpus[h] == self.fabric.hosts[h].gpus

    def busy_racks(self) -> set[int]:
        """Racks with anything running: the others are kept whole for large gangs."""
        rack = self.fabric.domain[2]
        return {rack[h] for h in range(len(self.fabric.hosts)) if not self.is_empty(h)}

    def free_by_pool(self) -> Mapping[str, int]:
        out: dict[str, int] = {}
        for h, host in enumerate(self.fabric.hosts):
            if h not in self.down:
                out[host.pool] = out.get(host.pool, 0) + self.free_gpus[h]
        return out
