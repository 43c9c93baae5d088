"""Which namespaces the operator serves, and how the objects of the others are reported.

A TrainingJob or pod group is scheduled only in a namespace the operator may write to (it may
bind pods there: the RoleBinding of `rackwise-workloads`) and that the config does not protect
(`protectedNamespaces`: kube-system and the like, even if someone bound the role there). The
others are left alone, and said so where a user can see it: one event per object in the
operator's own namespace (an event must live in its object's namespace, where the operator may
not write), and the gauge `rackwise_ignored_objects{reason}`. Answers are kept `ttl_s` so a
RoleBinding added later takes effect without a restart; an access check that fails is not
kept (the object is tried, as before there was a check)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from scheduler.controller.config import OperatorConfig
from scheduler.controller.runtime.calls import Calls
from scheduler.controller.runtime.events import Recorder, Ref
from scheduler.controller.runtime.gateway import ApiError
from scheduler.controller.runtime.objects import TrainingJob
from scheduler.controller.runtime.observability import Metrics

log = structlog.get_logger("rackwise")
PROTECTED = "ProtectedNamespace"
NOT_SERVED = "NamespaceNotServed"


@dataclass
class Access:
    may_write: Callable[[str], bool]
    clock: Callable[[], float]
    protected: frozenset[str]
    ttl_s: float = 30.0
    known: dict[str, tuple[bool, float]] = field(default_factory=dict)

    def refusal(self, namespace: str) -> str | None:
        """Why objects of `namespace` are not scheduled, None when they are."""
        if namespace in self.protected:
            return PROTECTED
        allowed, at = self.known.get(namespace, (False, -math.inf))
        if self.clock() - at > self.ttl_s:
            try:
                allowed = self.may_write(namespace)
            except ApiError as exc:
                log.warning("access check failed", namespace=namespace, error=str(exc))
                return None
            self.known[namespace] = (allowed, self.clock())
        return None if allowed else NOT_SERVED


def why(reason: str, namespace: str) -> str:
    if reason == PROTECTED:
        return f"namespace {namespace} is protected (operator config protectedNamespaces)"
    return (
        f"rackwise may not bind pods in namespace {namespace}: bind the ClusterRole "
        "rackwise-workloads there (manifests/base/rbac/rolebinding.yaml)"
    )


@dataclass
class Refusals:
    """Which objects are scheduled this cycle, and the report of those that are not: one event
    per object (again if it is refused for another reason, or again after it was served), and
    the gauge of the objects refused now."""

    access: Access
    config: OperatorConfig
    calls: Calls
    recorder: Recorder
    metrics: Metrics
    reported: dict[str, str] = field(default_factory=dict)  # object uid -> why, as reported
    now: dict[str, str] = field(default_factory=dict)  # the same, this cycle

    def begin(self) -> None:
        self.now = {}

    def served(self, jobs: list[TrainingJob]) -> list[TrainingJob]:
        out = []
        for job in jobs:
            meta = job.meta
            if self.may(meta.namespace, meta.uid, f"TrainingJob {job.key}"):
                out.append(job)
        return out

    def may(self, namespace: str, uid: str, what: str) -> bool:
        reason = self.access.refusal(namespace)
        if reason is None:
            return True
        self.now[uid] = reason
        if self.reported.get(uid) != reason:
            lease = self.config.leader_election
            ref = Ref("coordination.k8s.io/v1", "Lease", lease.name, lease.namespace)
            message = f"{what} is not scheduled: {why(reason, namespace)}"
            if self.calls.attempt(self.recorder.record, ref, "Warning", reason, message, uid):
                self.reported[uid] = reason
        return False

    def count(self) -> None:
        """The gauge of objects refused now; those gone or served since are forgotten."""
        self.reported = {u: r for u, r in self.reported.items() if u in self.now}
        for reason in (PROTECTED, NOT_SERVED):
            self.metrics.ignored.labels(reason).set(list(self.now.values()).count(reason))
