"""Stage-aligned ranks: which pod gets which rank, for a pipelined gang that spans domains.

Contract. Takes a fabric, a gang that states its shape (pp > 1) and its model, and its workers'
pods ranked depth-first (ranks.assign_ranks): replicas are contiguous there, in the order of
topology/traffic.py (TP, EP, PP, DP from the fastest), so wherever a domain boundary falls the
data-parallel rings (the gradient reduction, a step's largest message) cross it. Decides
between that numbering and the stage-major one: the same pods in the same depth-first order,
the TP x EP blocks taken in turn for every data-parallel rank of stage 0, then of stage 1, and
so on, so that a boundary falls between stages and mostly the pipeline's activations (split
over the TP group) cross it. The choice is by what each costs (topology/loads.py, on the
fabric as its spec states it): the gang's own step, its communication alone as the simulator
charges it, plus the seconds its GB keep the oversubscribed uplinks busy, the only links it
shares with other gangs that can slow them (a NIC serves one GPU; an uplink at 1:1 carries all
its hosts' NICs can send). Both are seconds per step: what the gang waits, and what it takes
from the gangs that share those links (and from itself, where flows are hashed onto them, which
the spec does not say). The lower sum is kept. Promises: the same pods on the
hosts, only ranks change; each TP x EP block keeps its pods consecutive and in order, so a
slice whose size divides a block is kept; the depth-first numbering wherever the gang has
roles, states no model, its pods do not tile whole blocks, a slice does not divide a block,
or stage-major costs no less.
"""

from __future__ import annotations

from scheduler.model.gang import GangRequest
from scheduler.model.placement import PodAssignment
from scheduler.placement import stretch
from scheduler.topology.fabric import Fabric
from scheduler.topology.links import Port, Wires
from scheduler.topology.loads import job_load
from scheduler.topology.traffic import step_bytes


def ranked(
    fabric: Fabric, gang: GangRequest, pods: tuple[PodAssignment, ...]
) -> tuple[PodAssignment, ...]:
    """The workers' pods, ranked stage-major where that costs less (the contract);
    `pods` ranked depth-first."""
    unit = block_pods(gang)
    if unit is None or len({p.host for p in pods}) < 2:  # on one host nothing crosses a link
        return pods
    order = sorted(pods, key=lambda p: p.rank)
    staged = stage_major(order, gang, unit)
    wires = Wires(fabric, stretch.links_of(fabric))
    if sum(cost(wires, gang, staged)) < sum(cost(wires, gang, order)) * (1 - 1e-9):
        return tuple(sorted(staged, key=lambda p: p.rank))
    return pods


def block_pods(gang: GangRequest) -> int | None:
    """Pods per TP x EP block when the rule applies to the gang (the contract), else None."""
    shape = gang.shape
    if shape is None or shape.pp == 1 or gang.model is None or gang.roles:
        return None
    block = shape.tp * shape.ep
    if not gang.gpus_per_pod or block % gang.gpus_per_pod:
        return None
    unit = block // gang.gpus_per_pod
    if any(unit % s.size for s in (*gang.slices, *gang.preferred_slices)):
        return None
    return unit


def stage_major(order: list[PodAssignment], gang: GangRequest, unit: int) -> list[PodAssignment]:
    """The pods in depth-first order, renumbered: the i-th block of `unit` pods in that order
    is data-parallel rank i mod D of stage i div D (D the blocks per stage)."""
    assert gang.shape is not None
    pp = gang.shape.pp
    per_stage = len(order) // unit // pp
    out: list[PodAssignment] = []
    for i, pod in enumerate(order):
        b, within = divmod(i, unit)
        stage, d = divmod(b, per_stage)
        rank = (d * pp + stage) * unit + within
        out.append(PodAssignment.model_construct(rank=rank, host=pod.host))
    return out


def cost(wires: Wires, gang: GangRequest, pods: list[PodAssignment]) -> tuple[float, float]:
    """The gang's step communication alone in seconds, and the seconds per step its GB keep
    the oversubscribed uplinks busy (summed over them), on `wires` (stretch.links_of)."""
    assert gang.shape is not None
    assert gang.model is not None
    gpus = stretch.lanes(wires.fabric, gang, pods)
    load = job_load(wires, 0, gang.shape, step_bytes(gang.model, gang.shape), gpus)
    levels = wires.fabric.spec.levels
    shared = sum(
        gb / wires.capacity(r)
        for r, gb in load.total.items()
        if r.port is Port.UPLINK and levels[r.level].oversubscription > 1
    )
    return load.seconds(wires), shared
