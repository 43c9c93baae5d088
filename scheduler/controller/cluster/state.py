"""Cluster state from the API objects: the fabric from node labels, free capacity from every
pod bound (or being bound) to a node, whichever scheduler put it there.

A node is in the fabric only if it carries the pool label and every required level label (by
default the rack): rackwise never
guesses where an unlabelled node sits or which pool it serves. Each pod is charged what
Kubernetes charges it (init containers, sidecars, overhead), so capacity is never overstated."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.controller.cluster.ledger import Ledger
from scheduler.controller.cluster.resources import extended_names
from scheduler.controller.config import OperatorConfig
from scheduler.controller.runtime.objects import Node, Pod
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


# taints the node lifecycle controller keeps in step with a node's health (not-ready,
# unreachable, unschedulable, memory pressure, ...): they say "down for now", not what the host
# is, so they make the host down instead of being part of the fabric (which would change, and
# make gangs NeverFits, at every flap)
CONDITION_TAINTS = "node.kubernetes.io/"
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def schedulable(node: Node) -> bool:
    """Takes new pods: ready, not cordoned, and no condition taint keeps pods off."""
    held = any(
        t.key.startswith(CONDITION_TAINTS) and t.effect in BLOCKING_EFFECTS for t in node.taints
    )
    return node.ready and not node.unschedulable and not held


def charged(pod: Pod, index: Mapping[str, int]) -> bool:
    """Bound (or being bound) to a host of the fabric and not finished: its node's capacity
    is charged for it, whoever placed it."""
    return pod.node is not None and pod.node in index and pod.phase not in DONE


@dataclass
class ClusterState:
    fabric: Fabric
    snapshot: Snapshot
    ready: set[str]  # Ready nodes in the fabric (cordoned ones included)
    excluded: dict[str, str] = field(default_factory=dict)  # node -> why it is left out
    # node -> why it offers no GPUs although labelled as having some (DRA): see dra_only
    notes: dict[str, str] = field(default_factory=dict)


def dra_only(node: Node, resource: str) -> str | None:
    """Why a node in the fabric offers no GPUs to rackwise although GPU feature discovery
    labels it as having them (`<resource>.present: "true"` or `<resource>.count` above 0): its
    GPUs are offered only through DRA (resource slices, or a device class's extended resource,
    1.34+), not as the allocatable rackwise counts. None when the labels say no such thing
    (asked only of nodes the fabric counts no GPU on)."""
    labels = node.meta.labels
    count = labels.get(f"{resource}.count", "")
    if not (labels.get(f"{resource}.present") == "true" or (count.isdigit() and int(count))):
        return None
    return (
        f"labelled as having GPUs ({resource}.present / {resource}.count) but no allocatable "
        f"{resource}: its GPUs are offered only through DRA, which rackwise does not allocate; "
        "it counts 0 GPUs here"
    )


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
        self._read: dict[str, tuple[str, Obj]] = {}  # node -> (its resourceVersion, entry)
        self.ledger = Ledger(config.gpu_resource)

    def entries(self, nodes: list[Node]) -> tuple[list[Obj], dict[str, str]]:
        entries, excluded = [], {}
        for node in sorted(nodes, key=lambda n: n.name):
            try:
                entries.append(self._entry_of(node))
            except NodeError as exc:
                excluded[node.name] = str(exc)
        names = {n.name for n in nodes}
        self._read = {n: kept for n, kept in self._read.items() if n in names}
        return entries, excluded

    def _entry_of(self, node: Node) -> Obj:
        """A node's entry, read again only when the node changed (its resourceVersion)."""
        version = node.meta.version
        kept = self._read.get(node.name)
        if version and kept is not None and kept[0] == version:
            return kept[1]
        entry = self._entry(node)
        self._read[node.name] = (version, entry)
        return entry

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

    def _entry(self, node: Node) -> Obj:
        labels = dict(node.meta.labels)
        for what, label in self._required:
            if label not in labels:
                raise NodeError(f"no {what} label {label}: rackwise does not schedule onto it")
        pool = labels[self.config.labels.pool]
        if pool not in self.config.pool_names:
            pools = ", ".join(self.config.pool_names)
            raise NodeError(f"pool {pool!r} is not one of the operator's pools ({pools})")
        allocatable = node.allocatable
        try:
            return {
                "name": node.name,
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

    def build(self, nodes: list[Node], pods: Iterable[Pod]) -> ClusterState | None:
        entries, excluded = self.entries(nodes)
        if not entries:
            return None
        fabric = self.fabric(entries)
        index = fabric.host_index
        counted = ((str(pod.node), pod) for pod in pods if charged(pod, index))
        snapshot = self.ledger.update(fabric, counted)
        in_fabric = [n for n in nodes if n.name in index]
        ready = {n.name for n in in_fabric if n.ready}
        open_ = {n.name for n in in_fabric if schedulable(n)}
        snapshot.down.update(index[n] for n in index if n not in open_)
        gpus, resource = fabric.gpus, self.config.gpu_resource
        notes = {
            n.name: note
            for n in in_fabric
            if not gpus[index[n.name]] and (note := dra_only(n, resource)) is not None
        }
        return ClusterState(fabric, snapshot, ready, excluded, notes)


def _taints(node: Node) -> tuple[Taint, ...]:
    effects = set(TaintEffect.__members__.values())
    return tuple(
        Taint(key=t.key, value=t.value, effect=TaintEffect(t.effect))
        for t in node.taints
        # a condition taint is health, not identity: `schedulable` counts it
        if t.key and not t.key.startswith(CONDITION_TAINTS) and t.effect in effects
    )
