"""Kubernetes Events, written sparingly: the caller records only a change of reason, and a reason
that comes back for the same object bumps the count and lastTimestamp of the event it had
before instead of writing a new one (as client-go's aggregating recorder does)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from scheduler.controller.runtime.gateway import API_VERSION
from scheduler.controller.runtime.objects import Meta, Node, Pod, TrainingJob
from scheduler.controller.runtime.status import now

Obj = dict[str, Any]


@dataclass(frozen=True)
class Ref:
    """The object an event is about (its involvedObject)."""

    api_version: str
    kind: str
    name: str
    namespace: str = ""  # "" for a cluster-scoped object
    uid: str = ""

    @classmethod
    def to(cls, meta: Meta, api_version: str, kind: str) -> Ref:
        return cls(api_version, kind, meta.name, meta.namespace, meta.uid)

    def body(self) -> Obj:
        out = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        return out | {k: v for k, v in (("namespace", self.namespace), ("uid", self.uid)) if v}


class EventSink(Protocol):
    def create_event(self, namespace: str, body: Obj) -> str: ...
    def patch_event(self, namespace: str, name: str, patch: Obj) -> None: ...


@dataclass
class Recorder:
    sink: EventSink
    instance: str
    # (object uid, reason) -> (event name, count)
    sent: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)

    def record(
        self, ref: Ref, kind: str, reason: str, message: str, about: str | None = None
    ) -> None:
        """An event about the object `ref` names (an involvedObject: see job_ref, node_ref);
        `about` keeps apart events on one object that are about different things."""
        namespace = ref.namespace or "default"
        key = (about or ref.uid, reason)
        stamp = now()
        if key in self.sent:
            name, count = self.sent[key]
            patch = {"count": count + 1, "lastTimestamp": stamp, "message": message[:1000]}
            self.sink.patch_event(namespace, name, patch)
            self.sent[key] = (name, count + 1)
            return
        body = self._body(ref, namespace, kind, reason, message, stamp)
        self.sent[key] = (self.sink.create_event(namespace, body), 1)

    def _body(
        self, ref: Ref, namespace: str, kind: str, reason: str, message: str, stamp: str
    ) -> Obj:
        return {
            "metadata": {"generateName": f"{ref.name}.", "namespace": namespace},
            "involvedObject": ref.body(),
            "type": kind,
            "reason": reason,
            "message": message[:1000],
            "source": {"component": "rackwise"},
            "reportingComponent": "rackwise",
            "reportingInstance": self.instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }

    def forget(self, live: set[str]) -> None:
        """Drop what is remembered of objects that are gone, so memory stays bounded."""
        self.sent = {k: v for k, v in self.sent.items() if k[0] in live}


def job_ref(job: TrainingJob) -> Ref:
    return Ref.to(job.meta, API_VERSION, "TrainingJob")


def pod_ref(pod: Pod) -> Ref:
    return Ref.to(pod.meta, "v1", "Pod")


def node_ref(node: Node) -> Ref:
    return Ref.to(node.meta, "v1", "Node")
