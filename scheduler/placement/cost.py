"""Traffic cost of a placement, computed from its ranks alone (independent of any solver).

Model (design.md section 6), per training step:
- data parallel: a ring all-reduce inside each pipeline stage over consecutive ranks; each ring
  edge carries 2 (k-1)/k of a pod's gradient;
- pipeline parallel: pod i of stage s sends its activations to pod i of stage s+1;
- tensor parallel stays inside a host or NVLink domain (a placement constraint), so it adds no
  fabric traffic;
- a role with `gradients` (a pod set of another shape in the same data-parallel group) joins
  the ring after the workers, in rank order; each edge then carries 2 (k-1)/k of the sending
  pod's gradient. Other roles exchange nothing the fabric carries.
An edge crosses level L when its two hosts sit in different level-L domains. The cost sums, over
levels, GB crossing that level times the level's cost weight (upper tiers are shared and
oversubscribed, so they weigh more; see model.topology.DEFAULT_COST_WEIGHT).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.model.gang import GangRequest, Role
from scheduler.model.placement import PodAssignment
from scheduler.topology.fabric import Fabric

ACTIVATION_SHARE = 0.1  # activation GB per pipeline edge, as a share of the pod's gradient GB


@dataclass(frozen=True)
class Traffic:
    gb: tuple[float, ...]  # per level
    cost: float


def _edges(n: int, stages: int) -> list[tuple[int, int, float]]:
    """(rank a, rank b, share of a pod's gradient GB) for every communicating pair."""
    per_stage = n // stages
    edges: list[tuple[int, int, float]] = []
    if per_stage > 1:
        volume = 2.0 * (per_stage - 1) / per_stage
        for s in range(stages):
            base = s * per_stage
            for i in range(per_stage):
                edges.append((base + i, base + (i + 1) % per_stage, volume))
    for s in range(stages - 1):
        for i in range(per_stage):
            edges.append((s * per_stage + i, (s + 1) * per_stage + i, ACTIVATION_SHARE))
    return edges


def traffic(fabric: Fabric, gang: GangRequest, pods: Sequence[PodAssignment]) -> Traffic:
    if len({p.host for p in pods}) < 2:  # nothing leaves the host (most gangs: one pod)
        return Traffic((0.0,) * fabric.depth, 0.0)
    by_rank = sorted(pods, key=lambda p: p.rank)
    index = fabric.host_index
    ring = {r.name: r for r in gang.roles if r.gradients}
    workers = [index[p.host] for p in by_rank if not p.role]
    members = [p for p in by_rank if not p.role or p.role in ring]
    gb = [0.0] * fabric.depth
    for a, b, volume in _flows(gang, workers, [(index[p.host], p.role) for p in members], ring):
        top = fabric.lowest_common_level(a, b)
        for level in range(top):
            gb[level] += volume
    cost = sum(g * w for g, w in zip(gb, fabric.gb_cost, strict=True))
    return Traffic(tuple(gb), cost)


def _flows(
    gang: GangRequest,
    workers: list[int],
    members: list[tuple[int, str]],
    ring: dict[str, Role],
) -> list[tuple[int, int, float]]:
    """(host a, host b, GB) per communicating pair: the workers' own pattern, or one ring over
    the workers and the roles that share their gradients."""
    if len(members) == len(workers):
        stages = gang.shape.pp if gang.shape and len(workers) % gang.shape.pp == 0 else 1
        pod_gb = gang.gradient_gb * max(gang.gpus_per_pod, 1) / stages
        return [(workers[a], workers[b], s * pod_gb) for a, b, s in _edges(len(workers), stages)]
    share = 2.0 * (len(members) - 1) / len(members)
    gpus = {"": gang.gpus_per_pod} | {name: r.gpus_per_pod for name, r in ring.items()}
    return [
        (host, members[(i + 1) % len(members)][0], share * gang.gradient_gb * max(gpus[role], 1))
        for i, (host, role) in enumerate(members)
    ]


def domains_spanned(fabric: Fabric, hosts: Sequence[int]) -> dict[str, int]:
    return {lv: len({fabric.domain[i][h] for h in hosts}) for i, lv in enumerate(fabric.levels)}
