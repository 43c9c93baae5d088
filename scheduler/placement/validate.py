"""An independent check of any placement: written without reference to the solver, and run by
the tests on every output of every policy."""

from __future__ import annotations

from scheduler.model.gang import GangRequest
from scheduler.model.placement import Placement
from scheduler.model.topology import Tier
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
    ranks = sorted(p.rank for p in placement.pods)
    if ranks != list(range(gang.pods)):
        raise InvalidPlacementError(f"{gang.name}: ranks are not 0..{gang.pods - 1}")
    index = fabric.host_index
    for host, pods in placement.hosts().items():
        if host not in index:
            raise InvalidPlacementError(f"{gang.name}: unknown host {host}")
        h = index[host]
        spec = fabric.hosts[h]
        if spec.pool != gang.pool:
            raise InvalidPlacementError(f"{gang.name}: host {host} is in pool {spec.pool}")
        if h in snapshot.down:
            raise InvalidPlacementError(f"{gang.name}: host {host} is down")
        if not gang.constraints.admits(spec.labels, spec.taints):
            raise InvalidPlacementError(f"{gang.name}: host {host} fails the node constraints")
        if pods > snapshot.free_pods[h]:
            raise InvalidPlacementError(f"{gang.name}: host {host} is over its pod limit")
        for free, need, what in (
            (snapshot.free_gpus[h], gang.gpus_per_pod, "GPUs"),
            (snapshot.free_cpu[h], gang.cpu_milli_per_pod, "CPU"),
            (snapshot.free_mem[h], gang.memory_mib_per_pod, "memory"),
        ):
            if pods * need > free:
                raise InvalidPlacementError(f"{gang.name}: host {host} oversubscribed on {what}")
        for name, units in gang.extended_per_pod.items():
            if pods * units > snapshot.ext(name)[h]:
                raise InvalidPlacementError(f"{gang.name}: host {host} oversubscribed on {name}")
    hosts = [index[p.host] for p in sorted(placement.pods, key=lambda p: p.rank)]
    if gang.required_level is not None:
        try:
            level = fabric.index(gang.required_level)
        except UnknownLevelError as exc:
            raise InvalidPlacementError(f"{gang.name}: {exc}") from exc
        if len({fabric.domain[level][h] for h in hosts}) != 1:
            raise InvalidPlacementError(f"{gang.name}: spans more than one {gang.required_level}")
    _check_tp_groups(snapshot, gang, hosts)
    _check_rack_cap(snapshot, gang, hosts)


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
