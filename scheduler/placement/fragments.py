"""What a placement breaks: the capacity later gangs lose, as one number the tree DP can add.

Contract. `Breakage.of(snapshot, pool, demand)` takes the free capacity before a gang is placed
and who asks for whole domains while it would run (`WholeDemand`, the queue's count), and
prices every switch domain (rack and above) the gang could touch:

    b(d) = size(d) x ( [d is wholly free] x min(1, D_L / W_L) + FIT x free share of d )

size(d) is the domain's GPUs in racks (a spine of 12 racks weighs 12): breaking a whole spine
costs a spine's worth. W_L is the wholly free domains of d's level L and D_L the whole ones
asked for: each gang waiting in the pool asks for as many as its GPUs fill (a gang of 2.5 racks,
two racks), and the pool's recent arrivals ask at their rate over the gang's expected run, the
time a domain it breaks stays broken. The first term is the chance that breaking d leaves a gang
that asks without a whole domain: none while the wholes outnumber the askers (small jobs may
then spread, which shortens their waits), all of its size once the askers take every whole one.
Where no count is at hand (`demand` None: `rackwise place`, EASY's trial placements, joint
placement) the first term is the scarcity of whole domains alone, 1 / (W_L + 1): breaking one
of the last few costs more than one of many. The second term is best fit
(touching a domain that is already mostly used costs less). A placement's breakage F is the
sum of b over the domains it touches at each level. F decomposes along the tree: the DP adds
b(child) per child used and, for its single lowest domain, b of that domain and its ancestors
(treedp.py).

It decides nothing: the rackwise policy (cpsat/solve.py) trades F against J within a share of
J, and reports what it traded (Placement.broken, Placement.premium)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.model.placement import PlaceConfig, WholeDemand
from scheduler.model.topology import Tier
from scheduler.placement.hints import RACKWISE
from scheduler.placement.snapshot import Array, Snapshot
from scheduler.topology.fabric import Fabric, nvlink_gpus

RACK = Tier.RACK
FIT = 0.25  # best fit weighs a quarter of breaking a whole domain when few are left
Prices = dict[int, npt.NDArray[np.float64]]


@dataclass(frozen=True)
class Breakage:
    prices: Prices  # level (rack and above) -> b per domain of that level
    whole: dict[int, npt.NDArray[np.bool_]]  # level -> domain is wholly free

    @staticmethod
    def of(snapshot: Snapshot, pool: str, demand: WholeDemand | None = None) -> Breakage:
        fabric = snapshot.fabric
        mask = snapshot.pool_hosts(pool)
        free = np.where(mask, snapshot.free_gpus * snapshot.up_mask(), 0)
        total = np.where(mask, fabric.gpus, 0)
        # with spares, what each NVLink domain keeps in service, read once for every level
        trays = nvlink_gpus(fabric, mask) if fabric.spares else None
        rack_gpus = max(1.0, float(in_service(fabric, RACK, total, trays).max()))
        prices: Prices = {}
        whole: dict[int, npt.NDArray[np.bool_]] = {}
        for level in range(RACK, fabric.depth):
            column = fabric.columns[level]
            n = len(fabric.names[level])
            cap = in_service(fabric, level, total, trays)
            left = np.bincount(column, weights=free, minlength=n)
            intact = (cap > 0) & (left >= cap)
            share = np.divide(left, cap, out=np.zeros(n), where=cap > 0)
            size = cap / rack_gpus
            scarce = taken(demand, float(cap.max(initial=0)), int(intact.sum()))
            prices[level] = size * (intact * scarce + FIT * share)
            whole[level] = intact
        return Breakage(prices, whole)

    def scaled(self, factor: float) -> Prices:
        return {level: p * factor for level, p in self.prices.items()}

    def value(self, snapshot: Snapshot, counts: Mapping[int, int]) -> float:
        return sum(float(self.prices[lv][list(ds)].sum()) for lv, ds in _touched(snapshot, counts))

    def broken(self, snapshot: Snapshot, counts: Mapping[int, int]) -> dict[str, int]:
        """Level name -> wholly free domains the placement breaks (only levels where any)."""
        names = snapshot.fabric.levels
        out = {
            names[lv]: int(self.whole[lv][list(ds)].sum()) for lv, ds in _touched(snapshot, counts)
        }
        return {k: v for k, v in out.items() if v}


def trades(config: PlaceConfig) -> bool:
    """Does a placement under `config` trade J for less breakage (rackwise's, cpsat/solve.py)?
    Only then is who asks for whole domains worth counting."""
    return config.policy == RACKWISE and config.scheduling.fragmentation_share > 0


def taken(demand: WholeDemand | None, gpus: float, wholes: int) -> float:
    """The share of a level's `wholes` wholly free domains (each of up to `gpus` GPUs) that the
    gangs asking for whole ones will take while the placed gang runs: min(1, D / W); without
    a count, the scarcity of whole domains alone, 1 / (W + 1)."""
    if not wholes:
        return 0.0
    if demand is None:  # no count at hand: the scarcity prior, 1 / (W + 1)
        return 1.0 / (wholes + 1)
    return min(1.0, demand.domains(gpus) / wholes)


def broken_by(snapshot: Snapshot, pool: str, counts: Mapping[int, int]) -> dict[str, int]:
    """`Breakage.of(snapshot, pool).broken(snapshot, counts)` without pricing every domain
    (what a baseline's placement reports): a domain is wholly free when it has GPUs of the
    pool and none of them is used or down."""
    fabric = snapshot.fabric
    mask = snapshot.pool_hosts(pool)
    gpus = np.where(mask, fabric.gpus, 0)
    busy = np.flatnonzero(snapshot.free_gpus * snapshot.up_mask() < gpus)
    owned = np.flatnonzero(gpus > 0)
    out: dict[str, int] = {}
    for level, ds in _touched(snapshot, counts):
        column, n = fabric.columns[level], len(fabric.names[level])
        whole = (np.bincount(column[owned], minlength=n) > 0) & (
            np.bincount(column[busy], minlength=n) == 0
        )
        found = int(whole[list(ds)].sum())
        if found:
            out[fabric.levels[level]] = found
    return out


def in_service(fabric: Fabric, level: int, total: Array, trays: Array | None) -> Array:
    """GPUs per domain of `level` that can hold pods at once (`total`: per host, of the pool;
    `trays`: per NVLink domain, less its spares, where the fabric keeps any), so a domain
    whose trays in service are all free is whole though its spares are held down."""
    n = len(fabric.names[level])
    if trays is None:
        return np.bincount(fabric.columns[level], weights=total, minlength=n)
    above = np.zeros(len(fabric.names[Tier.NVLINK]), dtype=np.int64)
    above[fabric.columns[Tier.NVLINK]] = fabric.columns[level]  # nested: any host tells
    return np.bincount(above, weights=trays, minlength=n)


def _touched(snapshot: Snapshot, counts: Mapping[int, int]) -> list[tuple[int, set[int]]]:
    fabric = snapshot.fabric
    hosts = [h for h, n in counts.items() if n > 0]
    return [
        (level, {fabric.domain[level][h] for h in hosts}) for level in range(RACK, fabric.depth)
    ]
