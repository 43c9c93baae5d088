"""Topology-blind baselines: first-fit, random-fit and kube-scheduler's least-allocated spread.
Each ranks the pods in the order it bound them (placement/ranks.py), as kube-scheduler binds
a job's pods one by one in index order, unless the gang's structure fixes the ranks (tensor-
parallel groups, slices: consecutive ranks inside one domain, placed as the gang asks)."""

from __future__ import annotations

import heapq
import random

from scheduler.placement.baselines.required import within_required
from scheduler.placement.baselines.take import take
from scheduler.placement.capacity import Capacity
from scheduler.placement.ranks import BindOrder


@within_required
def first_fit(capacity: Capacity, _seed: int) -> dict[int, int] | None:
    """Hosts in fabric order, each filled before the next."""
    return _as_bound(capacity, take(capacity, sorted(capacity.slots)))


@within_required
def random_fit(capacity: Capacity, _seed: int) -> dict[int, int] | None:
    return _as_bound(capacity, take(capacity, _shuffled(capacity, _seed)))


def _structured(capacity: Capacity) -> bool:
    """The gang's own structure fixes which ranks go together (ranks: depth-first)."""
    gang = capacity.gang
    return gang.tp_pods > 1 or bool(gang.slices)


def _as_bound(capacity: Capacity, counts: dict[int, int] | None) -> dict[int, int] | None:
    """The hosts in the order they were taken, each filled before the next."""
    if counts is None or _structured(capacity):
        return counts
    return BindOrder.filled(counts)


def _shuffled(capacity: Capacity, seed: int, stream: str = "") -> list[int]:
    """Hosts in a seeded random order; each policy draws from its own stream."""
    hosts = sorted(capacity.slots)
    random.Random(f"{stream}{seed}/{capacity.gang.name}").shuffle(hosts)
    return hosts


@within_required
def least_allocated(capacity: Capacity, _seed: int) -> dict[int, int] | None:
    """kube-scheduler's NodeResourcesLeastAllocated: each pod goes to the host with the largest
    free share of its GPUs, one pod at a time, which spreads a gang as widely as it can. Equal
    scores are broken at random (seeded), as kube-scheduler picks among its top-scored nodes;
    breaking them by host order would make it first-fit whenever pods take whole hosts."""
    snapshot = capacity.snapshot
    gang = capacity.gang
    tie = {h: i for i, h in enumerate(_shuffled(capacity, _seed, "least-allocated"))}
    if _structured(capacity) or gang.max_pods_per_rack is not None:
        fullest = sorted(capacity.slots, key=lambda h: (-capacity.slots[h], tie[h]))
        return _as_bound(capacity, take(capacity, fullest))
    left = dict(capacity.slots)
    gpus = {h: snapshot.fabric.hosts[h].gpus or 1 for h in left}
    heap = [(-snapshot.free_gpus[h] / gpus[h], tie[h], h) for h in left]
    heapq.heapify(heap)
    counts: dict[int, int] = {}
    bound: list[int] = []  # pod i's host: the ranks interleave across the hosts it spreads over
    for _ in range(gang.pods):
        if not heap:
            return None
        _, order, h = heapq.heappop(heap)
        counts[h] = counts.get(h, 0) + 1
        bound.append(h)
        left[h] -= 1
        if left[h]:
            free = snapshot.free_gpus[h] - counts[h] * gang.gpus_per_pod
            heapq.heappush(heap, (-free / gpus[h], order, h))
    return BindOrder(bound)
