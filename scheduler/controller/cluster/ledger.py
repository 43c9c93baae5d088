"""What every pod counted against a node holds, kept from one cycle to the next (the
incremental snapshot): a cycle reads again only the pods that came, went, moved or changed.

Contract. Takes, each cycle, the fabric and the pods that hold capacity on one of its nodes
(bound or being bound, not finished), each with its node. Keeps a base snapshot charged with
exactly those pods, each as Kubernetes counts it (init containers, sidecars, overhead); a new
fabric starts it again from nothing. Promises: the snapshot it returns equals one charged from
scratch with the same pods; a pod whose resources cannot be read leaves its node full for as
long as it is there (the API server validated it, so this should not happen)."""

from __future__ import annotations

from collections.abc import Iterable

import structlog

from scheduler.controller.cluster.resources import Charge, pod_charge
from scheduler.controller.runtime.objects import Pod
from scheduler.controller.runtime.quantity import QuantityError
from scheduler.placement import Snapshot
from scheduler.topology import Fabric

Signature = tuple[str, str]  # the node and the pod's resourceVersion
log = structlog.get_logger("rackwise")


class Ledger:
    def __init__(self, gpu_resource: str) -> None:
        self.gpu_resource = gpu_resource
        self.fabric: Fabric | None = None
        self.base: Snapshot | None = None
        # pod key -> what it was charged for, and the charge (None: unreadable, node full)
        self.held: dict[str, tuple[Signature, Charge | None]] = {}

    def update(self, fabric: Fabric, pods: Iterable[tuple[str, Pod]]) -> Snapshot:
        """The free capacity once every (node, pod) given is charged."""
        base = self._base_for(fabric)
        seen: set[str] = set()
        for node, pod in pods:
            key = pod.meta.key
            seen.add(key)
            signature = (node, pod.meta.version)
            old = self.held.get(key)
            if old is not None and old[0] == signature:
                continue
            if old is not None:
                _take(base, old, -1)
            self.held[key] = new = (signature, self._read(pod, node))
            _take(base, new, 1)
        for key in self.held.keys() - seen:
            _take(base, self.held.pop(key), -1)
        snapshot = base.copy()
        for (node, _), used in self.held.values():
            if used is None:
                _fill(snapshot, node)
        return snapshot

    def _base_for(self, fabric: Fabric) -> Snapshot:
        if fabric is not self.fabric or self.base is None:
            self.fabric, self.base, self.held = fabric, Snapshot(fabric), {}
        return self.base

    def _read(self, pod: Pod, node: str) -> Charge | None:
        try:
            return pod_charge(pod, self.gpu_resource)
        except QuantityError as exc:
            log.error("unreadable pod resources", pod=pod.meta.name, node=node, error=str(exc))
            return None


def _take(base: Snapshot, held: tuple[Signature, Charge | None], sign: int) -> None:
    (node, _), used = held
    if used is None:  # an unreadable pod fills its node on each copy, never the base
        return
    extended = {name: units * sign for name, units in used.extended.items()}
    base.use(node, used.gpus * sign, used.cpu_milli * sign, used.memory_mib * sign, sign, extended)


def _fill(snapshot: Snapshot, node: str) -> None:
    h = snapshot.fabric.host_index[node]
    snapshot.free_gpus[h] = snapshot.free_cpu[h] = snapshot.free_mem[h] = 0
    snapshot.free_pods[h] = 0
    for free in snapshot.free_ext.values():
        free[h] = 0
