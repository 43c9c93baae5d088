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

from collections.abc import Callable, Iterable, Mapping

import numpy as np

from scheduler.model.placement import Placement
from scheduler.model.topology import Tier
from scheduler.placement.fragments import Prices
from scheduler.placement.snapshot import Array, Snapshot
from scheduler.topology.fabric import Fabric

RACK = Tier.RACK


def crossings(fabric: Fabric, placements: Iterable[Placement]) -> dict[int, Array]:
    """level -> per domain, the gangs among `placements` that cross its uplink."""
    kept = Crossings(fabric)
    for i, placement in enumerate(placements):
        kept.add(str(i), placement)
    return kept.counts


class Crossings:
    """`crossings` kept from one queue cycle to the next: `update` adds the gangs that started
    and takes away those that ended, so a cycle's work follows what changed, not what runs
    (counting every running gang each cycle made a replay several times slower)."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.counts = {
            lv: np.zeros(len(fabric.names[lv]), dtype=np.int64) for lv in range(RACK, fabric.depth)
        }
        self.gangs: dict[str, tuple[Placement, list[tuple[int, Array]]]] = {}

    def of(self, running: Callable[[], Mapping[str, Placement]]) -> Callable[[], dict[int, Array]]:
        """The counts once the gangs `running` gives run (key -> placement), brought up to date
        when first asked for: most queue cycles place no gang that weighs them."""
        done: list[bool] = []

        def counts() -> dict[int, Array]:
            if not done:
                self.update(running())
                done.append(True)
            return self.counts

        return counts

    def update(self, running: Mapping[str, Placement]) -> None:
        """Now these gangs run (key -> placement)."""
        for key in [k for k, (p, _) in self.gangs.items() if running.get(k) is not p]:
            self._remove(key)
        for key, placement in running.items():
            if key not in self.gangs:
                self.add(key, placement)

    def add(self, key: str, placement: Placement) -> None:
        index, fabric = self.fabric.host_index, self.fabric
        hosts = np.fromiter((index[p.host] for p in placement.pods if p.host in index), np.int64)
        spans = []
        for level, counts in self.counts.items():
            used = np.unique(fabric.columns[level][hosts])
            if len(used) > 1:
                counts[used] += 1
                spans.append((level, used))
        self.gangs[key] = (placement, spans)

    def _remove(self, key: str) -> None:
        _, spans = self.gangs.pop(key)
        for level, used in spans:
            self.counts[level][used] -= 1


def meets(snapshot: Snapshot, counts: Mapping[int, int]) -> int:
    """The running gangs a placement's traffic shares uplinks with (with repeats: per domain it
    crosses)."""
    if snapshot.uplinks is None:
        return 0
    fabric = snapshot.fabric
    hosts = np.fromiter((h for h, n in counts.items() if n > 0), np.int64)
    total = 0
    for level, load in snapshot.uplinks().items():
        used = np.unique(fabric.columns[level][hosts])
        if len(used) > 1:
            total += int(load[used].sum())
    return total


def prices(snapshot: Snapshot) -> Prices:
    """The counts as the tree DP's per-domain prices (fragments.Prices)."""
    known = snapshot.uplinks() if snapshot.uplinks is not None else {}
    return {level: load.astype(np.float64) for level, load in known.items()}
