"""Why a gang cannot be placed: the binding constraint and the best available alternative, and
whether it can never be placed on a fabric, however much of it is free."""

from __future__ import annotations

from scheduler.model.gang import GangRequest
from scheduler.model.topology import Tier
from scheduler.placement import roles, slices
from scheduler.placement.bounds import INFEASIBLE, kstar
from scheduler.placement.capacity import Capacity
from scheduler.placement.snapshot import Snapshot
from scheduler.topology.fabric import Fabric


def unknown_levels(fabric: Fabric, gang: GangRequest) -> str | None:
    """A reason when the gang names a level this fabric does not have."""
    named = [gang.required_level, *gang.preferred_levels]
    unknown = [n for n in named if n is not None and n not in fabric.levels]
    if not unknown:
        return None
    return f"unknown level {unknown[0]!r}; levels are {', '.join(fabric.levels)}"


def explain(capacity: Capacity) -> str | None:
    """A reason when no placement can exist, None when one may."""
    gang = capacity.gang
    n = gang.pods
    total = capacity.total
    what = f"{n} pods x {gang.gpus_per_pod} GPUs"
    if gang.extended_per_pod:
        what += " + " + ", ".join(f"{u} {r}" for r, u in sorted(gang.extended_per_pod.items()))
    if gang.max_pods_per_rack is not None:
        racks = capacity.per_domain[Tier.RACK]
        fit = sum(racks.values())
        if fit < n:
            return (
                f"needs {what} in pool {gang.pool} with at most {gang.max_pods_per_rack} per "
                f"rack; the pool's {len(racks)} racks with room allow {fit}"
            )
    if total < n:
        free = capacity.snapshot.free_by_pool().get(gang.pool, 0)
        groups = [f"TP groups of {gang.tp_pods} pods"] if gang.tp_pods > 1 else []
        groups += [f"{s.size} pods per {s.level}" for s in gang.slices]
        extra = f" in whole {', '.join(groups)}" if groups else ""
        return (
            f"needs {what} in pool {gang.pool}{extra}; the pool has room for {total} "
            f"({free} GPUs free)"
        )
    if gang.required_level is not None:
        level = capacity.snapshot.fabric.index(gang.required_level)
        caps = capacity.per_domain[level]
        best = max(caps.items(), key=lambda dc: dc[1], default=None)
        if best is None or best[1] < n:
            fabric = capacity.snapshot.fabric
            name = fabric.display(level, best[0]) if best else "none"
            room = best[1] if best else 0
            spread = kstar(caps.values(), n)
            alt = f"; without the required level it fits across {spread} {gang.required_level}s"
            return (
                f"needs {n} pods in one {gang.required_level}; the freest "
                f"{gang.required_level} {name} has room for {room}"
                + (alt if spread != INFEASIBLE else "")
            )
    return None


def never_fits(fabric: Fabric, gang: GangRequest) -> str | None:
    """A reason when no placement of the gang can exist on `fabric` even with every host up
    and free (a proof: each reason is a capacity count a placement needs), None when one may.
    Waiting cannot help such a gang; a larger fabric or a smaller request can."""
    wrong = unknown_levels(fabric, gang) or slices.problem(fabric, gang)
    wrong = wrong or roles.problem(fabric, gang)
    if wrong is not None:
        return wrong
    empty = Snapshot(fabric)
    parts = [(gang, ""), *((roles.as_gang(gang, r), f"role {r.name}: ") for r in gang.roles)]
    for part, label in parts:
        why = explain(Capacity.of(empty, part))
        if why is not None:
            return f"even with every host free, {label}{why}"
    return None
