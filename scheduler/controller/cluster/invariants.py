"""What must hold in any cluster rackwise schedules, checked from the API objects alone (used by
the kill test and `make soak`; written without the reconciler's code paths).

- no node holds more than its allocatable of any resource rackwise charges, or more pods than
  its `pods` allocatable (every non-finished pod counts, bound or reserved, whoever placed it);
- once the operator has settled, no gang is half bound: a TrainingJob's pods are either none,
  all of them unbound (waiting to be placed), or all of them bound."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scheduler.controller.cluster.resources import charge
from scheduler.controller.cluster.state import DONE, host_of
from scheduler.controller.config import OperatorConfig
from scheduler.controller.runtime.expect import owned_by
from scheduler.controller.runtime.quantity import mebi, milli, parse, whole

Obj = dict[str, Any]


@dataclass
class Report:
    oversubscribed: list[str] = field(default_factory=list)  # "node: resource used/allocatable"
    half_bound: list[str] = field(default_factory=list)  # job keys
    unplaced: list[str] = field(default_factory=list)  # jobs with no pod bound

    @property
    def violations(self) -> int:
        return len(self.oversubscribed) + len(self.half_bound)


def oversubscribed(nodes: list[Obj], pods: list[Obj], config: OperatorConfig) -> list[str]:
    used: dict[str, list[int]] = {}
    extended_used: dict[str, dict[str, int]] = {}
    for pod in pods:
        host = host_of(pod)
        if host is None or pod.get("status", {}).get("phase") in DONE:
            continue
        c = charge(pod.get("spec") or {}, config.gpu_resource)
        total = used.setdefault(host, [0, 0, 0, 0])
        for i, value in enumerate((c.gpus, c.cpu_milli, c.memory_mib, 1)):
            total[i] += value
        for name, units in c.extended.items():
            ext = extended_used.setdefault(host, {})
            ext[name] = ext.get(name, 0) + units
    out = []
    for node in nodes:
        name = node["metadata"]["name"]
        allocatable = node.get("status", {}).get("allocatable") or {}
        limits = (  # what the node offers, rounded down as the scheduler reads it
            whole(parse(allocatable.get(config.gpu_resource, 0)), up=False),
            milli(parse(allocatable.get("cpu", 0)), up=False),
            mebi(parse(allocatable.get("memory", 0)), up=False),
            whole(parse(allocatable.get("pods", 110)), up=False),
        )
        for what, have, limit in zip(
            ("gpus", "cpu", "memory", "pods"), used.get(name, []), limits, strict=False
        ):
            if have > limit:
                out.append(f"{name}: {what} {have}/{limit}")
        for what, have in extended_used.get(name, {}).items():
            limit = whole(parse(allocatable.get(what, 0)), up=False)
            if have > limit:
                out.append(f"{name}: {what} {have}/{limit}")
    return out


def half_bound(jobs: list[Obj], pods: list[Obj]) -> tuple[list[str], list[str]]:
    """(jobs with some pods bound but not all of their pods; jobs with no pod bound)."""
    by_owner: dict[str, list[Obj]] = {}
    for pod in pods:
        uid = owned_by(pod)
        if uid is not None:
            by_owner.setdefault(uid, []).append(pod)
    partial, empty = [], []
    for job in jobs:
        meta = job["metadata"]
        name = f"{meta['namespace']}/{meta['name']}"
        mine = by_owner.get(meta["uid"], [])
        bound = sum(1 for p in mine if p["spec"].get("nodeName"))
        if not bound:
            empty.append(name)
        elif bound != len(mine) or len(mine) != _pods(job):
            partial.append(name)
    return partial, empty


def _pods(job: Obj) -> int:
    spec = job["spec"]
    return int(spec["replicas"]) + sum(int(r["replicas"]) for r in spec.get("roles") or [])


def check(nodes: list[Obj], pods: list[Obj], jobs: list[Obj], config: OperatorConfig) -> Report:
    partial, empty = half_bound(jobs, pods)
    return Report(oversubscribed(nodes, pods, config), partial, empty)
