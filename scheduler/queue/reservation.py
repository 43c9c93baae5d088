"""EASY backfilling's reservation: where and from when a blocked gang will start.

Contract. Takes the capacity a blocked gang sees, the gang and the running gangs of its pool.
Decides the hosts the gang would be placed on once enough running gangs have ended, releasing
them in the order they are expected to end (unknown ends last, oldest start first), and the
time that happens (the latest estimated end among them; inf when any is unknown). Promises: the
hosts carry a valid placement of the gang on the capacity with those gangs released; None when
even releasing every running gang would not make room (the gang is too big for the pool: it
holds nothing back)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from scheduler.model.gang import GangRequest
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
    missing = gang.all_gpus - _free_gpus(view, gang.pool)
    for n, r in enumerate(ordered, start=1):
        # release one gang at a time; count first (cheap), then capacity, then a placement
        sim.apply_many([(r.gang, r.placement)], sign=-1)
        missing -= r.gang.all_gpus
        if missing > 0 or Capacity.of(sim, gang).total < gang.pods:
            continue
        placement = place_one(sim, gang, cfg.trial)
        if placement.placed:
            index = view.fabric.host_index
            hosts = frozenset(index[h] for h in placement.hosts())
            at = max(_end(g) for g in ordered[:n])
            return Reservation(key, gang.name, hosts, at)
    return None


def _free_gpus(view: Snapshot, pool: str) -> int:
    mask = view.fabric.pool_mask.get(pool)
    return 0 if mask is None else int(view.free_gpus[mask & view.up_mask()].sum())
