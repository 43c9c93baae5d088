"""Topology-aware preemption: which lower-priority gangs to evict so that a gang can start.

Contract. Takes the capacity a gang sees, the gang, the running gangs it may preempt (the queue
has already kept only strictly lower priorities of the same pool, and of the same tenant unless
allowed) and the time. Decides a set of victims and the placement the gang gets once they are
gone, or None when no set among those examined makes room. Promises: every victim is one of the
candidates; the placement is valid on the capacity with exactly the victims released; the
victims free a domain at the lowest level where any examined domain can hold the gang, and among
those domains they minimise first the highest victim priority, then the GPU-seconds lost since
the victims' last checkpoints; no victim can be spared (each was tried without). Per level the
`preemption_domains` domains whose estimated cost is least are examined, not all: the choice is
the best of those. The estimate (`estimates`) counts GPUs, not pods per host: it evicts each
domain's candidates cheapest first (priority, then work lost per GPU) until the domain's free
GPUs cover the gang's, and scores what that loses as the examination does.

The baseline (`lowest_first`) evicts the lowest priority first, the most recently started first
within a priority, until the gang fits anywhere, as a topology-blind scheduler would."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from scheduler.model.gang import GangRequest
from scheduler.model.placement import Placement
from scheduler.placement import Snapshot, place_one
from scheduler.placement.capacity import Capacity
from scheduler.queue.types import QueueConfig, Running


@dataclass(frozen=True)
class Victims:
    running: tuple[Running, ...]
    placement: Placement
    score: tuple[int, float, int]  # highest victim priority, GPU-seconds lost, victims


def released(view: Snapshot, victims: Sequence[Running]) -> Snapshot:
    out = view.copy()
    out.apply_many([(r.gang, r.placement) for r in victims], sign=-1)
    return out


def topology(
    view: Snapshot, gang: GangRequest, candidates: Sequence[Running], now: float, cfg: QueueConfig
) -> Victims | None:
    everything = Capacity.of(released(view, candidates), gang)
    if everything.total < gang.pods:
        return None
    fabric = view.fabric
    free = Capacity.of(view, gang).per_domain
    for level in range(len(fabric.levels)):
        domains = [d for d, c in everything.per_domain[level].items() if c >= gang.pods]
        estimate = estimates(view, gang, candidates, level, now)
        domains.sort(key=lambda d: (estimate.get(d, _NEVER), -free[level].get(d, 0)))
        found = [
            _in_domain(view, gang, candidates, level, d, now, cfg)
            for d in domains[: cfg.policy.preemption_domains]
        ]
        best = min((v for v in found if v is not None), key=lambda v: v.score, default=None)
        if best is not None:
            return best
    return None


_NEVER = (sys.maxsize, math.inf)  # the estimate finds no way to make room


def estimates(
    view: Snapshot, gang: GangRequest, candidates: Sequence[Running], level: int, now: float
) -> dict[int, tuple[int, float]]:
    """Per domain of `level`: (highest victim priority, GPU-seconds lost) of evicting its
    candidates cheapest first until its free GPUs cover the gang's; (-1, 0) where they do
    already, nothing where evicting every candidate is not enough."""
    fabric = view.fabric
    column, index = fabric.columns[level], fabric.host_index
    free = np.bincount(column, weights=view.free_gpus * view.up_mask(), minlength=column.max() + 1)
    need = gang.pods * max(1, gang.gpus_per_pod)
    inside: dict[int, list[tuple[int, float, int]]] = {}
    for r in sorted(candidates, key=lambda r: (r.gang.priority, _per_gpu(r, now))):
        per: dict[int, int] = {}
        for host, pods in r.placement.hosts().items():
            d = int(column[index[host]])
            per[d] = per.get(d, 0) + pods * max(1, r.gang.gpus_per_pod)
        for d, gpus in per.items():
            inside.setdefault(d, []).append((r.gang.priority, r.lost_gpu_s(now), gpus))
    out: dict[int, tuple[int, float]] = {}
    for d, victims in inside.items():
        short, top, lost = need - free[d], -1, 0.0
        for priority, loses, gpus in victims:
            if short <= 0:
                break
            short, top, lost = short - gpus, priority, lost + loses
        if short <= 0:
            out[d] = (top, lost)
    for d in np.flatnonzero(free >= need).tolist():
        out.setdefault(d, (-1, 0.0))
    return out


def _per_gpu(r: Running, now: float) -> float:
    return r.lost_gpu_s(now) / max(1, r.gang.gpus)


def _in_domain(
    view: Snapshot,
    gang: GangRequest,
    candidates: Sequence[Running],
    level: int,
    domain: int,
    now: float,
    cfg: QueueConfig,
) -> Victims | None:
    fabric = view.fabric
    column = fabric.columns[level]
    inside = [r for r in candidates if _pods_in(r, column, domain, fabric.host_index) > 0]
    inside.sort(key=lambda r: (r.gang.priority, _per_gpu(r, now)))

    def fits(victims: Sequence[Running]) -> bool:
        cap = Capacity.of(released(view, victims), gang)
        return cap.per_domain[level].get(domain, 0) >= gang.pods

    chosen = _grow(inside, fits)
    if chosen is None:
        return None
    return _verified(view, gang, _spare(chosen, fits), now, cfg)


def _pods_in(r: Running, column: np.ndarray, domain: int, index: dict[str, int]) -> int:
    return sum(n for host, n in r.placement.hosts().items() if column[index[host]] == domain)


def _grow(
    ordered: Sequence[Running], fits: Callable[[Sequence[Running]], bool]
) -> list[Running] | None:
    """The shortest prefix of `ordered` that makes room, or None."""
    chosen: list[Running] = []
    for r in ordered:
        chosen.append(r)
        if fits(chosen):
            return chosen
    return None


def _spare(chosen: list[Running], fits: Callable[[Sequence[Running]], bool]) -> list[Running]:
    """Give back every victim the gang does not need, the most costly first."""
    kept = list(chosen)
    for r in reversed(chosen):
        rest = [v for v in kept if v is not r]
        if fits(rest):
            kept = rest
    return kept


def _verified(
    view: Snapshot, gang: GangRequest, victims: Sequence[Running], now: float, cfg: QueueConfig
) -> Victims | None:
    """The placement the gang really gets with these victims gone (the capacity count above
    ignores TP groups and per-rack caps)."""
    placement = place_one(released(view, victims), gang, cfg.trial)
    if not placement.placed:
        return None
    score = (
        max((r.gang.priority for r in victims), default=gang.priority - 1),
        sum(r.lost_gpu_s(now) for r in victims),
        len(victims),
    )
    return Victims(tuple(victims), placement, score)


def lowest_first(
    view: Snapshot, gang: GangRequest, candidates: Sequence[Running], now: float, cfg: QueueConfig
) -> Victims | None:
    ordered = sorted(candidates, key=lambda r: (r.gang.priority, -r.started_s))
    chosen: list[Running] = []
    for r in ordered:
        chosen.append(r)
        if Capacity.of(released(view, chosen), gang).total >= gang.pods:
            found = _verified(view, gang, chosen, now, cfg)
            if found is not None:
                return found
    return None
