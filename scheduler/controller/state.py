"""Cluster state from the API objects: the fabric from node labels, free capacity from every
pod bound (or being bound) to a node, whichever scheduler put it there."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kubernetes.utils import parse_quantity

from scheduler.controller.config import OperatorConfig
from scheduler.placement import Snapshot
from scheduler.topology import Fabric, from_node_labels

Obj = dict[str, Any]
NODE_ANNOTATION = "rackwise.io/node"
JOB_LABEL = "rackwise.io/job"
DONE = ("Succeeded", "Failed")


MI = 1 << 20


def quantity(value: Any, multiply: int = 1, divide: int = 1) -> int:
    """A Kubernetes quantity ("500m", "32Gi", 4) as an integer in the caller's unit."""
    if value in (None, ""):
        return 0
    return int(parse_quantity(str(value)) * multiply / divide)


def node_ready(node: Obj) -> bool:
    if node.get("spec", {}).get("unschedulable"):
        return False
    conditions = node.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def host_of(pod: Obj) -> str | None:
    """The node a pod holds capacity on: bound, or reserved by rackwise mid-binding."""
    node = pod.get("spec", {}).get("nodeName")
    return node or (pod["metadata"].get("annotations") or {}).get(NODE_ANNOTATION)


@dataclass
class ClusterState:
    fabric: Fabric
    snapshot: Snapshot
    ready: set[str]


class StateBuilder:
    """Rebuilds the snapshot every cycle; the fabric only when nodes' shape changes."""

    def __init__(self, config: OperatorConfig) -> None:
        self.config = config
        self._key: tuple[Any, ...] | None = None
        self._fabric: Fabric | None = None

    def fabric(self, nodes: list[Obj]) -> Fabric:
        entries = [self._entry(n) for n in sorted(nodes, key=lambda n: n["metadata"]["name"])]
        key = tuple(
            (
                e["name"],
                e["gpus"],
                e["cpu_milli"],
                e["memory_mib"],
                tuple(sorted(e["labels"].items())),
            )
            for e in entries
        )
        if key != self._key or self._fabric is None:
            self._fabric = Fabric(from_node_labels(entries, self.config.labels))
            self._key = key
        return self._fabric

    def _entry(self, node: Obj) -> Obj:
        allocatable = node.get("status", {}).get("allocatable") or {}
        return {
            "name": node["metadata"]["name"],
            "labels": node["metadata"].get("labels") or {},
            "gpus": quantity(allocatable.get(self.config.gpu_resource)),
            "cpu_milli": quantity(allocatable.get("cpu"), 1000),
            "memory_mib": quantity(allocatable.get("memory"), divide=MI),
        }

    def build(self, nodes: list[Obj], pods: Iterable[Obj]) -> ClusterState | None:
        if not nodes:
            return None
        fabric = self.fabric(nodes)
        snapshot = Snapshot(fabric)
        index = fabric.host_index
        for pod in pods:
            node = host_of(pod)
            if node in index and pod.get("status", {}).get("phase") not in DONE:
                gpus, cpu, memory = self.requests(pod)
                snapshot.use(node, gpus, cpu, memory)
        ready = {n["metadata"]["name"] for n in nodes if node_ready(n)}
        snapshot.down.update(index[n] for n in index if n not in ready)
        return ClusterState(fabric, snapshot, ready)

    def requests(self, pod: Obj) -> tuple[int, int, int]:
        gpus = cpu = memory = 0
        for container in pod.get("spec", {}).get("containers") or []:
            resources = container.get("resources") or {}
            wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
            gpus += quantity(wanted.get(self.config.gpu_resource))
            cpu += quantity(wanted.get("cpu"), 1000)
            memory += quantity(wanted.get("memory"), divide=MI)
        return gpus, cpu, memory
