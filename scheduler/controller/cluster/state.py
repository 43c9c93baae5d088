"""Cluster state from the API objects: the fabric from node labels, free capacity from every
pod bound (or being bound) to a node, whichever scheduler put it there.

A node is in the fabric only if it carries the pool label and every required level label (by
default the rack): rackwise never
guesses where an unlabelled node sits or which pool it serves. Each pod is charged what
Kubernetes charges it (init containers, sidecars, overhead), so capacity is never overstated."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from scheduler.controller.cluster.ledger import Ledger
from scheduler.controller.cluster.resources import extended_names
from scheduler.controller.config import OperatorConfig
from scheduler.controller.runtime.quantity import QuantityError, mebi, milli, parse, whole
from scheduler.model.constraints import Taint, TaintEffect
from scheduler.placement import Snapshot
from scheduler.topology import Fabric, from_node_labels
from scheduler.topology.sources import HOSTNAME

Obj = dict[str, Any]
JOB_LABEL = "rackwise.io/job"
DONE = ("Succeeded", "Failed")


class NodeError(ValueError):
    """A node rackwise leaves out of the fabric; the message says why."""


def node_ready(node: Obj) -> bool:
    conditions = node.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


# taints the node lifecycle controller keeps in step with a node's health (not-ready,
# unreachable, unschedulable, memory pressure, ...): they say "down for now", not what the host
# is, so they make the host down instead of being part of the fabric (which would change, and
# make gangs NeverFits, at every flap)
CONDITION_TAINTS = "node.kubernetes.io/"
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def schedulable(node: Obj) -> bool:
    """Takes new pods: ready, not cordoned, and no condition taint keeps pods off."""
    spec = node.get("spec", {})
    held = any(
        str(t.get("key", "")).startswith(CONDITION_TAINTS) and t.get("effect") in BLOCKING_EFFECTS
        for t in spec.get("taints") or []
    )
    return node_ready(node) and not spec.get("unschedulable") and not held


def host_of(pod: Obj) -> str | None:
    """The node a pod holds capacity on: the one it is bound to (an unbound pod holds none)."""
    node = pod.get("spec", {}).get("nodeName")
    return str(node) if node else None


@dataclass
class ClusterState:
    fabric: Fabric
    snapshot: Snapshot
    ready: set[str]  # Ready nodes in the fabric (cordoned ones included)
    excluded: dict[str, str] = field(default_factory=dict)  # node -> why it is left out


class StateBuilder:
    """The cluster each cycle: the fabric rebuilt only when nodes' shape changes, the free
    capacity kept up to date pod by pod (cluster/ledger.py)."""

    def __init__(self, config: OperatorConfig) -> None:
        self.config = config
        # (what, label) every node must carry: the pool, and each required level
        self._required = [("pool", config.labels.pool)] + [
            (lv.name, lv.label)
            for lv in config.levels
            if not (lv.optional or lv.nvlink) and lv.label != HOSTNAME
        ]
        self._key: tuple[Any, ...] | None = None
        self._fabric: Fabric | None = None
        self.ledger = Ledger(config.gpu_resource)

    def entries(self, nodes: list[Obj]) -> tuple[list[Obj], dict[str, str]]:
        entries, excluded = [], {}
        for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
            try:
                entries.append(self._entry(node))
            except NodeError as exc:
                excluded[node["metadata"]["name"]] = str(exc)
        return entries, excluded

    def fabric(self, entries: list[Obj]) -> Fabric:
        key = tuple(
            (
                e["name"],
                e["gpus"],
                e["cpu_milli"],
                e["memory_mib"],
                e["max_pods"],
                e["taints"],
                tuple(sorted(e["labels"].items())),
                tuple(sorted(e["extended"].items())),
            )
            for e in entries
        )
        if key != self._key or self._fabric is None:
            levels = self.config.levels
            self._fabric = Fabric(from_node_labels(entries, levels, self.config.labels.pool))
            self._key = key
        return self._fabric

    def _entry(self, node: Obj) -> Obj:
        labels = node["metadata"].get("labels") or {}
        for what, label in self._required:
            if label not in labels:
                raise NodeError(f"no {what} label {label}: rackwise does not schedule onto it")
        pool = labels[self.config.labels.pool]
        if pool not in self.config.pool_names:
            pools = ", ".join(self.config.pool_names)
            raise NodeError(f"pool {pool!r} is not one of the operator's pools ({pools})")
        allocatable = node.get("status", {}).get("allocatable") or {}
        try:
            return {
                "name": node["metadata"]["name"],
                "labels": labels,
                # capacity rounds down, never up: a node offers no more than it has
                "gpus": whole(parse(allocatable.get(self.config.gpu_resource, 0)), up=False),
                "cpu_milli": milli(parse(allocatable.get("cpu", 0)), up=False),
                "memory_mib": mebi(parse(allocatable.get("memory", 0)), up=False),
                "max_pods": whole(parse(allocatable.get("pods", 110)), up=False),
                "extended": {
                    n: whole(parse(allocatable[n]), up=False)
                    for n in extended_names(allocatable, self.config.gpu_resource)
                },
                "taints": _taints(node),
            }
        except QuantityError as exc:
            raise NodeError(f"unreadable allocatable: {exc}") from exc

    def build(self, nodes: list[Obj], pods: Iterable[Obj]) -> ClusterState | None:
        entries, excluded = self.entries(nodes)
        if not entries:
            return None
        fabric = self.fabric(entries)
        index = fabric.host_index
        counted = (
            (node, pod)
            for pod in pods
            if (node := host_of(pod)) in index and pod.get("status", {}).get("phase") not in DONE
        )
        snapshot = self.ledger.update(fabric, counted)
        in_fabric = [n for n in nodes if n["metadata"]["name"] in index]
        ready = {n["metadata"]["name"] for n in in_fabric if node_ready(n)}
        open_ = {n["metadata"]["name"] for n in in_fabric if schedulable(n)}
        snapshot.down.update(index[n] for n in index if n not in open_)
        return ClusterState(fabric, snapshot, ready, excluded)


def _taints(node: Obj) -> tuple[Taint, ...]:
    out = []
    for taint in node.get("spec", {}).get("taints") or []:
        effect = taint.get("effect")
        key = str(taint.get("key") or "")
        if key.startswith(CONDITION_TAINTS):
            continue  # health, not identity: `schedulable` counts it
        if effect in TaintEffect.__members__.values() and key:
            out.append(
                Taint(key=taint["key"], value=taint.get("value") or "", effect=TaintEffect(effect))
            )
    return tuple(out)
