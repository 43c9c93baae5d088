"""The fabric's links as resources that jobs share: what they are, how fast, and which a flow
crosses.

Contract. Takes the fabric and a `Links` model (NVLink and NIC rates, a NIC per GPU or one per
host, oversubscription per level, which levels hash flows onto paths). Decides each resource's
capacity and the resources a flow between two GPUs crosses: inside one NVLink domain (one host,
or the trays of a multi-host NVLink domain) the two GPUs' NVLink ports; otherwise out of the
source GPU's NIC, up the uplinks of every domain below the two hosts' lowest common level, down
the other side and into the destination GPU's NIC. Links are full duplex: each direction is a
resource of its own. Rail-optimised (`rails`, NVIDIA's DGX SuperPOD reference design): lane i
of every host of a rack (a scalable unit) is cabled to that rack's rail switch i, whose uplinks
carry lane i's traffic only; rails meet at the spine. A flow between lanes i and j first crosses
NVLink to lane j of its own host and leaves by that GPU's NIC (NCCL's PXN), so it stays on the
destination's rail. Promises: an uplink carries its hosts' NIC bandwidth over the level's
oversubscription (a rail's uplink, its lane's share), split into paths of `path_gbps` at an
ECMP level; a NIC per GPU carries the lane's traffic only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property

import numpy as np

from scheduler.model.topology import HostSpec, Tier
from scheduler.topology.fabric import Fabric
from scheduler.topology.traffic import Gpu


class Port(StrEnum):
    NVLINK = "nvlink"  # a GPU's NVLink port
    NIC = "nic"  # a GPU's NIC (lane 0: the host's one NIC where NICs are per host)
    UPLINK = "uplink"  # the links out of a domain to its parent switch


@dataclass(frozen=True, order=True)
class Resource:
    port: Port
    level: int  # the domain's level for an uplink; the host's (0) for ports
    domain: int  # host index for ports
    lane: int  # GPU lane for ports; 0 for uplinks
    up: bool  # leaving (True) or entering the domain or GPU
    path: int = 0  # which path, at an ECMP level


# (seed, job, resource, flow identity, paths) -> path
Hash = Callable[[int, int, Resource, str, int], int]


def flow_hash(seed: int, job: int, resource: Resource, flow: str, paths: int) -> int:
    """A flow's path: the same for the same job, link, flow identity and seed, independent
    across flows. A cryptographic digest, not CRC-32: a CRC is linear, so keys that differ in a
    character or two (flow 3 and flow 5 of one job) land on distinct paths whenever the path
    count is a power of two, and plain ECMP would never collide on 64 or 128 paths."""
    key = f"{seed}/{job}/{resource.level}/{resource.domain}/{resource.up}/{flow}"
    if resource.lane:  # a rail's uplink: hashed on its own (lane 0 keeps the plain key)
        key += f"/{resource.lane}"
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % paths


@dataclass(frozen=True)
class Links:
    nvlink_gbps: float = 900.0  # per GPU, each way (H100 and GB200 NVLink: ~900 GB/s)
    nic_gbps: float = 50.0  # per NIC, each way (400 Gb/s)
    per_gpu_nic: bool = True  # HGX hosts and NVL72 trays: one NIC per GPU
    oversubscription: Mapping[int, float] = field(default_factory=dict)  # level -> ratio
    ecmp: frozenset[int] = frozenset()  # levels whose uplinks hash flows onto paths
    path_gbps: float = 50.0  # one path (port) of an uplink at an ECMP level
    flows: int = 1  # F: flows per job per link at an ECMP level (queue pairs)
    seed: int = 0
    hash: Hash = flow_hash
    rails: bool = False  # rail-optimised racks (needs a NIC per GPU, as many GPUs on every host)


class Wires:
    """Capacities and routes of one fabric under one links model."""

    def __init__(self, fabric: Fabric, links: Links) -> None:
        if links.rails and not rails_fit(fabric.hosts, links.per_gpu_nic):
            raise ValueError(RAILS_NEED)
        self.fabric = fabric
        self.links = links

    def route(self, a: Gpu, b: Gpu) -> list[Resource]:
        """The resources a flow from GPU a to GPU b crosses (paths not chosen)."""
        top = self.fabric.lowest_common_level(a.host, b.host)
        if top <= Tier.NVLINK:
            return [self.port(Port.NVLINK, a, True), self.port(Port.NVLINK, b, False)]
        out = [*self.leave(a, b.lane), self.port(Port.NIC, b, False)]
        for level in range(Tier.RACK, top):
            out.append(self.uplink(level, a.host, True, b.lane))
            out.append(self.uplink(level, b.host, False, b.lane))
        return out

    def leave(self, a: Gpu, lane: int) -> list[Resource]:
        """How a's traffic to a GPU of `lane` in another NVLink domain leaves a's host: by a's
        NIC, or on rails over NVLink to that lane's GPU first and out of its NIC (PXN)."""
        if not self.links.rails or lane == a.lane:
            return [self.port(Port.NIC, a, True)]
        via = Gpu(a.host, lane)
        return [
            self.port(Port.NVLINK, a, True),
            self.port(Port.NVLINK, via, False),
            self.port(Port.NIC, via, True),
        ]

    def nvlink_domain(self, host: int) -> int:
        return self.fabric.domain[Tier.NVLINK][host]

    def hashes(self, resource: Resource) -> bool:
        """An uplink at an ECMP level: its flows are hashed onto paths."""
        return resource.port is Port.UPLINK and resource.level in self.links.ecmp

    def domain(self, level: int, host: int) -> int:
        return self.fabric.domain[level][host]

    @property
    def uplink_levels(self) -> range:
        """The levels whose domains have uplinks a flow can cross (racks and up)."""
        return range(Tier.RACK, self.fabric.depth)

    def port(self, port: Port, gpu: Gpu, up: bool) -> Resource:
        lane = gpu.lane if port is Port.NVLINK or self.links.per_gpu_nic else 0
        return Resource(port, Tier.HOST, gpu.host, lane, up)

    def uplink(self, level: int, host: int, up: bool, lane: int = 0) -> Resource:
        """The uplink of the level's domain holding `host`; a rack's rail `lane` on rails."""
        rail = lane if self.on_rails(level) else 0
        return Resource(Port.UPLINK, level, self.fabric.domain[level][host], rail, up)

    def on_rails(self, level: int) -> bool:
        """A rack's uplinks are its rail switches' (rails meet at the spine)."""
        return self.links.rails and level == Tier.RACK

    def capacity(self, resource: Resource) -> float:
        """GB/s of a resource; at an ECMP level, of one path."""
        if resource.port is Port.NVLINK:
            return self.links.nvlink_gbps
        if resource.port is Port.NIC:
            return (
                self.links.nic_gbps if self.links.per_gpu_nic else self.host_gbps[resource.domain]
            )
        return self.link_gbps(resource) / self.paths(resource)

    def paths(self, resource: Resource) -> int:
        if resource.port is not Port.UPLINK or resource.level not in self.links.ecmp:
            return 1
        return max(1, round(self.link_gbps(resource) / self.links.path_gbps))

    def link_gbps(self, resource: Resource) -> float:
        """An uplink's GB/s: its domain's, or on rails its lane's share of the rack's."""
        gbps = self.uplink_gbps(resource.level, resource.domain)
        return gbps / self.fabric.hosts[0].gpus if self.on_rails(resource.level) else gbps

    def uplink_gbps(self, level: int, domain: int) -> float:
        """The hosts' NIC bandwidth below the domain over the level's oversubscription."""
        key = (level, domain)
        if key not in self._uplinks:
            below = float(self._below[level][domain])
            spec = self.fabric.spec.levels[level].oversubscription
            self._uplinks[key] = below / self.links.oversubscription.get(level, spec)
        return self._uplinks[key]

    @cached_property
    def host_gbps(self) -> list[float]:
        """Each host's NIC bandwidth: its GPUs' NICs, or its one NIC."""
        per_gpu = self.links.per_gpu_nic
        return [self.links.nic_gbps * (h.gpus if per_gpu else 1) for h in self.fabric.hosts]

    @cached_property
    def _below(self) -> list[np.ndarray]:
        gbps = np.asarray(self.host_gbps)
        return [np.bincount(column, weights=gbps) for column in self.fabric.columns]

    @cached_property
    def _uplinks(self) -> dict[tuple[int, int], float]:
        return {}


RAILS_NEED = "rails need a NIC per GPU and as many GPUs on every host (one rail per lane)"


def rails_fit(hosts: Sequence[HostSpec], per_gpu_nic: bool) -> bool:
    """Whether rails can be cabled: a NIC per GPU, and as many GPUs on every host."""
    return per_gpu_nic and len({h.gpus for h in hosts}) == 1


class CompactWires(Wires):
    """The reference a stretch is measured from: ranks filled in order into hosts and NVLink
    domains as large as the pool's largest, every flow between two of them at its GPUs' NIC
    rate, nothing above the NICs shared or oversubscribed. Hosts are virtual: host h is in
    NVLink domain h // hosts_per_domain."""

    def __init__(self, links: Links, hosts_per_domain: int) -> None:
        self.links = links
        self.hosts_per_domain = max(1, hosts_per_domain)

    def route(self, a: Gpu, b: Gpu) -> list[Resource]:
        if self.nvlink_domain(a.host) == self.nvlink_domain(b.host):
            return [self.port(Port.NVLINK, a, True), self.port(Port.NVLINK, b, False)]
        # on rails, the same NICs as on the real fabric
        return [*self.leave(a, b.lane), self.port(Port.NIC, b, False)]

    def nvlink_domain(self, host: int) -> int:
        return host // self.hosts_per_domain

    @property
    def uplink_levels(self) -> range:
        return range(0)

    def capacity(self, resource: Resource) -> float:
        """NVLink per GPU; a NIC, per GPU or the virtual host's one."""
        return self.links.nvlink_gbps if resource.port is Port.NVLINK else self.links.nic_gbps
