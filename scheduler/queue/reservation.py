"""EASY backfilling's reservation: where and from when a blocked gang will start.

Contract. Takes the capacity a blocked gang sees, the gang and the running gangs of its pool.
Decides the hosts the gang would be placed on once enough running gangs have ended, releasing
them in the order they are expected to end (unknown ends last, oldest start first), and the time
that happens (the latest estimated end among them; inf when any is unknown). Among the
placements at that time it prefers the hosts those gangs release to hosts that are free now: it
holds the released hosts alone when they carry a placement that costs the gang no more traffic
(`cost`) than its best placement on all the free hosts, and that best one otherwise. Why: only a
held host that is free now keeps a later gang out (backfill sees the free capacity less the held
hosts), and a reservation on free racks pushed backfilled gangs across spines. Promises: the
hosts carry a valid placement of the gang on the capacity with those gangs released; None when
even releasing every running gang would not make room (the gang is too big for the pool: it
holds nothing back)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from scheduler.model.gang import GangRequest
from scheduler.model.placement import Placement
from scheduler.placement import Snapshot, place_one
from scheduler.placement.capacity import Capacity
from scheduler.queue.types import QueueConfig, Reservation, Running


def _end(r: Running) -> float:
    return math.inf if r.end_s is None else r.end_s


def reserve(
    key: str, view: Snapshot, gang: GangRequest, running: Sequence[Running], cfg: QueueConfig
) -> Reservation | None:
    ordered = sorted(running, key=lambda r: (_end(r), r.started_s, r.key))
    sim = view.copy()
    # the releases before `first` cannot make room (by GPU counts alone): released at once
    first = _first_possible(view, gang, ordered)
    sim.apply_many([(r.gang, r.placement) for r in ordered[: first - 1]], sign=-1)
    for n, r in enumerate(ordered[first - 1 :], start=first):
        # then one gang at a time: capacity first, then a placement
        sim.apply_many([(r.gang, r.placement)], sign=-1)
        if Capacity.of(sim, gang).total < gang.pods:
            continue
        placement = place_one(sim, gang, cfg.trial)
        if placement.placed:
            index = view.fabric.host_index
            hosts = _on_released(sim, gang, ordered[:n], placement, cfg)
            at = max(_end(g) for g in ordered[:n])
            return Reservation(key, gang.name, frozenset(index[h] for h in hosts), at)
    return None


def _on_released(
    sim: Snapshot,
    gang: GangRequest,
    released: Sequence[Running],
    best: Placement,
    cfg: QueueConfig,
) -> Iterable[str]:
    """The hosts to hold: `best`'s, or a placement on the released hosts alone when `best`
    holds hosts free now and that one costs no more."""
    theirs = {h for r in released for h in r.placement.hosts()}
    if set(best.hosts()) <= theirs:
        return best.hosts()
    index = sim.fabric.host_index
    only = sim.copy()
    only.down |= {i for h, i in index.items() if h not in theirs}
    placement = place_one(only, gang, cfg.trial)
    if placement.placed and placement.cost <= best.cost:
        return placement.hosts()
    return best.hosts()


def _first_possible(view: Snapshot, gang: GangRequest, ordered: Sequence[Running]) -> int:
    """The fewest releases, in order, after which the pool's free GPUs cover the gang and its
    up hosts have whole-pod GPU room for its pods; Capacity.of (which also weighs CPU, memory,
    pod slots, taints and the gang's constraints) can hold only from there. Both conditions
    only grow with each release: the GPU count is walked to its first n, then the room is
    searched by doubling steps and halving, reading only the releases it needs (the usual
    answer is a few). len(ordered) + 1 when never."""
    fabric = view.fabric
    mask = fabric.pool_mask.get(gang.pool)
    counted = np.zeros(len(fabric.hosts), dtype=bool) if mask is None else mask & view.up_mask()
    missing = gang.all_gpus - int(view.free_gpus[counted].sum())
    n = 0
    while n < len(ordered) and missing > 0:
        missing -= ordered[n].gang.all_gpus
        n += 1
    if missing > 0:
        return len(ordered) + 1
    if not gang.gpus_per_pod:
        return max(n, 1)
    pods = _Released(view, ordered)

    def room(k: int) -> bool:  # after k >= 1 releases
        at, gpus = pods.first(k)
        free = view.free_gpus + np.bincount(at, gpus, len(fabric.hosts))
        return int((free[counted] // gang.gpus_per_pod).sum()) >= gang.pods

    low, step = max(n, 1), 1  # room(low - 1) is false, or low is the first release
    if low > len(ordered):  # nothing running to release (what holds it back is not GPUs)
        return len(ordered) + 1
    if room(low):
        return low
    while True:  # room(low) is false: double until it holds or the releases run out
        high = min(low + step, len(ordered))
        if high == low:
            return len(ordered) + 1
        if room(high):
            break
        low, step = high, 2 * step
    while high - low > 1:  # room(low) false, room(high) true
        mid = (low + high) // 2
        low, high = (low, mid) if room(mid) else (mid, high)
    return high


class _Released:
    """The released pods' hosts and GPUs in release order, read from the running gangs only as
    far as asked."""

    def __init__(self, view: Snapshot, ordered: Sequence[Running]) -> None:
        self.index = view.fabric.host_index
        self.ordered = ordered
        self.hosts: list[int] = []
        self.gpus: list[int] = []
        self.ends = [0]  # pods held by the first n gangs

    def first(self, n: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        while len(self.ends) <= n:
            r = self.ordered[len(self.ends) - 1]
            roles = [""] if not r.gang.roles else r.placement.roles()
            gpus = {role: r.gang.request(role).gpus for role in roles}
            for pod in r.placement.pods:
                self.hosts.append(self.index[pod.host])
                self.gpus.append(gpus[pod.role])
            self.ends.append(len(self.hosts))
        end = self.ends[n]
        return np.asarray(self.hosts[:end], dtype=np.int64), np.asarray(self.gpus[:end])
