"""Aggregation: hosts under one leaf domain with equal free slots are interchangeable, so the
model has one integer count per (leaf domain, slot class) instead of a boolean per pod and host.
The leaf domain is the NVLink domain where one exists, else the rack."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.model.topology import Tier
from scheduler.placement.capacity import Capacity


@dataclass(frozen=True)
class Bin:
    nvlink: int | None  # real NVLink domain, or None when hosts stand alone in the rack
    rack: int
    slots: int  # pods each host of the bin can take
    hosts: tuple[int, ...]  # in fabric order
    empty_hosts: int  # hosts with nothing running: used only to prefer fragments

    @property
    def capacity(self) -> int:
        return self.slots * len(self.hosts)


def make_bins(capacity: Capacity) -> list[Bin]:
    fabric = capacity.snapshot.fabric
    nvlink, rack = fabric.domain[Tier.NVLINK], fabric.domain[Tier.RACK]
    groups: dict[tuple[int | None, int, int], list[int]] = {}
    for h, slots in sorted(capacity.slots.items()):
        v = nvlink[h] if nvlink[h] in fabric.real_nvlink else None
        groups.setdefault((v, rack[h], slots), []).append(h)
    snapshot = capacity.snapshot
    return [
        Bin(v, r, s, tuple(hosts), sum(1 for h in hosts if snapshot.is_empty(h)))
        for (v, r, s), hosts in groups.items()
    ]


def bins_of(bins: list[Bin], counts: dict[int, int]) -> list[tuple[int, int]]:
    """A host-level placement (e.g. a baseline's) as (pods, hosts used) per bin, for hints."""
    out = []
    for b in bins:
        used = [counts[h] for h in b.hosts if counts.get(h)]
        out.append((sum(used), len(used)))
    return out


def fill(bins: list[Bin], pods: list[int], hosts_used: list[int]) -> dict[int, int]:
    """Back from counts to hosts: fill each chosen host of a bin fully, the last with the rest."""
    counts: dict[int, int] = {}
    for b, x, used in zip(bins, pods, hosts_used, strict=True):
        for h in b.hosts[:used]:
            if x <= 0:
                break
            counts[h] = min(b.slots, x)
            x -= counts[h]
    return counts
