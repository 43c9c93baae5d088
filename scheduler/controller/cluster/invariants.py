"""What must hold in any cluster rackwise schedules, checked from the API objects alone (used by
the kill test and `make soak`; written without the reconciler's code paths).

- no node holds more than its allocatable of any resource rackwise charges, or more pods than
  its `pods` allocatable (every non-finished pod counts, bound or reserved, whoever placed it);
- once the operator has settled, no gang is half bound: a TrainingJob's pods are either none,
  all of them unbound (waiting to be placed), or all of them bound.

It takes the objects as an API client lists them and reads them through their typed views
(runtime/objects.py), as the operator does."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scheduler.controller.cluster.resources import pod_charge
from scheduler.controller.config import OperatorConfig
from scheduler.controller.runtime.objects import Node, Pod, TrainingJob
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
    for pod in map(Pod.of, pods):
        host = pod.node
        if host is None or pod.done:
            continue
        c = pod_charge(pod, config.gpu_resource)
        total = used.setdefault(host, [0, 0, 0, 0])
        for i, value in enumerate((c.gpus, c.cpu_milli, c.memory_mib, 1)):
            total[i] += value
        for name, units in c.extended.items():
            ext = extended_used.setdefault(host, {})
            ext[name] = ext.get(name, 0) + units
    out = []
    for node in map(Node.of, nodes):
        name, allocatable = node.name, node.allocatable
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
    by_owner: dict[str, list[Pod]] = {}
    for pod in map(Pod.of, pods):
        uid = pod.owner_job
        if uid is not None:
            by_owner.setdefault(uid, []).append(pod)
    partial, empty = [], []
    for job in map(TrainingJob.of, jobs):
        mine = by_owner.get(job.meta.uid, [])
        bound = sum(1 for p in mine if p.node)
        if not bound:
            empty.append(job.key)
        elif bound != len(mine) or len(mine) != job.pods_asked:
            partial.append(job.key)
    return partial, empty


def check(nodes: list[Obj], pods: list[Obj], jobs: list[Obj], config: OperatorConfig) -> Report:
    partial, empty = half_bound(jobs, pods)
    return Report(oversubscribed(nodes, pods, config), partial, empty)
