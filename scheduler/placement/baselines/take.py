"""Filling hosts in a given order while keeping the gang's structural rules (TP groups inside
an NVLink domain, per-rack caps). Shared by every baseline so they differ only in order."""

from __future__ import annotations

from collections.abc import Iterable

from scheduler.model.topology import Tier
from scheduler.placement import slices
from scheduler.placement.capacity import Capacity


def take(
    capacity: Capacity, hosts: Iterable[int], n: int | None = None, within: int | None = None
) -> dict[int, int] | None:
    """Take pods from hosts in order until n (default: the gang) are placed; None if short.

    `within`: the hosts lie in one domain of that level and n is that domain's share, the
    slices above it kept by the caller (a descent that gives each domain a whole number)."""
    fabric = capacity.snapshot.fabric
    gang = capacity.gang
    need = gang.pods if n is None else n
    if gang.slices:  # a sliced domain is taken whole, in the order its hosts come
        size = slices.sizes(fabric, gang)
        if within is not None:
            size = tuple(s if lv <= within else size[within] for lv, s in enumerate(size))
        return slices.fill(fabric, size, capacity.slots, hosts, need)
    group = gang.tp_pods
    nvlink, rack = fabric.domain[Tier.NVLINK], fabric.domain[Tier.RACK]
    rack_room: dict[int, int] = {}
    cap = gang.max_pods_per_rack
    counts: dict[int, int] = {}
    seen_nvlink: set[int] = set()
    for h in hosts:
        if need == 0:
            break
        if h in counts or h not in capacity.slots:
            continue
        members = [h]
        if group > 1 and nvlink[h] in fabric.real_nvlink:
            # a real NVLink domain is taken as one unit so TP groups may span its hosts
            if nvlink[h] in seen_nvlink:
                continue
            seen_nvlink.add(nvlink[h])
            members = [m for m in _domain_hosts(capacity, 1, nvlink[h]) if m in capacity.slots]
        room = sum(capacity.slots[m] for m in members)
        if cap is not None:
            room = min(room, rack_room.setdefault(rack[h], cap))
        room = min(room - room % group, need)
        for m in members:
            got = min(capacity.slots[m], room)
            if got > 0:
                counts[m] = got
                room -= got
                need -= got
                if cap is not None:
                    rack_room[rack[m]] -= got
    return counts if need == 0 else None


def _domain_hosts(capacity: Capacity, level: int, domain: int) -> list[int]:
    column = capacity.snapshot.fabric.domain[level]
    return [h for h in capacity.slots if column[h] == domain]
