"""Stretch: how much longer a gang's step takes on a placement than on a compact one, alone on
the fabric, by the physics the simulator charges.

Contract. Takes a fabric, a gang that states the model it trains (`GangRequest.model`; its
parallel shape, or data parallelism over its GPUs) and a placement of its workers. Decides the
lone stretch: the step on that placement over the compact step (topology/loads.py's
communication time, sharing.stretch's step), on the fabric as the scheduler knows it: its
levels' rates and oversubscription, a NIC per GPU, flows routed without hashing (a switch's
hash is not the scheduler's to know). Promises: 1.0 for a placement as fast as the compact one,
never less; None where the gang states no model or its workers take no GPU (nothing priced).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from scheduler.model.gang import GangRequest, ParallelShape
from scheduler.model.placement import Placement, PodAssignment
from scheduler.model.topology import Tier
from scheduler.topology.fabric import Fabric
from scheduler.topology.links import Links, Wires
from scheduler.topology.loads import compact_seconds, job_load
from scheduler.topology.sharing import stretch
from scheduler.topology.traffic import Gpu, comm_share, step_bytes


def lone(fabric: Fabric, gang: GangRequest, placement: Placement) -> float | None:
    """The gang's step time on `placement` over its compact step's, alone on the fabric."""
    model = gang.model
    if model is None or not gang.gpus_per_pod:
        return None
    shape = gang.shape or ParallelShape(dp=gang.gpus)
    links = links_of(fabric)
    step = step_bytes(model, shape)
    per_host = max(h.gpus for h in fabric.hosts)
    domain = max(fabric.largest_nvlink.get(gang.pool, 0), per_host)  # the compact step's
    compact = compact_seconds(links, shape, step, per_host, domain)
    wires = Wires(fabric, links)
    actual = job_load(wires, 0, shape, step, lanes(fabric, gang, placement.pods)).seconds(wires)
    return stretch(comm_share(model, shape, compact), compact, actual, model.overlap)


def links_of(fabric: Fabric) -> Links:
    """The links as the fabric's spec states them: NVLink and NIC rates, oversubscription."""
    levels = fabric.spec.levels
    nic = levels[Tier.NVLINK].bandwidth_gbps
    return Links(
        nvlink_gbps=levels[Tier.HOST].bandwidth_gbps,
        nic_gbps=nic,
        oversubscription={
            lv: spec.oversubscription for lv, spec in enumerate(levels) if lv > Tier.NVLINK
        },
        path_gbps=nic,
    )


def lanes(fabric: Fabric, gang: GangRequest, pods: Iterable[PodAssignment]) -> Sequence[Gpu]:
    """The workers' GPUs in rank order, each pod's consecutive on its host."""
    taken: dict[int, int] = {}
    out: list[Gpu] = []
    for pod in sorted(pods, key=lambda p: p.rank):
        if pod.role:
            continue
        h = fabric.host_index[pod.host]
        first = taken.get(h, 0)
        taken[h] = first + gang.gpus_per_pod
        out += [Gpu(h, lane) for lane in range(first, first + gang.gpus_per_pod)]
    return out
