"""Counting proofs: gangs that cannot start because their pods do not fit, known without a
solver call, on any view, for any shape of plain pods.

Contract. Takes a view (the free capacity a gang sees) and the plain pod requests of a pool's
queued shapes (`Fit`: GPUs, CPU, memory per pod and node constraints; a shape that groups its
pods, caps them per host or asks for extended resources is not plain). Decides, per request,
the room: the pods the view's up hosts of the pool that admit it can take, each as many as its
free GPUs, CPU, memory and pod slots allow. Promises: for a plain shape this is exactly
`Capacity.of(view, gang).total`, so a gang with more pods than its room is unplaceable on that
view (placement answers `explain(capacity)` before any engine runs), whatever placement policy
decides. A view with hosts held from it (reservations, pins) is the view of its version with
those hosts down: its room is that view's less what the held hosts take (`held_room`), so each
version of a cycle counts its hosts once. Why it exists: the queue's memo (memo.py) knows a
failure only on the very view it was found on, and every start or end changes the view; a
count holds on each view anew, so a quiet walk passes over the gangs it proves blocked instead
of trying each once per view."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scheduler.model.constraints import NodeConstraints
from scheduler.model.gang import GangRequest
from scheduler.placement.capacity import UNLIMITED
from scheduler.placement.snapshot import Array, Bools, Snapshot
from scheduler.topology.fabric import Fabric

NOT_PLAIN = -1


@dataclass(frozen=True)
class Fit:
    """What one pod asks of a host, for a gang whose pods fit one by one."""

    gpus: int
    cpu_milli: int
    memory_mib: int
    constraints: NodeConstraints


def fit_of(gang: GangRequest) -> Fit | None:
    """Its pods' request when they fit one by one (None: the shape groups or caps them)."""
    grouped = gang.slices or gang.preferred_slices or gang.tp_pods > 1
    capped = gang.max_pods_per_host is not None or any(gang.extended_per_pod.values())
    if grouped or capped:
        return None
    return Fit(gang.gpus_per_pod, gang.cpu_milli_per_pod, gang.memory_mib_per_pod, gang.constraints)


@dataclass
class Fits:
    """The plain requests of each pool's shapes, each given an index within its pool, and per
    shape id its request's index (NOT_PLAIN: none)."""

    by_pool: dict[str, list[Fit]] = field(default_factory=dict)
    index: dict[tuple[str, Fit], int] = field(default_factory=dict)
    of_shape: Array = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    tables: dict[str, Table] = field(default_factory=dict)  # per pool (`table`)
    version: int = 0  # moves whenever `of_shape` changes (what is kept from it is read again)

    def shape(self, shape: int, pool: str, gang: GangRequest) -> None:
        """A shape id given to a gang of this pool (again, when the id is reused)."""
        if shape >= len(self.of_shape):
            grown = np.full(max(2 * len(self.of_shape), shape + 1), NOT_PLAIN, dtype=np.int64)
            grown[: len(self.of_shape)] = self.of_shape
            self.of_shape = grown
        fit = fit_of(gang)
        index = NOT_PLAIN if fit is None else self._index(pool, fit)
        if self.of_shape[shape] != index:
            self.of_shape[shape] = index
            self.version += 1

    def table(self, pool: str, fabric: Fabric) -> Table:
        """The pool's requests' Table, read again when the fabric or the requests change."""
        fits = self.by_pool.get(pool, [])
        found = self.tables.get(pool)
        if found is None or found.fabric is not fabric or found.size != len(fits):
            found = self.tables[pool] = Table.of(fabric, fits)
        return found

    def _index(self, pool: str, fit: Fit) -> int:
        found = self.index.get((pool, fit))
        if found is None:
            fits = self.by_pool.setdefault(pool, [])
            found = self.index[(pool, fit)] = len(fits)
            fits.append(fit)
        return found


def room(view: Snapshot, pool: str, fits: list[Fit], table: Table | None = None) -> Array:
    """Per request: the pods the pool's up hosts admitting it can take on this view (`table`:
    as `per_host` takes it)."""
    return np.asarray(per_host(view, pool, fits, table).sum(axis=1), dtype=np.int64)


@dataclass(frozen=True)
class Table:
    """What a list of requests asks, read once per fabric and length of the list: per resource
    (GPUs, CPU, memory) that any of them asks, its column, each request's need (at least 1) and
    whether it asks; and which hosts admit each request."""

    fabric: Fabric
    size: int
    needs: list[tuple[int, Array, Bools | None]]  # None: every request asks for it
    admits: Bools  # request x host

    @staticmethod
    def of(fabric: Fabric, fits: list[Fit]) -> Table:
        needs: list[tuple[int, Array, Bools | None]] = []
        for column in range(3):
            need = np.array([(f.gpus, f.cpu_milli, f.memory_mib)[column] for f in fits])
            if need.any():  # asked by none of them (CPU and memory, on many traces): skipped
                asks = need > 0
                needs.append((column, np.maximum(need, 1)[:, None], None if asks.all() else asks))
        admits = np.array([fabric.admits(f.constraints) for f in fits], dtype=np.bool_)
        return Table(fabric, len(fits), needs, admits.reshape(len(fits), len(fabric.hosts)))


def per_host(view: Snapshot, pool: str, fits: list[Fit], table: Table | None = None) -> Array:
    """Per request and host: the pods the host takes (0 off the pool, down or not admitting).
    `table`: the requests' Table on the view's fabric, when kept (`Fits.table`)."""
    if not fits:
        return np.zeros((0, len(view.free_pods)), dtype=np.int64)
    if table is None:
        table = Table.of(view.fabric, fits)
    # one row, widened to a row per request by the first operation that meets the table's
    pods: Array = view.free_pods[None, :]
    free = (view.free_gpus, view.free_cpu, view.free_mem)
    for column, need, asks in table.needs:
        per = free[column][None, :] // need
        pods = np.minimum(pods, per if asks is None else np.where(asks[:, None], per, UNLIMITED))
    usable = view.pool_up(pool)
    # an overcommitted host (negative free) takes no pods; it takes none away either
    return np.asarray(np.maximum(pods, 0) * (table.admits & usable), dtype=np.int64)


def held_room(pods: Array, room: Array, held: frozenset[int]) -> Array:
    """The room of a view that is `pods`' view with the `held` hosts down: what they took out
    (a host counts once; one down already or off the pool took nothing)."""
    if not held:
        return room
    return np.asarray(room - pods[:, sorted(held)].sum(axis=1), dtype=np.int64)
