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
from scheduler.queue.preemption import released
from scheduler.queue.types import QueueConfig, Reservation, Running


def _end(r: Running) -> float:
    return math.inf if r.end_s is None else r.end_s


def reserve(
    key: str, view: Snapshot, gang: GangRequest, running: Sequence[Running], cfg: QueueConfig
) -> Reservation | None:
    ordered = sorted(running, key=lambda r: (_end(r), r.started_s, r.key))
    first = _enough(view, gang, ordered)
    if first is None:
        return None
    place = cfg.place.model_copy(update={"compact_wait_s": 0.0, "report_bound": False})
    for n in range(first, len(ordered) + 1):
        placement = place_one(released(view, ordered[:n]), gang, place)
        if placement.placed:
            index = view.fabric.host_index
            hosts = frozenset(index[h] for h in placement.hosts())
            at = max((_end(r) for r in ordered[:n]), default=-math.inf)
            return Reservation(key, gang.name, hosts, at)
    return None


def _enough(view: Snapshot, gang: GangRequest, ordered: Sequence[Running]) -> int | None:
    """The fewest leading gangs whose end leaves room in count (capacity only grows with each
    release, so a binary search finds it)."""

    def room(n: int) -> bool:
        return Capacity.of(released(view, ordered[:n]), gang).total >= gang.pods

    if not room(len(ordered)):
        return None
    low, high = 0, len(ordered)
    while low < high:
        mid = (low + high) // 2
        if room(mid):
            high = mid
        else:
            low = mid + 1
    return low
