"""Which nodes are lost, and the nodes rackwise leaves out, said once.

Contract. Each cycle `watch` takes every Node and the cluster state: a node not ready is noted
from the first cycle it is seen so (by the operator's clock), a node the state leaves out gets
one Warning event `NodeIgnored` per reason, and a node whose GPUs only DRA offers one
`GPUsOnlyThroughDRA`. `lost(node)` is true for a node that is gone, or
NotReady for longer than the grace period. Promises: a cordoned node is not lost; a node left
out keeps the pods already on it; what is kept is bounded by the nodes that exist."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.controller.cluster.state import ClusterState
from scheduler.controller.runtime.calls import Calls
from scheduler.controller.runtime.events import Recorder, node_ref
from scheduler.controller.runtime.objects import Node


@dataclass
class NodeWatch:
    clock: Callable[[], float]
    grace_s: float
    calls: Calls
    recorder: Recorder
    not_ready_since: dict[str, float] = field(default_factory=dict)  # node -> first NotReady
    noted: set[tuple[str, str]] = field(default_factory=set)  # (node, reason) reported
    names: set[str] = field(default_factory=set)  # every Node seen in the last cycle

    def watch(self, nodes: list[Node], state: ClusterState | None) -> None:
        now = self.clock()
        ready = state.ready if state else set()
        names: set[str] = set()
        for node in nodes:
            name = node.name
            names.add(name)
            if name in ready:
                self.not_ready_since.pop(name, None)
            else:
                self.not_ready_since.setdefault(name, now)
            if state is not None:
                self._note(node, "NodeIgnored", state.excluded.get(name))
                self._note(node, "GPUsOnlyThroughDRA", state.notes.get(name))
        self.names = names
        self.not_ready_since = {n: t for n, t in self.not_ready_since.items() if n in names}
        self.noted = {(n, r) for n, r in self.noted if n in names}

    def _note(self, node: Node, reason: str, message: str | None) -> None:
        """One Warning event per node and message."""
        if message and (node.name, message) not in self.noted:
            self.noted.add((node.name, message))
            ref = node_ref(node)
            self.calls.attempt(self.recorder.record, ref, "Warning", reason, message)

    def lost(self, node: str | None) -> bool:
        if node is None or node not in self.names:
            return True
        since = self.not_ready_since.get(node)
        return since is not None and self.clock() - since > self.grace_s
