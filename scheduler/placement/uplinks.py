"""The load running gangs put on the fabric's uplinks, and a placement's share of it.

Contract. `crossings` takes the fabric and the placements of the gangs running now and counts,
for every domain of the rack level and above, the gangs with pods both inside and outside it:
their traffic crosses its uplink (rings and all-to-all alike leave a domain a gang spans). A
placement `meets` the sum of those counts over the domains it crosses itself (each domain it
uses at a level where it uses more than one): how many running gangs its traffic will share an
uplink with, the quantity that ECMP collisions and oversubscribed tiers charge for (issue
"Where placement pays": hashed paths with few flows, Gangidi et al. SIGCOMM'24). It decides
nothing: rackwise breaks ties in J by it (cpsat/solve.py); J, its bound and `optimal` are
unchanged."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from scheduler.model.placement import Placement
from scheduler.model.topology import Tier
from scheduler.placement.fragments import Prices
from scheduler.placement.snapshot import Array, Snapshot
from scheduler.topology.fabric import Fabric

RACK = Tier.RACK


def crossings(fabric: Fabric, placements: Iterable[Placement]) -> dict[int, Array]:
    """level -> per domain, the gangs among `placements` that cross its uplink."""
    index = fabric.host_index
    out = {lv: np.zeros(len(fabric.names[lv]), dtype=np.int64) for lv in range(RACK, fabric.depth)}
    for placement in placements:
        hosts = np.fromiter((index[p.host] for p in placement.pods if p.host in index), np.int64)
        for level, counts in out.items():
            used = np.unique(fabric.columns[level][hosts])
            if len(used) > 1:
                counts[used] += 1
    return out


def meets(snapshot: Snapshot, counts: Mapping[int, int]) -> int:
    """The running gangs a placement's traffic shares uplinks with (with repeats: per domain it
    crosses)."""
    if not snapshot.uplinks:
        return 0
    fabric = snapshot.fabric
    hosts = np.fromiter((h for h, n in counts.items() if n > 0), np.int64)
    total = 0
    for level, load in snapshot.uplinks.items():
        used = np.unique(fabric.columns[level][hosts])
        if len(used) > 1:
            total += int(load[used].sum())
    return total


def prices(snapshot: Snapshot) -> Prices:
    """The counts as the tree DP's per-domain prices (fragments.Prices)."""
    return {level: load.astype(np.float64) for level, load in snapshot.uplinks.items()}
