"""An independent check of any placement: written without reference to the solver, and run by
the tests on every output of every policy."""

from __future__ import annotations

from collections import Counter

import numpy as np

from scheduler.model.constraints import NodeConstraints
from scheduler.model.gang import GangRequest, Role
from scheduler.model.placement import Placement
from scheduler.model.topology import Tier
from scheduler.placement.roles import grouped
from scheduler.placement.snapshot import Snapshot
from scheduler.topology.fabric import UnknownLevelError


class InvalidPlacementError(AssertionError):
    pass


def validate(snapshot: Snapshot, gang: GangRequest, placement: Placement) -> None:
    """Raise InvalidPlacementError naming the first broken rule."""
    if not placement.placed:
        if placement.pods:
            raise InvalidPlacementError(f"{gang.name}: unplaceable but has pods")
        if not placement.reason:
            raise InvalidPlacementError(f"{gang.name}: unplaceable without a reason")
        return
    fabric = snapshot.fabric
    workers = [p for p in placement.pods if not p.role]
    if sorted(p.rank for p in workers) != list(range(gang.pods)):
        raise InvalidPlacementError(f"{gang.name}: ranks are not 0..{gang.pods - 1}")
    _check_roles(gang, placement)
    index = fabric.host_index
    load: dict[int, dict[str, int]] = {}
    sets = [("", gang.request(""), gang.constraints)]
    sets += [(r.name, gang.request(r.name), r.constraints) for r in gang.roles]
    for role, need, constraints in sets:
        for host, pods in placement.hosts(role).items():
            h = _check_host(snapshot, gang, host, constraints)
            total = load.setdefault(h, {})
            for what, units in (
                ("pods", 1),
                ("GPUs", need.gpus),
                ("CPU", need.cpu_milli),
                ("memory", need.memory_mib),
                *need.extended.items(),
            ):
                total[what] = total.get(what, 0) + pods * units
    for h, total in load.items():
        _check_load(snapshot, gang, h, total)
    hosts = [index[p.host] for p in sorted(workers, key=lambda p: p.rank)]
    if gang.required_level is not None:
        try:
            level = fabric.index(gang.required_level)
        except UnknownLevelError as exc:
            raise InvalidPlacementError(f"{gang.name}: {exc}") from exc
        # group-wide: the workers and every role that names no level of its own
        held = {"", *(r.name for r in gang.roles if grouped(gang, r))}
        group = [index[p.host] for p in placement.pods if p.role in held]
        if len({fabric.domain[level][h] for h in group}) != 1:
            raise InvalidPlacementError(f"{gang.name}: spans more than one {gang.required_level}")
    _check_tp_groups(snapshot, gang, hosts)
    _check_rack_cap(snapshot, gang, hosts)
    _check_host_cap(gang, hosts)
    _check_spread(snapshot, gang, hosts)
    for pod_set in gang.roles:
        _check_role_topology(snapshot, gang, pod_set, placement)


def _check_role_topology(
    snapshot: Snapshot, gang: GangRequest, role: Role, placement: Placement
) -> None:
    """A role's required level holds all its pods; each slice of it, by role rank, one domain."""
    fabric = snapshot.fabric
    pods = sorted(
        (p for p in placement.pods if p.role == role.name), key=lambda p: p.role_rank or 0
    )
    hosts = [fabric.host_index[p.host] for p in pods]
    wanted = [(role.required_level, role.pods, "required level")]
    wanted += [(s.level, s.size, f"slice of {s.size}") for s in role.slices]
    for name, size, what in wanted:
        if name is None:
            continue
        try:
            level = fabric.index(name)
        except UnknownLevelError as exc:
            raise InvalidPlacementError(f"{gang.name}: role {role.name}: {exc}") from exc
        for start in range(0, len(hosts), size):
            if len({fabric.domain[level][h] for h in hosts[start : start + size]}) != 1:
                raise InvalidPlacementError(
                    f"{gang.name}: role {role.name}: {what} at role rank {start} leaves its {name}"
                )


def _check_tp_groups(snapshot: Snapshot, gang: GangRequest, hosts: list[int]) -> None:
    """Each TP group inside one NVLink domain (a host outside NVLink is its own), and each
    consecutive group of a slice inside one domain of its level."""
    fabric = snapshot.fabric
    wanted: list[tuple[int, int, str]] = [(Tier.NVLINK, gang.tp_pods, "TP group")]
    for s in gang.slices:
        try:
            wanted.append((fabric.index(s.level), s.size, f"slice of {s.size} per {s.level}"))
        except UnknownLevelError as exc:
            raise InvalidPlacementError(f"{gang.name}: {exc}") from exc
    for level, size, what in wanted:
        for start in range(0, len(hosts), size):
            if len({fabric.domain[level][h] for h in hosts[start : start + size]}) != 1:
                raise InvalidPlacementError(
                    f"{gang.name}: {what} at rank {start} leaves its {fabric.levels[level]}"
                )


def _check_rack_cap(snapshot: Snapshot, gang: GangRequest, hosts: list[int]) -> None:
    if gang.max_pods_per_rack is None:
        return
    per_rack: dict[int, int] = {}
    for h in hosts:
        rack = snapshot.fabric.domain[Tier.RACK][h]
        per_rack[rack] = per_rack.get(rack, 0) + 1
    if max(per_rack.values()) > gang.max_pods_per_rack:
        raise InvalidPlacementError(
            f"{gang.name}: more than {gang.max_pods_per_rack} pods in a rack"
        )


def _check_host_cap(gang: GangRequest, hosts: list[int]) -> None:
    cap = gang.max_pods_per_host
    if cap is not None and max(Counter(hosts).values()) > cap:
        raise InvalidPlacementError(f"{gang.name}: more than {cap} pods on a host")


def _check_spread(snapshot: Snapshot, gang: GangRequest, hosts: list[int]) -> None:
    """Every spread constraint's skew, over the domains of the hosts the gang may use, once
    its pods are counted (recomputed here from the labels, not taken from the engine)."""
    fabric = snapshot.fabric
    admitted = fabric.admits(gang.constraints.ignoring_taints())  # the domains spread counts
    usable = snapshot.pool_hosts(gang.pool) & admitted
    for rule in gang.spread:
        totals = {
            v: 0
            for h in np.flatnonzero(usable).tolist()
            if (v := fabric.hosts[h].labels.get(rule.key)) is not None
        }
        for value, count in rule.counts:
            if value in totals:
                totals[value] += count
        for h in hosts:
            found = fabric.hosts[h].labels.get(rule.key)
            if found is None:
                raise InvalidPlacementError(f"{gang.name}: a pod on a host without {rule.key}")
            totals[found] = totals.get(found, 0) + 1
        if rule.skew(totals) > rule.max_skew:
            raise InvalidPlacementError(
                f"{gang.name}: {rule.name or rule.key} skew {rule.skew(totals)} > {rule.max_skew}"
            )


def _check_roles(gang: GangRequest, placement: Placement) -> None:
    """Each role has its pods, ranked 0.. within it and after the workers globally."""
    placed = {p.role for p in placement.pods if p.role}
    if placed - {r.name for r in gang.roles}:
        raise InvalidPlacementError(f"{gang.name}: pods of unknown roles {sorted(placed)}")
    first = gang.pods
    for role in gang.roles:
        pods = [p for p in placement.pods if p.role == role.name]
        if sorted(p.role_rank or 0 for p in pods) != list(range(role.pods)):
            raise InvalidPlacementError(f"{gang.name}: role {role.name} ranks are wrong")
        if sorted(p.rank for p in pods) != list(range(first, first + role.pods)):
            raise InvalidPlacementError(f"{gang.name}: role {role.name} global ranks are wrong")
        first += role.pods


def _check_host(
    snapshot: Snapshot, gang: GangRequest, host: str, constraints: NodeConstraints
) -> int:
    index = snapshot.fabric.host_index
    if host not in index:
        raise InvalidPlacementError(f"{gang.name}: unknown host {host}")
    h = index[host]
    spec = snapshot.fabric.hosts[h]
    if spec.pool != gang.pool and h not in snapshot.lent.get(gang.pool, ()):
        raise InvalidPlacementError(f"{gang.name}: host {host} is in pool {spec.pool}")
    if h in snapshot.down:
        raise InvalidPlacementError(f"{gang.name}: host {host} is down")
    if not constraints.admits(spec.labels, spec.taints):
        raise InvalidPlacementError(f"{gang.name}: host {host} fails the node constraints")
    return h


def _check_load(snapshot: Snapshot, gang: GangRequest, h: int, total: dict[str, int]) -> None:
    host = snapshot.fabric.hosts[h].name
    if total["pods"] > snapshot.free_pods[h]:
        raise InvalidPlacementError(f"{gang.name}: host {host} is over its pod limit")
    free = {
        "GPUs": snapshot.free_gpus[h],
        "CPU": snapshot.free_cpu[h],
        "memory": snapshot.free_mem[h],
    }
    for what, used in total.items():
        if what == "pods":
            continue
        have = free[what] if what in free else snapshot.ext(what)[h]
        if used > have:
            raise InvalidPlacementError(f"{gang.name}: host {host} oversubscribed on {what}")
