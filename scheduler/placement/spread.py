"""Placement under topology spread constraints: the gang's pods spread as evenly as the
constraint asks over the domains of a node label (Kubernetes' topologySpreadConstraints,
`DoNotSchedule`).

Contract. Takes the gang's capacity and its first spread constraint (model/constraints.Spread:
the label, the allowed skew, the matching pods each domain holds already). Decides how many
pods each domain gets by water-filling: one pod at a time to the domain with the fewest after
it, among those with room left (ties: the domain with more room, then its name), which is the
most even final spread the room allows; inside a domain, the hosts with the most room first
(fewest hosts), of those labelled with every spread's key (a node without a DoNotSchedule
spread's key is no candidate). The domains are those of the hosts whose labels admit the gang
(taints aside, as kube-scheduler's default nodeTaintsPolicy: Ignore), counted even where no
room is left.
Promises: a placement it returns keeps every spread constraint of the gang (each is checked on
the result), or it returns the reason naming the one that cannot be kept. It promises no
optimum: spreading is what was asked, and J is reported for what it is, with no bound."""

from __future__ import annotations

import heapq

import numpy as np

from scheduler.model.constraints import Spread
from scheduler.placement.capacity import Capacity


def problem(capacity: Capacity) -> str | None:
    """What the spread placer does not do together with spreading (said, not ignored)."""
    gang = capacity.gang
    if gang.spread and (gang.tp_pods > 1 or gang.slices or gang.required_level):
        return (
            "topologySpreadConstraints together with tensor-parallel groups, slices or a "
            "required level are not supported"
        )
    return None


def place(capacity: Capacity) -> dict[int, int] | str:
    """host -> pods, or why no placement keeps the gang's spread constraints."""
    rule = capacity.gang.spread[0]
    totals = domain_counts(capacity, rule)
    room = _room(capacity, rule)
    taken = _water_fill(totals, room, capacity.gang.pods)
    if taken is None:
        return f"{_name(rule)}: too little room to place {capacity.gang.pods} pods"
    counts = _hosts(capacity, rule, taken)
    for other in capacity.gang.spread:
        after = domain_counts(capacity, other)
        for h, n in counts.items():
            value = capacity.snapshot.fabric.hosts[h].labels[other.key]
            after[value] = after.get(value, 0) + n
        if other.skew(after) > other.max_skew:
            return (
                f"{_name(other)}: the most even placement the room allows has skew "
                f"{other.skew(after)} > maxSkew {other.max_skew}"
            )
    return counts


def domain_counts(capacity: Capacity, rule: Spread) -> dict[str, int]:
    """label value -> matching pods there now, for every domain the gang's labels admit."""
    snapshot, gang = capacity.snapshot, capacity.gang
    fabric = snapshot.fabric
    usable = np.flatnonzero(
        snapshot.pool_hosts(gang.pool) & fabric.admits(gang.constraints.ignoring_taints())
    )
    totals = {v: 0 for h in usable.tolist() if (v := fabric.hosts[h].labels.get(rule.key))}
    for value, count in rule.counts:
        if value in totals:
            totals[value] += count
    return totals


def _slots(capacity: Capacity) -> dict[int, int]:
    """host -> pods, of the hosts labelled with every spread's key: a node without a
    DoNotSchedule spread's key is no candidate (as in kube-scheduler)."""
    keys = [rule.key for rule in capacity.gang.spread]
    hosts = capacity.snapshot.fabric.hosts
    return {h: n for h, n in capacity.slots.items() if all(k in hosts[h].labels for k in keys)}


def _room(capacity: Capacity, rule: Spread) -> dict[str, int]:
    fabric = capacity.snapshot.fabric
    room: dict[str, int] = {}
    for h, n in _slots(capacity).items():
        value = fabric.hosts[h].labels.get(rule.key)
        if value is not None:
            room[value] = room.get(value, 0) + n
    return room


def _water_fill(totals: dict[str, int], room: dict[str, int], n: int) -> dict[str, int] | None:
    taken: dict[str, int] = {}
    heap = [(totals[v], -r, v) for v, r in room.items() if r > 0 and v in totals]
    heapq.heapify(heap)
    for _ in range(n):
        if not heap:
            return None
        count, left, value = heapq.heappop(heap)
        taken[value] = taken.get(value, 0) + 1
        if left < -1:
            heapq.heappush(heap, (count + 1, left + 1, value))
    return taken


def _hosts(capacity: Capacity, rule: Spread, taken: dict[str, int]) -> dict[int, int]:
    fabric = capacity.snapshot.fabric
    counts: dict[int, int] = {}
    by_room = sorted(_slots(capacity).items(), key=lambda hn: (-hn[1], hn[0]))
    for h, n in by_room:
        value = fabric.hosts[h].labels.get(rule.key)
        want = taken.get(value, 0) if value is not None else 0
        if want:
            counts[h] = min(n, want)
            taken[str(value)] = want - counts[h]
    return counts


def _name(rule: Spread) -> str:
    return rule.name or f"topology spread over {rule.key} (maxSkew {rule.max_skew})"
