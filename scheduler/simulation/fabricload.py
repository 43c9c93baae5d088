"""How the simulator asks what the fabric does to a running job: one port, two models.

Contract. Takes each job as it starts (its gang, placement and communication share) and as it
stops. Decides, per model: the job's stretch now (step time over its compact step's), the
stretch it would have alone on the fabric, and which other jobs a start or stop moves.
`RingLoad` is the ring model (simulation/network.py with slowdown.py: one ring per job at its
NIC rate, shared max-min); `DemandLoad` is the demand model (topology/sharing.py: each job's
traffic by parallel class on every link it crosses, GPUs on lanes with a NIC each, ECMP as
hashed flows). Promises: under the oracle profile nothing is ever shared and every job runs at
its compact stretch of 1; with `alone` every job runs at the stretch its placement gives it
alone and no job moves another; the engine's decisions do not depend on which model it asks,
only the stretches do.
"""

from __future__ import annotations

from typing import Protocol

from scheduler.model.gang import GangRequest, ParallelShape
from scheduler.model.placement import Placement
from scheduler.simulation.network import Network
from scheduler.simulation.profiles import FabricProfile, SharingModel
from scheduler.simulation.records import JobState
from scheduler.simulation.slowdown import Reference, nic_gbps, nvlink_gbps, uncontended_gbps
from scheduler.topology.fabric import Fabric
from scheduler.topology.links import Links, Wires
from scheduler.topology.loads import compact_seconds, job_load
from scheduler.topology.sharing import Sharing, stretch
from scheduler.topology.traffic import Gpu, StepBytes, comm_share, step_bytes


class FabricLoad(Protocol):
    def start(self, state: JobState) -> set[int]: ...
    def stop(self, order: int) -> set[int]: ...
    def stretch(self, state: JobState) -> float: ...
    def lone(self, state: JobState) -> float: ...


def fabric_load(fabric: Fabric, profile: FabricProfile, seed: int) -> FabricLoad:
    if profile.sharing is SharingModel.DEMAND:
        return DemandLoad(fabric, profile, seed)
    return RingLoad(fabric, profile)


class RingLoad:
    def __init__(self, fabric: Fabric, profile: FabricProfile) -> None:
        self.fabric = fabric
        self.profile = profile
        self.reference = Reference(fabric)
        self.network = Network(fabric, profile)

    def start(self, state: JobState) -> set[int]:
        """Join the network: the oracle's rings share nothing and run at their compact rate."""
        assert state.placement is not None
        hosts = [self.fabric.host_index[h] for h in state.placement.hosts()]
        state.reference_gbps = self.reference.gbps(state.gang)
        shared = self.profile.shared
        state.cap_gbps = uncontended_gbps(self.fabric, hosts) if shared else state.reference_gbps
        meets = state.share and shared and not self.profile.alone
        links = self.network.crossed(hosts) if meets else ()
        return self.network.start(state.order, state.cap_gbps, links) | {state.order}

    def stop(self, order: int) -> set[int]:
        return self.network.stop(order)

    def stretch(self, state: JobState) -> float:
        return _at(state, self.network.rates.get(state.order, state.cap_gbps))

    def lone(self, state: JobState) -> float:
        return _at(state, state.cap_gbps)


def _at(state: JobState, rate_gbps: float) -> float:
    """A ring's stretch at a rate: times go as one over rates, so the actual time over the
    compact one is the compact rate over the actual rate (the same formula, the same digits)."""
    return stretch(state.share, compact=rate_gbps, actual=state.reference_gbps)


class DemandLoad:
    """The demand model; a job's GPUs take the lowest free lanes of their hosts (a pod's GPUs
    consecutive), so two pods on one host leave by different NICs where NICs are per GPU."""

    def __init__(self, fabric: Fabric, profile: FabricProfile, seed: int) -> None:
        self.fabric = fabric
        self.profile = profile
        links = Links(
            nvlink_gbps=nvlink_gbps(fabric),
            nic_gbps=nic_gbps(fabric),
            per_gpu_nic=profile.per_gpu_nic,
            oversubscription={
                lv: profile.oversubscription(lv, spec.oversubscription, spec.name)
                for lv, spec in enumerate(fabric.spec.levels)
            },
            ecmp=frozenset(fabric.index(name) for name in profile.ecmp),
            path_gbps=nic_gbps(fabric),
            flows=profile.flows,
            seed=seed,
            rails=profile.rails,
        )
        self.wires = Wires(fabric, links)
        self.sharing = Sharing(self.wires)
        self.reference = Reference(fabric)
        self.free = [list(range(h.gpus)) for h in fabric.hosts]  # free lanes per host
        self.host_gpus = max(h.gpus for h in fabric.hosts)
        self.held: dict[int, list[Gpu]] = {}
        self.compact: dict[int, float] = {}
        self.overlap: dict[int, float] = {}  # the jobs whose model hides some communication
        self.own: dict[int, Sharing] = {}  # each job's fabric of its own (profile.alone)

    def start(self, state: JobState) -> set[int]:
        assert state.placement is not None
        gang = state.gang
        gpus = self._take(state.order, state.placement, gang)
        if not gpus:  # no GPU, no traffic this model counts
            return {state.order}
        shape = shape_of(gang)
        model = state.job.model
        step = step_bytes(model, shape) if model else StepBytes(data=1.0)
        domain = max(self.reference.largest(gang.pool), self.host_gpus)
        compact = compact_seconds(self.wires.links, shape, step, self.host_gpus, domain)
        self.compact[state.order] = compact
        if model is not None:  # the share follows from the model, not a draw: what is exposed
            state.share = comm_share(model, shape, compact)
            self.overlap[state.order] = model.overlap
        if not self.profile.shared or not state.share:
            return {state.order}
        load = job_load(self.wires, state.order, shape, step, gpus)
        sharing = self.sharing
        if self.profile.alone:
            sharing = self.own[state.order] = Sharing(self.wires)
        return sharing.add(state.order, load) | {state.order}

    def stop(self, order: int) -> set[int]:
        for gpu in self.held.pop(order, []):
            self.free[gpu.host].append(gpu.lane)
        self.compact.pop(order, None)
        self.overlap.pop(order, None)
        sharing = self.own.pop(order, self.sharing)
        return sharing.remove(order) if order in sharing.jobs else set()

    def stretch(self, state: JobState) -> float:
        sharing = self.own.get(state.order, self.sharing)
        if state.order not in sharing.jobs:
            return 1.0
        actual = sharing.comm_seconds(state.order)
        return stretch(state.share, self.compact[state.order], actual, self._hidden(state))

    def lone(self, state: JobState) -> float:
        demand = self.own.get(state.order, self.sharing).jobs.get(state.order)
        if demand is None:
            return 1.0
        return stretch(state.share, self.compact[state.order], demand.alone, self._hidden(state))

    def _hidden(self, state: JobState) -> float:
        return self.overlap.get(state.order, 0.0)

    def _take(self, order: int, placement: Placement, gang: GangRequest) -> list[Gpu]:
        """Lanes for every pod (roles too: they hold GPUs), the workers' in rank order."""
        index = self.fabric.host_index
        workers: list[Gpu] = []
        held: list[Gpu] = []
        for pod in sorted(placement.pods, key=lambda p: p.rank):
            h = index[pod.host]
            n = gang.request(pod.role).gpus
            lanes = sorted(self.free[h])[:n]
            self.free[h] = [lane for lane in self.free[h] if lane not in lanes]
            gpus = [Gpu(h, lane) for lane in lanes]
            held += gpus
            workers += gpus if not pod.role else []
        self.held[order] = held
        return workers


def shape_of(gang: GangRequest) -> ParallelShape:
    """The gang's shape, or data parallelism over all its GPUs (reduced hierarchically where
    each host holds several: traffic.ring_edges)."""
    return gang.shape if gang.shape is not None else ParallelShape(dp=gang.gpus)
