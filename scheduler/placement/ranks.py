"""Rank order: contiguous along the tree, so ring neighbours share the lowest switch and a
tensor-parallel group (consecutive ranks) stays inside one host or NVLink domain."""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.model.placement import PodAssignment
from scheduler.topology.fabric import Fabric


def assign_ranks(fabric: Fabric, counts: Mapping[int, int]) -> tuple[PodAssignment, ...]:
    """host index -> pods, to pods with ranks 0..n-1 in depth-first host order."""
    position = fabric.dfs_position if len(counts) > 1 else {}
    ordered = sorted((h for h, n in counts.items() if n > 0), key=lambda h: position.get(h, 0))
    pods: list[PodAssignment] = []
    for h in ordered:
        name, base = fabric.hosts[h].name, len(pods)
        # ranks and host names made here are valid by construction: skip re-validating each
        pods.extend(
            PodAssignment.model_construct(rank=base + i, host=name) for i in range(counts[h])
        )
    return tuple(pods)
