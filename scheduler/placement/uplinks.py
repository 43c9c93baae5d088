"""The load running gangs put on the fabric's uplinks.

Contract. `crossings` takes the fabric and the placements of the gangs running now and counts,
for every domain of the rack level and above, the gangs with pods both inside and outside it:
their traffic crosses its uplink (rings and all-to-all alike leave a domain a gang spans).
`Crossings` keeps those counts from one queue cycle to the next. It decides nothing: rackwise's
J prices each uplink a gang crosses by them (placement/scoring.py, its load term), the queue
hands them to rackwise's placements (Snapshot.uplinks); the quantity that shared, hashed and
oversubscribed uplinks charge for (issue "Where placement pays": ECMP with few flows, Gangidi
et al. SIGCOMM'24)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np

from scheduler.model.placement import Placement
from scheduler.model.topology import Tier
from scheduler.placement.snapshot import Array
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

    def of(
        self,
        running: Callable[[], Mapping[str, Placement]],
        started: Callable[[], Mapping[str, Placement]],
    ) -> Callable[[], dict[int, Array]]:
        """The counts once the gangs `running` gives run (key -> placement), brought up to date
        when first asked for (most queue cycles place no gang that weighs them), and then with
        each gang `started` in the cycle since (a later placement of the same cycle sees it)."""
        done: list[bool] = []

        def counts() -> dict[int, Array]:
            if not done:
                self.update(running())
                done.append(True)
            for key, placement in started().items():
                if key not in self.gangs:
                    self.add(key, placement)
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
