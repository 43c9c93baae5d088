"""Roles: the pod sets of a gang that exchange no gradients, placed with its workers.

Contract. Takes the capacity left once the workers' placement is charged, the gang and the
workers' hosts. Decides, role by role in the gang's order, a host for every pod of the role:
nearest the workers first (a host they use, then one in a domain they use at the lowest level
shared), then depth-first; each role is charged before the next is placed. A role's own
topology narrows that order: with a required level, the first domain of that level (in the
same order) that holds the whole role; with a preferred level, the same when one does, else the
plain order; with slices, each domain of a sliced level takes whole groups (slices.fill).
The gang's required level holds a role that names none of its own: it goes inside the workers'
domain of that level (the whole group in one domain, as Kueue places a PodSet group).
Promises: every role placed or none (the reason names the first role that did not fit); every
pod on a host of the gang's pool that admits the role's constraints and has the role's
resources and a pod slot; a required level and every slice kept, by role rank. `problem` names
a role's request that cannot be valid (unknown level, slices that do not nest or sit above its
required level). The traffic model and the objective count the workers only: roles do not move
the optimum; a ring role's do (placement.api then tries every part in one model, parts.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scheduler.model.gang import GangRequest, Role
from scheduler.model.placement import Placement, PlacementStatus, PodAssignment
from scheduler.placement import slices
from scheduler.placement.baselines.required import first_inside
from scheduler.placement.baselines.take import take
from scheduler.placement.capacity import Capacity
from scheduler.placement.reasons import explain
from scheduler.placement.snapshot import Snapshot
from scheduler.topology.fabric import Fabric


def place_roles(
    snapshot: Snapshot, gang: GangRequest, workers: Sequence[int]
) -> list[PodAssignment] | str:
    """The roles' pods on `snapshot` (workers already charged), or why they do not fit."""
    if not gang.roles:
        return []
    fabric = snapshot.fabric
    work = snapshot.copy()
    near = nearness(fabric, workers)
    out: list[PodAssignment] = []
    for role in gang.roles:
        part = as_gang(gang, role)
        capacity = Capacity.of(work, part)
        hosts = _group_wide(fabric, gang, role, workers, capacity.hosts)
        order = hosts[np.lexsort((fabric.dfs_rank[hosts], near[hosts]))].tolist()  # nearest first
        counts = _counts(capacity, role, order)
        if counts is None:
            return f"role {role.name}: {explain(capacity) or 'no room for its pods'}"
        pods = assign(fabric, role, counts, first=gang.pods + len(out))
        work.apply(
            part,
            Placement(
                gang=part.name,
                policy="",
                status=PlacementStatus.PLACED,
                pods=tuple(p.model_copy(update={"role": ""}) for p in pods),
            ),
        )
        out += pods
    return out


def _group_wide(
    fabric: Fabric, gang: GangRequest, role: Role, workers: Sequence[int], hosts: np.ndarray
) -> np.ndarray:
    """The hosts a role may use: with the gang's required level and none of its own, only
    those in the workers' domain of that level (the whole group in one domain)."""
    level = gang.required_level
    if level is None or not grouped(gang, role) or not len(workers):
        return hosts
    column = fabric.columns[fabric.index(level)]
    inside: np.ndarray = hosts[column[hosts] == column[workers[0]]]
    return inside


def grouped(gang: GangRequest, role: Role) -> bool:
    """Is the role held in the gang's group-wide domain (the gang's required level)?"""
    return gang.required_level is not None and role.required_level is None and role.in_group


def problem(fabric: Fabric, gang: GangRequest) -> str | None:
    """Why some role's topology request cannot be valid on `fabric`, or None."""
    for role in gang.roles:
        unknown = [n for n in role.levels if n not in fabric.levels]
        if unknown:
            names = ", ".join(fabric.levels)
            return f"role {role.name}: unknown level {unknown[0]!r}; levels are {names}"
        wrong = slices.problem(fabric, as_gang(gang, role))
        if wrong is not None:
            return f"role {role.name}: {wrong}"
    return None


def _counts(capacity: Capacity, role: Role, order: list[int]) -> dict[int, int] | None:
    if role.required_level is not None:
        return _inside(capacity, capacity.snapshot.fabric.index(role.required_level), order)
    if role.preferred_level is not None:
        level = capacity.snapshot.fabric.index(role.preferred_level)
        return _inside(capacity, level, order) or take(capacity, order)
    return take(capacity, order)


def _inside(capacity: Capacity, level: int, order: list[int]) -> dict[int, int] | None:
    """Counts inside the first domain of `level`, in the order its hosts come, that holds every
    pod of the role."""
    column = capacity.snapshot.fabric.columns[level]
    domains = dict.fromkeys(int(column[h]) for h in order)
    return first_inside(capacity, level, domains, lambda inside: take(inside, order))


def as_gang(gang: GangRequest, role: Role) -> GangRequest:
    """A role as a gang of its own (same pool), for capacity, charging and its topology."""
    return GangRequest(
        name=f"{gang.name}/{role.name}",
        pods=role.pods,
        gpus_per_pod=role.gpus_per_pod,
        cpu_milli_per_pod=role.cpu_milli_per_pod,
        memory_mib_per_pod=role.memory_mib_per_pod,
        extended_per_pod=role.extended_per_pod,
        pool=gang.pool,
        constraints=role.constraints,
        required_level=role.required_level,
        slices=role.slices,
    )


def nearness(fabric: Fabric, workers: Sequence[int]) -> np.ndarray:
    """Per host, the lowest level at which it shares a domain with a worker (depth if none)."""
    near = np.full(len(fabric.hosts), fabric.depth, dtype=np.int64)
    hosts = np.asarray(list(workers), dtype=np.int64)
    for level in range(fabric.top, -1, -1):
        column = fabric.columns[level]
        near[np.isin(column, column[hosts])] = level
    return near


def assign(fabric: Fabric, role: Role, counts: dict[int, int], first: int) -> list[PodAssignment]:
    """The role's pods on `counts` (host -> pods), depth-first, ranks from `first`."""
    hosts = [
        h for h in sorted(counts, key=fabric.dfs_position.__getitem__) for _ in range(counts[h])
    ]
    return [
        PodAssignment(rank=first + i, host=fabric.hosts[h].name, role=role.name, role_rank=i)
        for i, h in enumerate(hosts)
    ]
