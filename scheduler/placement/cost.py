"""Traffic cost of a placement, computed from its ranks alone (independent of any solver).

Model (design.md section 6), per training step:
- data parallel: a ring all-reduce inside each pipeline stage over consecutive ranks; each ring
  edge carries 2 (k-1)/k of a pod's gradient;
- pipeline parallel: pod i of stage s sends its activations to pod i of stage s+1;
- tensor parallel stays inside a host or NVLink domain (a placement constraint), so it adds no
  fabric traffic.
An edge crosses level L when its two hosts sit in different level-L domains. The cost sums, over
levels, GB crossing that level times the level's cost weight (upper tiers are shared and
oversubscribed, so they weigh more; see model.topology.DEFAULT_COST_WEIGHT).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.model.gang import GangRequest
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
    by_rank = sorted(pods, key=lambda p: p.rank)
    index = fabric.host_index
    hosts = [index[p.host] for p in by_rank]
    stages = gang.shape.pp if gang.shape and len(hosts) % gang.shape.pp == 0 else 1
    pod_gb = gang.gradient_gb * max(gang.gpus_per_pod, 1) / stages
    gb = [0.0] * fabric.depth
    for a, b, share in _edges(len(hosts), stages):
        top = fabric.lowest_common_level(hosts[a], hosts[b])
        for level in range(top):
            gb[level] += share * pod_gb
    cost = sum(g * w for g, w in zip(gb, fabric.gb_cost, strict=True))
    return Traffic(tuple(gb), cost)


def domains_spanned(fabric: Fabric, hosts: Sequence[int]) -> dict[str, int]:
    return {lv: len({fabric.domain[i][h] for h in hosts}) for i, lv in enumerate(fabric.levels)}
