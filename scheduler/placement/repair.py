"""Repair with minimal movement: a running gang lost some pods (their node died); put back only
those ranks, as close to the survivors as capacity allows.

Contract. Takes the snapshot (survivors already charged), the gang, the surviving ranks' hosts
and the missing ranks. Decides hosts for the missing ranks only: it tries the survivors'
smallest common domain first (their host, then NVLink domain, rack, spine, core), and within
the first domain that holds the missing pods it places them as `place_one` would place a gang
of that size there. Promises: survivors never move; every chosen host admits the gang (pool,
constraints, capacity, pod limit); with a required level, the new pods stay in the survivors'
domain of that level or nothing is returned. Gangs whose shape ties ranks together across pods
(tensor-parallel groups wider than a pod, per-rack caps) are not repaired piecemeal: None tells
the caller to move the whole gang."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from scheduler.model.gang import GangRequest
from scheduler.model.placement import PlaceConfig, Placement, PlacementStatus, PodAssignment
from scheduler.placement.api import place_one
from scheduler.placement.snapshot import Snapshot


def piecemeal(gang: GangRequest) -> bool:
    """Can lost pods be put back one by one without breaking the gang's shape?"""
    plain = not gang.slices and not gang.roles
    return plain and gang.tp_pods == 1 and gang.max_pods_per_rack is None


def repair(
    snapshot: Snapshot,
    gang: GangRequest,
    survivors: Mapping[int, str],
    missing: Sequence[int],
    config: PlaceConfig,
) -> Placement | None:
    """A placement of the missing ranks (rank numbers are the gang's), or None."""
    if not piecemeal(gang) or not survivors or not missing:
        return None
    fabric = snapshot.fabric
    part = gang.model_copy(
        update={"name": f"{gang.name}/repair", "pods": len(missing), "shape": None}
    )
    hosts = [fabric.host_index[h] for h in survivors.values()]
    top = fabric.index(gang.required_level) if gang.required_level else fabric.top
    for level in range(top + 1):
        domains = {fabric.domain[level][h] for h in hosts}
        if len(domains) != 1:
            continue
        found = _inside(snapshot, part, level, domains.pop(), config)
        if found is not None:
            return _renumber(found, gang.name, missing)
    if gang.required_level is None:
        found = place_one(snapshot, part.model_copy(update={"required_level": None}), config)
        if found.placed:
            return _renumber(found, gang.name, missing)
    return None


def _inside(
    snapshot: Snapshot, part: GangRequest, level: int, domain: int, config: PlaceConfig
) -> Placement | None:
    """place_one with every host outside the domain taken as down."""
    inside = snapshot.copy()
    column = snapshot.fabric.columns[level]
    inside.down.update(np.nonzero(column != domain)[0].tolist())
    found = place_one(inside, part, config)
    return found if found.placed else None


def _renumber(found: Placement, gang: str, missing: Sequence[int]) -> Placement:
    ranks = sorted(missing)
    pods = tuple(
        PodAssignment(rank=ranks[p.rank], host=p.host)
        for p in sorted(found.pods, key=lambda p: p.rank)
    )
    return found.model_copy(update={"gang": gang, "pods": pods, "status": PlacementStatus.PLACED})
