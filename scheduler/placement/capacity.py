"""How many pods of a gang each host, and each domain, can take right now."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import overload

import numpy as np

from scheduler.model.gang import GangRequest
from scheduler.model.topology import Tier
from scheduler.placement import slices
from scheduler.placement.snapshot import Array, Snapshot, run_starts
from scheduler.topology.fabric import Fabric

UNLIMITED = 1 << 30


@dataclass(frozen=True)
class Capacity:
    """Pods per eligible host for one gang, and per domain at every level.

    With tensor-parallel groups wider than a pod, a host outside a real NVLink domain only
    counts whole groups; inside an NVLink domain the group may span hosts of that domain."""

    snapshot: Snapshot
    gang: GangRequest
    hosts: Array  # eligible hosts with room for at least one pod, in host order
    pods: Array  # pods each of them can take

    @cached_property
    def slots(self) -> dict[int, int]:
        """host index -> pods it can take."""
        return dict(zip(self.hosts.tolist(), self.pods.tolist(), strict=True))

    @classmethod
    def of(cls, snapshot: Snapshot, gang: GangRequest) -> Capacity:
        fabric = snapshot.fabric
        eligible = snapshot.pool_hosts(gang.pool)
        if not eligible.any() or slices.problem(fabric, gang) is not None:
            empty = np.zeros(0, dtype=np.int64)
            return cls(snapshot, gang, empty, empty)
        pods = snapshot.free_pods
        # a resource the pod does not ask for limits nothing (most traces ask GPUs alone)
        for free, need in (
            (snapshot.free_gpus, gang.gpus_per_pod),
            (snapshot.free_cpu, gang.cpu_milli_per_pod),
            (snapshot.free_mem, gang.memory_mib_per_pod),
        ):
            if need:
                pods = np.minimum(pods, free // need)
        if gang.max_pods_per_host is not None:
            pods = np.minimum(pods, gang.max_pods_per_host)
        for name, units in gang.extended_per_pod.items():
            if units:
                pods = np.minimum(pods, snapshot.ext(name) // units)
        size = slices.sizes(fabric, gang)
        pods = pods - pods % size[Tier.HOST]
        if size[Tier.NVLINK] > 1:  # a host outside NVLink is its own NVLink domain
            lone = ~np.isin(fabric.columns[Tier.NVLINK], list(fabric.real_nvlink))
            pods = np.where(lone, pods - pods % size[Tier.NVLINK], pods)
        keep = eligible & fabric.admits(gang.constraints) & snapshot.up_mask() & (pods > 0)
        index = np.nonzero(keep)[0]
        return cls(snapshot, gang, index, pods[index])

    @property
    def total(self) -> int:
        return int(self.pods.sum())

    @cached_property
    def per_domain(self) -> DomainPods:
        """level -> {domain index: pods it can hold}: in whole groups of every sliced level,
        each domain counting only what its sub-domains hold in whole groups of theirs (a raw
        sum rounded once overstates a domain whose parts each leave a remainder). Each level is
        summed when first read (a one-pod gang's descent reads only the hosts')."""
        return DomainPods(self)


class DomainPods(Sequence[dict[int, int]]):
    """Capacity.per_domain, built bottom-up as far as read: a level is summed from the one
    below it, so reading level l sums every level up to l once."""

    def __init__(self, capacity: Capacity) -> None:
        self.fabric = capacity.snapshot.fabric
        self.size = slices.sizes(self.fabric, capacity.gang)
        self.rack_cap = capacity.gang.max_pods_per_rack
        self.arrays = (capacity.hosts, capacity.pods)  # the highest level summed, as arrays
        self.built = [dict(zip(capacity.hosts.tolist(), capacity.pods.tolist(), strict=True))]

    def __len__(self) -> int:
        return self.fabric.depth

    @overload
    def __getitem__(self, level: int) -> dict[int, int]: ...
    @overload
    def __getitem__(self, level: slice) -> Sequence[dict[int, int]]: ...
    def __getitem__(self, level: int | slice) -> dict[int, int] | Sequence[dict[int, int]]:
        if isinstance(level, slice):
            return [self[i] for i in range(len(self))[level]]
        if level < 0:
            level += len(self)
        if not 0 <= level < len(self):
            raise IndexError(level)
        while len(self.built) <= level:
            self.built.append(self._next(len(self.built)))
        return self.built[level]

    def _next(self, level: int) -> dict[int, int]:
        """Level `level` from the one below (over its rack-capped sums above the racks)."""
        if self.rack_cap is not None and level > Tier.RACK:
            up = self.fabric.ancestor[level - 1][level]
            capped: dict[int, int] = {}
            for d, c in self.built[level - 1].items():
                capped[up[d]] = capped.get(up[d], 0) + c
            return capped
        domains, pods = _sum_up(self.fabric, level - 1, *self.arrays)
        pods -= pods % self.size[level]
        self.arrays = (domains, pods)
        out = dict(zip(domains.tolist(), pods.tolist(), strict=True))
        if self.rack_cap is not None and level == Tier.RACK:
            return {d: min(c, self.rack_cap) for d, c in out.items()}
        return out


def _sum_up(fabric: Fabric, level: int, domains: Array, pods: Array) -> tuple[Array, Array]:
    """The parents of `domains` (ascending) at `level` + 1, ascending, each with the sum of its
    children's pods, as np.unique and a weighted bincount give them, without np.unique's sort
    (a few percent of a whole-trace replay): where parents are numbered in their children's
    order (generated fabrics) ascending domains have their parents in runs; otherwise each
    parent's sum is counted into a table of the level's domains."""
    parents = fabric.parent_columns[level][domains]
    if not len(parents):
        return parents, pods
    if fabric.parents_ascend[level]:
        starts = np.flatnonzero(run_starts(parents))
        return parents[starts], np.add.reduceat(pods, starts)
    n = len(fabric.names[level + 1])
    found = np.flatnonzero(np.bincount(parents, minlength=n))
    return found, np.bincount(parents, weights=pods, minlength=n)[found].astype(np.int64)
