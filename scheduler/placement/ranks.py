"""Rank order. rackwise's, Kueue's and Slurm's: contiguous along the tree, so ring neighbours
share the lowest switch and a tensor-parallel group (consecutive ranks) stays inside one host or
NVLink domain. A topology-blind scheduler's (kube-scheduler's first-fit, random-fit,
least-allocated): the order in which it bound the pods, pod i of the job to the i-th host it
chose, so a spread gang's ring may cross the fabric at every step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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


class BindOrder(dict[int, int]):
    """host index -> pods, remembering the host of each pod in the order they were bound."""

    def __init__(self, sequence: Sequence[int]) -> None:
        super().__init__()
        for h in sequence:
            self[h] = self.get(h, 0) + 1
        self.sequence = tuple(sequence)

    @classmethod
    def filled(cls, counts: Mapping[int, int]) -> BindOrder:
        """Each host filled before the next, in the counts' order."""
        return cls([h for h, n in counts.items() for _ in range(n)])


def ranks_of(fabric: Fabric, counts: Mapping[int, int]) -> tuple[PodAssignment, ...]:
    """The pods ranked as the policy that chose `counts` would rank them: in bind order when
    it remembers one, else depth-first."""
    if not isinstance(counts, BindOrder):
        return assign_ranks(fabric, counts)
    hosts = fabric.hosts
    return tuple(
        PodAssignment.model_construct(rank=i, host=hosts[h].name)
        for i, h in enumerate(counts.sequence)
    )
