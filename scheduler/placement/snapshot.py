"""Free capacity at one instant, over a fabric. Mutable on purpose: the simulator and the
controller apply and release placements thousands of times; `place()` never mutates it.
Free resources are numpy arrays so that per-gang capacity is one vectorised pass."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from scheduler.model.gang import GangRequest
from scheduler.model.placement import Placement
from scheduler.model.topology import Tier
from scheduler.topology.fabric import Fabric

Array = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
FEW_PODS = 8  # up to this many pods a placement is applied element by element (apply_rows)


def run_starts(values: Array) -> Bools:
    """Per position of a non-empty array: whether it starts a run of equal values. np.r_
    would say it in one line, at several times the cost on the hot paths that ask."""
    out = np.empty(len(values), dtype=np.bool_)
    out[0] = True
    np.not_equal(values[1:], values[:-1], out=out[1:])
    return out


def _array(values: Sequence[int] | Array | None, default: Callable[[], Sequence[int]]) -> Array:
    """The given values, or the default (built only when needed: copies are frequent)."""
    return np.array(default() if values is None or len(values) == 0 else values, dtype=np.int64)


@dataclass(frozen=True)
class Usage:
    """What a placed gang takes, pod by pod, read once (the queue releases the same running
    gangs cycle after cycle): host indexes and the (GPU, CPU, memory) rows."""

    at: Array  # one host index per pod
    amounts: Array  # one row per pod: GPUs, CPU millicores, memory MiB
    extended: dict[str, tuple[Array, Array]]  # name -> (hosts, units), pods that take any


def usage_of(fabric: Fabric, gang: GangRequest, placement: Placement) -> Usage:
    index = fabric.host_index
    if not gang.roles:  # every pod asks the same (a start and an end each read it)
        return _one_request(gang, [index[pod.host] for pod in placement.pods])
    roles = placement.roles()
    by_role = {role: gang.request(role) for role in roles}
    hosts = tuple(index[pod.host] for pod in placement.pods)
    rows = [by_role[pod.role] for pod in placement.pods]
    extended: dict[str, list[tuple[int, int]]] = {}
    for h, r in zip(hosts, rows, strict=True):
        for name, units in r.extended.items():
            extended.setdefault(name, []).append((h, units))
    return Usage(
        np.asarray(hosts, dtype=np.int64),
        np.asarray([(r.gpus, r.cpu_milli, r.memory_mib) for r in rows], dtype=np.int64).reshape(
            -1, 3
        ),
        {name: _columns(pairs) for name, pairs in extended.items()},
    )


def _one_request(gang: GangRequest, hosts: list[int]) -> Usage:
    """The usage of pods that all ask the workers' request: one row repeated."""
    r = gang.request()
    at = np.asarray(hosts, dtype=np.int64)
    row = np.array([r.gpus, r.cpu_milli, r.memory_mib], dtype=np.int64)
    units = list(r.extended.items()) if hosts else []  # as asked, zeros included
    extended = {name: (at, np.full(len(at), n, dtype=np.int64)) for name, n in units}
    return Usage(at, np.tile(row, (len(at), 1)), extended)


def _columns(pairs: list[tuple[int, int]]) -> tuple[Array, Array]:
    table = np.asarray(pairs, dtype=np.int64)
    return table[:, 0], table[:, 1]


@dataclass
class Snapshot:
    fabric: Fabric
    free_gpus: Array = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    free_cpu: Array = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    free_mem: Array = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # pods each host may still take (the node's `pods` allocatable less what runs there)
    free_pods: Array = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # hosts that take no new pods (cordoned, failed, not ready)
    down: set[int] = field(default_factory=set)
    # extended resource -> free units per host (0 where a host has none)
    free_ext: dict[str, Array] = field(default_factory=dict)
    # pool -> hosts of other pools lent to it now (queue/lending.py): its gangs may use them
    lent: dict[str, frozenset[int]] = field(default_factory=dict)
    # level (rack and above) -> per domain, the running gangs whose traffic crosses its uplink
    # (placement/uplinks.py), asked for only when a placement weighs it; None: not known
    uplinks: Callable[[], dict[int, Array]] | None = None

    def __post_init__(self) -> None:
        hosts = self.fabric.hosts
        self.free_gpus = _array(self.free_gpus, lambda: [h.gpus for h in hosts])
        self.free_cpu = _array(self.free_cpu, lambda: [h.cpu_milli for h in hosts])
        self.free_mem = _array(self.free_mem, lambda: [h.memory_mib for h in hosts])
        self.free_pods = _array(self.free_pods, lambda: [h.max_pods for h in hosts])
        for name in self.fabric.extended_names:  # copies bring theirs: nothing to build
            if name not in self.free_ext:
                self.free_ext[name] = np.array(
                    [h.extended.get(name, 0) for h in hosts], dtype=np.int64
                )

    def copy(self) -> Snapshot:
        # the four columns go uncopied: __post_init__ copies them (np.array), and a copy made
        # here as well copied each twice
        return Snapshot(
            self.fabric,
            self.free_gpus,
            self.free_cpu,
            self.free_mem,
            self.free_pods,
            set(self.down),
            {r: free.copy() for r, free in self.free_ext.items()},
            dict(self.lent),
            self.uplinks,
        )

    def use(
        self,
        host: str,
        gpus: int,
        cpu_milli: int = 0,
        memory_mib: int = 0,
        pods: int = 0,
        extended: Mapping[str, int] | None = None,
    ) -> None:
        """Record usage by a workload this scheduler did not place (e.g. a state file)."""
        h = self.fabric.host_index[host]
        self.free_gpus[h] -= gpus
        self.free_cpu[h] -= cpu_milli
        self.free_mem[h] -= memory_mib
        self.free_pods[h] -= pods
        for name, units in (extended or {}).items():
            self.ext(name)[h] -= units

    def ext(self, name: str) -> Array:
        """Free units of an extended resource per host (a column of zeros if none has it)."""
        if name not in self.free_ext:
            self.free_ext[name] = np.zeros(len(self.fabric.hosts), dtype=np.int64)
        return self.free_ext[name]

    def apply(self, gang: GangRequest, placement: Placement, sign: int = 1) -> None:
        """Take (sign=1) or give back (sign=-1) the resources of a placed gang."""
        self.apply_many([(gang, placement)], sign)

    def apply_many(self, placed: Sequence[tuple[GangRequest, Placement]], sign: int = 1) -> None:
        """Several gangs at once, in one vectorised pass (the queue releases hundreds)."""
        self.apply_usages([usage_of(self.fabric, g, p) for g, p in placed], sign)

    def apply_usages(self, usages: Sequence[Usage], sign: int = 1) -> None:
        """What several placed gangs take (usage_of), taken or given back in one pass."""
        usages = [u for u in usages if len(u.at)]
        if not usages:
            return
        at = np.concatenate([u.at for u in usages])
        self.apply_rows(at, np.concatenate([u.amounts for u in usages]), sign)
        for u in usages:
            for name, (hosts, units) in u.extended.items():
                np.subtract.at(self.ext(name), hosts, units * sign)

    def apply_rows(self, at: Array, amounts: Array, sign: int = 1) -> None:
        """Pods on hosts `at`, each taking its row of `amounts` (GPUs, CPU, memory) and a pod
        slot; extended resources are not in the rows."""
        if len(at) <= FEW_PODS:  # one element at a time: a ufunc's .at costs ~2 us a call
            columns = (self.free_gpus, self.free_cpu, self.free_mem)
            for h, row in zip(at.tolist(), amounts.tolist(), strict=True):
                for column, amount in zip(columns, row, strict=True):
                    column[h] -= amount * sign
                self.free_pods[h] -= sign
            return
        amounts = amounts * sign
        np.subtract.at(self.free_gpus, at, amounts[:, 0])
        np.subtract.at(self.free_cpu, at, amounts[:, 1])
        np.subtract.at(self.free_mem, at, amounts[:, 2])
        np.subtract.at(self.free_pods, at, sign)

    def release(self, gang: GangRequest, placement: Placement) -> None:
        self.apply(gang, placement, sign=-1)

    def is_empty(self, h: int) -> bool:
        return bool(self.free_gpus[h] == self.fabric.gpus[h])

    def busy_racks(self) -> set[int]:
        """Racks with anything running: the others are kept whole for large gangs."""
        busy = self.free_gpus != self.fabric.gpus
        return set(np.unique(self.fabric.columns[Tier.RACK][busy]).tolist())

    def up_mask(self) -> Bools:
        mask = np.ones(len(self.fabric.hosts), dtype=bool)
        if self.down:
            mask[list(self.down)] = False
        return mask

    def pool_hosts(self, pool: str) -> Bools:
        """The hosts a gang of this pool may use: its own, and any lent to it now."""
        mask = self.fabric.pool_mask.get(pool)
        own = np.zeros(len(self.fabric.hosts), dtype=bool) if mask is None else mask
        lent = self.lent.get(pool)
        if not lent:
            return own
        out = own.copy()
        out[list(lent)] = True
        return out

    def pool_up(self, pool: str) -> Bools:
        """The up hosts a gang of this pool may use now (`pool_hosts`, less those down)."""
        return self.pool_hosts(pool) & self.up_mask()

    def free_by_pool(self) -> Mapping[str, int]:
        up = self.up_mask()
        return {
            pool: int(self.free_gpus[mask & up].sum())
            for pool, mask in self.fabric.pool_mask.items()
        }


def random_occupancy(fabric: Fabric, busy: float, seed: int) -> Snapshot:
    """Each GPU taken with probability `busy`, independently (seeded): a fragmented cluster for
    tests and benchmarks."""
    snapshot = Snapshot(fabric)
    rng = random.Random(seed)
    for h, host in enumerate(fabric.hosts):
        snapshot.free_gpus[h] = sum(rng.random() >= busy for _ in range(host.gpus))
    return snapshot
