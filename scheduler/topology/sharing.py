"""How fast each job's communication goes when jobs share the fabric, by what they demand.

Contract. Takes the fabric, a `Links` model (NVLink and NIC rates, a NIC per GPU or one per
host, oversubscription per level, which levels hash flows onto paths (ECMP) with how many flows
per job and how wide a path) and each running job's flows of one step (traffic.py). Decides:
- where each flow goes: inside one NVLink domain over the two GPUs' NVLink ports; otherwise out
  of the source GPU's NIC, up the uplinks of every domain below the lowest common level, down
  the other side, into the destination GPU's NIC; links are full duplex (each direction is
  its own resource);
- what each job demands of each resource: the bandwidth it uses running alone, at the rate its
  own bottleneck allows (so an all-to-all split over an oversubscribed tier is slowed even
  alone, and a lone ring over a 1:1 fabric never is);
- each job's speed (0, 1]: max-min fair, raised together until a resource fills
  (sum of speed x demand within each resource's capacity) or the job reaches its lone rate;
- at an ECMP level, a link is `paths` paths; each job's demand on it is F equal flows, each
  hashed (per seed) onto one path, and the job is as fast as its slowest flow allows.
Promises: no resource carries more than its capacity; a job that shares no resource runs at
speed 1; the step's communication time is its lone time over its speed (`comm_seconds`).

Assumptions, stated: a job's classes are one phase (its demand is its step's bytes over its
lone communication time, per resource), which averages phases that a real step runs one
after another; traffic inside a GPU is free; NVLink ports are never shared between jobs (no
GPU is). Sources: max-min fair sharing as in Crux (SIGCOMM'24) and Cassini (NSDI'24); flows
hashed onto paths and the slowest flow as in Meta's RoCE fabric (SIGCOMM'24).
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from scheduler.model.topology import Tier
from scheduler.topology.fabric import Fabric
from scheduler.topology.traffic import Flow, Gpu, Traffic


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
    up: bool  # leaving (True) or entering the domain / GPU
    path: int = 0  # which path, at an ECMP level


# (seed, job, resource, flow index, paths) -> path; crc32 of the tuple by default
Hash = Callable[[int, int, Resource, int, int], int]


def crc_hash(seed: int, job: int, resource: Resource, flow: int, paths: int) -> int:
    key = f"{seed}/{job}/{resource.level}/{resource.domain}/{resource.up}/{flow}"
    return zlib.crc32(key.encode()) % paths


@dataclass(frozen=True)
class Links:
    nvlink_gbps: float = 900.0  # per GPU, each way (H100/GB200 NVLink: ~900 GB/s)
    nic_gbps: float = 50.0  # per NIC, each way (400 Gb/s)
    per_gpu_nic: bool = True  # HGX and NVL72 trays: one NIC per GPU
    oversubscription: Mapping[int, float] = field(default_factory=dict)  # level -> ratio
    ecmp: frozenset[int] = frozenset()  # levels whose uplinks hash flows onto paths
    path_gbps: float = 50.0  # one path (port) of an uplink at an ECMP level
    flows: int = 1  # F: flows per job per link at an ECMP level (queue pairs)
    seed: int = 0
    hash: Hash = crc_hash


@dataclass
class Job:
    flows: list[Flow]
    load: dict[Resource, float] = field(default_factory=dict)  # GB per step per resource
    alone: float = 0.0  # seconds of communication per step with nothing else on the fabric


class Sharing:
    def __init__(self, fabric: Fabric, links: Links) -> None:
        self.fabric = fabric
        self.links = links
        self.jobs: dict[int, Job] = {}
        self._host_gbps = [self._nics(h) * links.nic_gbps for h in range(len(fabric.hosts))]

    def add(self, job: int, flows: Iterable[Flow]) -> None:
        entry = Job(list(flows))
        for flow in entry.flows:
            for resource in self.route(flow.src, flow.dst):
                self._charge(job, entry, resource, flow.gb)
        entry.alone = max((gb / self.capacity(r) for r, gb in entry.load.items()), default=0.0)
        self.jobs[job] = entry

    def remove(self, job: int) -> None:
        self.jobs.pop(job, None)

    def route(self, a: Gpu, b: Gpu) -> list[Resource]:
        """The resources a flow from GPU a to GPU b crosses (paths not yet chosen)."""
        fabric = self.fabric
        top = fabric.lowest_common_level(a.host, b.host)
        if top <= Tier.NVLINK:
            return [self._port(Port.NVLINK, a, True), self._port(Port.NVLINK, b, False)]
        out = [self._port(Port.NIC, a, True), self._port(Port.NIC, b, False)]
        for level in range(Tier.RACK, top):
            out.append(Resource(Port.UPLINK, level, fabric.domain[level][a.host], 0, True))
            out.append(Resource(Port.UPLINK, level, fabric.domain[level][b.host], 0, False))
        return out

    def capacity(self, resource: Resource) -> float:
        """GB/s of a resource; at an ECMP level, of one path."""
        if resource.port is Port.NVLINK:
            return self.links.nvlink_gbps
        if resource.port is Port.NIC:
            return self._host_gbps[resource.domain] / self._nics(resource.domain)
        return self._uplink(resource.level, resource.domain) / self._paths(resource)

    def speeds(self) -> dict[int, float]:
        """Every job's speed: max-min fair over the resources' capacities."""
        demand = {
            j: {r: gb / job.alone for r, gb in job.load.items()}
            for j, job in self.jobs.items()
            if job.alone > 0
        }
        speed = water_fill(demand, self.capacity)
        return {j: speed.get(j, 1.0) for j in self.jobs}

    def comm_seconds(self) -> dict[int, float]:
        """Seconds of communication per step of each job, sharing the fabric as it is."""
        speed = self.speeds()
        return {j: job.alone / speed[j] for j, job in self.jobs.items()}

    def compact_seconds(self, flows: Iterable[Flow], fits: bool) -> float:
        """A step's communication in a compact placement on an idle fabric, the reference a
        stretch is measured from: everything over NVLink when the job fits one NVLink domain
        of its pool; otherwise TP over NVLink and the rest at its GPUs' NIC rate."""
        load: dict[Resource, float] = defaultdict(float)
        for flow in flows:
            port = Port.NVLINK if fits or flow.traffic is Traffic.TENSOR else Port.NIC
            load[self._port(port, flow.src, True)] += flow.gb
            load[self._port(port, flow.dst, False)] += flow.gb
        return max((gb / self.capacity(r) for r, gb in load.items()), default=0.0)

    def _charge(self, j: int, job: Job, resource: Resource, gb: float) -> None:
        paths = self._paths(resource)
        if paths == 1:
            job.load[resource] = job.load.get(resource, 0.0) + gb
            return
        f = self.links.flows
        for k in range(f):  # F flows of the job's share, each on its hashed path
            path = self.links.hash(self.links.seed, j, resource, k, paths)
            on = Resource(resource.port, resource.level, resource.domain, 0, resource.up, path)
            job.load[on] = job.load.get(on, 0.0) + gb / f

    def _port(self, port: Port, gpu: Gpu, up: bool) -> Resource:
        lane = gpu.lane if port is Port.NVLINK or self.links.per_gpu_nic else 0
        return Resource(port, Tier.HOST, gpu.host, lane, up)

    def _nics(self, host: int) -> int:
        return max(1, self.fabric.hosts[host].gpus) if self.links.per_gpu_nic else 1

    def _uplink(self, level: int, domain: int) -> float:
        """The hosts' NIC bandwidth below the domain over the level's oversubscription."""
        column = self.fabric.domain[level]
        below = sum(g for h, g in enumerate(self._host_gbps) if column[h] == domain)
        ratio = self.links.oversubscription.get(
            level, self.fabric.spec.levels[level].oversubscription
        )
        return below / ratio

    def _paths(self, resource: Resource) -> int:
        if resource.port is not Port.UPLINK or resource.level not in self.links.ecmp:
            return 1
        return max(1, round(self._uplink(resource.level, resource.domain) / self.links.path_gbps))


def stretch(share: float, compact: float, actual: float) -> float:
    """Step time over a compact step's: compute (1 - s) plus communication s, at the actual
    communication time against the compact one."""
    if share == 0.0 or compact <= 0.0:
        return 1.0
    return max(1.0, (1.0 - share) + share * actual / compact)


def water_fill(
    demand: Mapping[int, Mapping[Resource, float]], capacity: Callable[[Resource], float]
) -> dict[int, float]:
    """Max-min fair speeds in [0, 1]: raise every unfrozen job's speed together until a
    resource fills (its jobs freeze) or a job reaches 1."""
    speed = dict.fromkeys(demand, 0.0)
    left = {r: capacity(r) for d in demand.values() for r in d}
    users: dict[Resource, set[int]] = defaultdict(set)
    for j, d in demand.items():
        for r in d:
            users[r].add(j)
    active = set(demand)
    while active:
        step = _step(active, speed, demand, left, users)
        for j in active:
            speed[j] += step
            for r, x in demand[j].items():
                left[r] -= step * x
        full = {r for r, room in left.items() if room <= 1e-9 * (1 + capacity(r))}
        active = {j for j in active if speed[j] < 1 - 1e-12 and not full & demand[j].keys()}
    return speed


def _step(
    active: set[int],
    speed: dict[int, float],
    demand: Mapping[int, Mapping[Resource, float]],
    left: dict[Resource, float],
    users: Mapping[Resource, set[int]],
) -> float:
    """How far every active job's speed can rise together before something binds."""
    step = min(1.0 - speed[j] for j in active)
    for r, room in left.items():
        rate = sum(demand[j][r] for j in users[r] if j in active)
        if rate > 0:
            step = min(step, room / rate)
    return max(step, 0.0)
