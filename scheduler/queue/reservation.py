"""EASY backfilling's reservation: where and from when a blocked gang will start.

Contract. Takes the capacity a blocked gang sees, the gang and the running gangs of its pool in
release order (queue/running.py, read from the front only as far as needed).
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
from scheduler.queue.running import ReleaseOrder
from scheduler.queue.types import QueueConfig, Reservation, Running

Bools = npt.NDArray[np.bool_]


def _end(r: Running) -> float:
    return math.inf if r.end_s is None else r.end_s


def reserve(
    key: str, view: Snapshot, gang: GangRequest, ordered: ReleaseOrder, cfg: QueueConfig
) -> Reservation | None:
    sim = view.copy()
    fabric = view.fabric
    # the releases before `first` cannot make room (by GPU counts alone): released at once
    first = _first_possible(view, gang, ordered)
    sim.apply_usages([ordered.usage(i, fabric) for i in range(first - 1)], sign=-1)
    for n in range(first, len(ordered) + 1):
        # then one gang at a time: capacity first, then a placement
        r = ordered[n - 1]
        sim.apply_usages([ordered.usage(n - 1, fabric)], sign=-1)
        if Capacity.of(sim, gang).total < gang.pods:
            continue
        placement = place_one(sim, gang, cfg.trial)
        if placement.placed:
            index = fabric.host_index
            hosts = _on_released(sim, gang, ordered[:n], placement, cfg)
            at = _end(r)  # the latest of the ends released: they come in order
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


def _first_possible(view: Snapshot, gang: GangRequest, ordered: ReleaseOrder) -> int:
    """The fewest releases, in order, after which the pool's free GPUs cover the gang and its
    up hosts have whole-pod GPU room for its pods; Capacity.of (which also weighs CPU, memory,
    pod slots, taints and the gang's constraints) can hold only from there. Both conditions
    only grow with each release, so one walk finds it: GPU counts to their first n, then the
    released pods one by one, each changing the room of its host only. len(ordered) + 1 when
    never."""
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
    if max(n, 1) > len(ordered):  # nothing running to release (what holds it back is not GPUs)
        return len(ordered) + 1
    return _room_from(view, gang, ordered, counted, max(n, 1))


def _room_from(
    view: Snapshot, gang: GangRequest, ordered: ReleaseOrder, counted: Bools, low: int
) -> int:
    """The first k >= low after whose releases the counted hosts have room for the gang's
    pods by GPUs alone; len(ordered) + 1 when never."""
    per_pod = gang.gpus_per_pod
    free = view.free_gpus.tolist()
    mine = counted.tolist()
    room = int((view.free_gpus[counted] // per_pod).sum())
    for k in range(1, len(ordered) + 1):
        u = ordered.usage(k - 1, view.fabric)
        for h, gpus in zip(u.hosts, u.gpus, strict=True):
            before = free[h]
            free[h] = before + gpus
            if mine[h]:
                room += free[h] // per_pod - before // per_pod
        if k >= low and room >= gang.pods:
            return k
    return len(ordered) + 1
