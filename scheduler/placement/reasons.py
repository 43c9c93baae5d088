"""Why a gang cannot be placed: the binding constraint and the best available alternative, and
whether it can never be placed on a fabric, however much of it is free."""

from __future__ import annotations

from scheduler.model.gang import GangRequest
from scheduler.model.topology import Tier
from scheduler.placement import roles, slices, spares
from scheduler.placement.bounds import INFEASIBLE, kstar
from scheduler.placement.capacity import Capacity
from scheduler.placement.snapshot import Snapshot
from scheduler.topology.fabric import Fabric


def unknown_levels(fabric: Fabric, gang: GangRequest) -> str | None:
    """A reason when the gang names a level this fabric does not have."""
    named = [gang.required_level, *gang.preferred_levels, *(s.level for s in gang.preferred_slices)]
    unknown = [n for n in named if n is not None and n not in fabric.levels]
    if not unknown:
        return None
    return f"unknown level {unknown[0]!r}; levels are {', '.join(fabric.levels)}"


def explain(capacity: Capacity) -> str | None:
    """A reason when no placement can exist, None when one may."""
    gang = capacity.gang
    n = gang.pods
    total = capacity.total
    ruled_out = _pod_rules(capacity)
    if ruled_out is not None:
        return ruled_out
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
    sliced = _slices(capacity)
    if sliced is not None:
        return sliced
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
    empty = spares.hold_back(Snapshot(fabric))
    gang = _static(gang)
    parts = [(gang, ""), *((roles.as_gang(gang, r), f"role {r.name}: ") for r in gang.roles)]
    for part, label in parts:
        why = explain(Capacity.of(empty, part))
        if why is not None:
            return f"even with every host free, {label}{why}"
    return None


def _static(gang: GangRequest) -> GangRequest:
    """The gang as it would be with nothing else running: pod (anti-)affinity with the pods
    of others and the counts a spread starts from are not its own, and they change."""
    spread = tuple(s.model_copy(update={"counts": ()}) for s in gang.spread)
    constraints = gang.constraints.static()
    role_rules = tuple(
        r.model_copy(update={"constraints": r.constraints.static()}) for r in gang.roles
    )
    return gang.model_copy(
        update={"constraints": constraints, "spread": spread, "roles": role_rules}
    )


def _pod_rules(capacity: Capacity) -> str | None:
    """When the pod (anti-)affinity terms are what leave too little room: which ones."""
    gang = capacity.gang
    rules = gang.constraints.pod_rules
    if not rules or capacity.total >= gang.pods:
        return None
    freed = Capacity.of(
        capacity.snapshot, gang.model_copy(update={"constraints": gang.constraints.static()})
    )
    if freed.total < gang.pods:
        return None
    names = ", ".join(r.name or f"{r.key} {r.operator.value} {list(r.values)}" for r in rules)
    return (
        f"needs {gang.pods} pods; with its pod (anti-)affinity ({names}) the hosts it may use "
        f"have room for {capacity.total}, without it {freed.total}"
    )


def _slices(capacity: Capacity) -> str | None:
    """The lowest sliced level whose domains, counting whole slices only, cannot hold the gang
    (`slices.budgets`), named with its slice size and its freest domain; None when each can."""
    fabric, gang = capacity.snapshot.fabric, capacity.gang
    size = slices.sizes(fabric, gang)
    if max(size) == 1:
        return None
    budget = slices.budgets(fabric, size, capacity.slots)
    for level in range(1, fabric.depth):
        held = sum(budget[level].values())
        if size[level] > size[level - 1] and held < gang.pods:
            name = fabric.levels[level]
            rooms: dict[int, int] = {}
            for host, pods in capacity.slots.items():
                d = fabric.domain[level][host]
                rooms[d] = rooms.get(d, 0) + pods
            best = max(rooms.items(), key=lambda dc: dc[1], default=None)
            freest = (
                f"; the freest {name} {fabric.display(level, best[0])} has room for {best[1]}"
                if best
                else ""
            )
            return (
                f"needs {gang.pods} pods in whole slices of {size[level]} per {name}; the "
                f"{name}s with room hold {held} pods in such slices{freest}"
            )
    return None


def not_found(policy: str, solver: str) -> str:
    """Why a policy found nothing although capacity and constraints allow a placement: the
    solver's work limit ran out (deterministic: no wall clock), or a baseline's greedy rule
    found none."""
    if policy == solver:
        return "no placement found within the solver's work limit"
    return f"{policy}'s rule found no placement on this free capacity (its greedy pass stops there)"
