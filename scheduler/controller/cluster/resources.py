"""What a pod really holds on its node, in the snapshot's units, from its effective requests as
the kube-scheduler computes them (runtime/objects.requests: the app containers and the sidecars
for the pod's life, or the init phase's peak if larger, pod-level requests where set, plus the
pod's overhead)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from scheduler.controller.runtime.objects import Pod
from scheduler.controller.runtime.podrequests import requests
from scheduler.controller.runtime.quantity import MI, QuantityError, mebi, milli, whole

Obj = dict[str, Any]


# resources rackwise does not count per pod (node-level storage and huge pages are left to the
# kubelet); every other one that is not GPU, CPU, memory or the pod count is an extended one
NOT_COUNTED = ("ephemeral-storage", "storage")
BASE = ("cpu", "memory", "pods")


def extended_names(names: Iterable[str], gpu_resource: str) -> list[str]:
    """The extended resources among these resource names (whole-unit counts)."""
    return [
        n
        for n in names
        if n not in (*BASE, *NOT_COUNTED, gpu_resource) and not n.startswith("hugepages-")
    ]


@dataclass(frozen=True)
class Charge:
    """A pod's charge in the snapshot's units."""

    gpus: int
    cpu_milli: int
    memory_mib: int
    extended: dict[str, int] = field(default_factory=dict)

    def per_pod(self) -> dict[str, Any]:
        """The per-pod request fields of a GangRequest or a Role."""
        return {
            "gpus_per_pod": self.gpus,
            "cpu_milli_per_pod": self.cpu_milli,
            "memory_mib_per_pod": self.memory_mib,
            "extended_per_pod": self.extended,
        }


def charge(spec: Obj, gpu_resource: str) -> Charge:
    """The charge of a pod spec (one rackwise renders; QuantityError when unreadable)."""
    return charge_of(requests(spec), gpu_resource)


def pod_charge(pod: Pod, gpu_resource: str) -> Charge:
    """The charge of a pod as it is; QuantityError when its requests cannot be read."""
    if pod.requests is None:
        raise QuantityError(pod.unreadable)
    return charge_of(pod.requests, gpu_resource)


def charge_of(wanted: Mapping[str, Decimal], gpu_resource: str) -> Charge:
    return Charge(
        gpus=whole(wanted.get(gpu_resource, Decimal(0))),
        cpu_milli=milli(wanted.get("cpu", Decimal(0))),
        memory_mib=mebi(wanted.get("memory", Decimal(0))),
        extended={n: whole(wanted[n]) for n in extended_names(wanted, gpu_resource)},
    )


def requested(pods: Iterable[Pod], gpu_resource: str) -> tuple[int, int, int]:
    """What these pods ask of a queue's quota: GPUs, millicores, MiB (a pod whose requests
    cannot be read asks nothing: the capacity snapshot fills its node instead)."""
    readable = [p.requests for p in pods if p.requests is not None]
    gpus = sum(int(r.get(gpu_resource, 0)) for r in readable)
    cpu = sum(int(r.get("cpu", 0) * 1000) for r in readable)
    memory = sum(int(r.get("memory", 0) / MI) for r in readable)
    return gpus, cpu, memory
