"""The operator's side of pod groups (podgroup/members.py): which groups the queue sees, binding the
members of a group the queue starts, events about groups that wait.

A group enters the queue once `minMember` of its members have arrived, and all the members that have
arrived by then are placed together; a group without a PodGroup object waits, with an event
(rackwise cannot know its size). New members of a group placed before (a replaced pod) go near the
others (placement.repair) without queueing. Each group is handled on its own: a malformed one gets
an event and the others go on. Pod groups are never preemption victims: rackwise does not delete
pods it did not create.

A TrainingJob's gang takes the same path once its pods exist (trainingjob/launch.py): it is queued
as a `Waiting` of its unbound pods and started by `bind`; only its status and events are the job's
own (cycle/reconciler.py)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from scheduler.controller.cluster.state import ClusterState
from scheduler.controller.config import OperatorConfig
from scheduler.controller.podgroup.members import Members, gang
from scheduler.controller.pods.affinity import Running, resolve_gang
from scheduler.controller.pods.podwhy import REFRESH_S, PendingPods
from scheduler.controller.runtime.events import Recorder
from scheduler.controller.runtime.expect import Expectations
from scheduler.controller.runtime.gateway import ApiError
from scheduler.controller.runtime.objects import Pod, PodGroup
from scheduler.controller.runtime.observability import Metrics
from scheduler.controller.runtime.status import condition, created
from scheduler.model import GangRequest, Placement
from scheduler.placement.repair import repair
from scheduler.queue import SchedulingQueue

Obj = dict[str, Any]
log = structlog.get_logger("rackwise")
NOTHING_RUNS = Running()


def gates_message(gated: list[Pod], need: int) -> str:
    """Which scheduling gates hold how many pods, and how many members the gang needs."""
    counts: dict[str, int] = {}
    for pod in gated:
        for gate in pod.gates:
            counts[gate] = counts.get(gate, 0) + 1
    named = ", ".join(f"{g} on {n} pod{'s' if n > 1 else ''}" for g, n in sorted(counts.items()))
    return (
        f"waiting for scheduling gates to be removed ({named}); gated pods are neither bound "
        f"nor counted, and the gang needs {need}"
    )


def claims_message(claims: list[tuple[str, str]]) -> str:
    pod, claim = claims[0]
    more = f" and {len(claims) - 1} more" if len(claims) > 1 else ""
    return (
        f"pod {pod} has resource claim {claim}{more} (spec.resourceClaims): rackwise does not "
        "allocate resource claims (DRA), and a pod bound with its claims unallocated would not "
        "start; the gang is held"
    )


@dataclass(frozen=True)
class Waiting:
    """A gang the queue decides about: its unbound pods, rank i = pods[i]."""

    key: str  # the queue's key: a group's `podgroup:<ns>/<name>`, a TrainingJob's uid
    members: Members
    gang: GangRequest
    pods: list[Pod]
    arrival: float
    expected_s: float | None = None  # the run time its owner declared
    queue: str = ""  # the team Queue its label names ("": its namespace's)
    # False for a pod group: rackwise only binds its pods, never evicts them (queue.add)
    evictable: bool = True


@dataclass(frozen=True)
class Binding:
    """pods[rank] of `owner` (in `namespace`) to bind where `placement` puts that rank."""

    owner: str
    namespace: str
    whole: GangRequest  # the gang as it stands once bound (what is charged)
    placement: Placement
    pods: dict[int, Pod]
    queue: str = ""  # the team queue that admitted it (the pods' ADMITTED annotation)


@dataclass
class GroupRunner:
    config: OperatorConfig
    queue: SchedulingQueue
    recorder: Recorder
    bind_all: Callable[[list[tuple[str, str, str, str]]], list[bool]]
    clock: Callable[[], float]
    wall: Callable[[], float]
    metrics: Metrics
    expect: Expectations
    patch_status: Callable[[PodGroup, Obj], None]  # a PodGroup's status, of either kind
    why: PendingPods  # what its waiting members say
    reasons: dict[str, str] = field(default_factory=dict)  # group key -> last reason told
    said: dict[str, tuple[str, float]] = field(default_factory=dict)  # -> its message, when

    queued: dict[str, GangRequest] = field(default_factory=dict)  # key -> gang in the queue

    def forget(self, live: set[str]) -> None:
        self.reasons = {k: v for k, v in self.reasons.items() if k in live}
        self.said = {k: v for k, v in self.said.items() if k in live}

    def enqueue(self, waiting: dict[str, Waiting]) -> None:
        """Into the queue, every gang that waits this cycle (pod groups and TrainingJobs); one
        whose gang changed (more members, an edited spec) is queued anew, keeping its
        arrival."""
        for key, w in waiting.items():
            if self.queued.get(key) not in (None, w.gang):
                self.queue.remove(key)
            self.queue.add(
                key, w.gang, w.arrival, w.members.namespace, w.expected_s, w.queue, w.evictable
            )
        self.queued = {key: w.gang for key, w in waiting.items()}

    def one(
        self,
        members: Members,
        state: ClusterState | None,
        running: Running = NOTHING_RUNS,
    ) -> Waiting | None:
        """The group's gang when it waits for the queue, its pods' terms resolved (and new
        members of a placed group bound near the others); `running`: the pods bound and not
        finished, and those of them with required anti-affinity."""
        waiting, bound = members.waiting, members.bound
        if members.claims:
            self._claims(members)
            return None
        if not waiting:
            if members.gated and not bound:
                self._gated(members, members.min_member or 1)
            return None
        if bound:
            self._top_up(members, waiting, bound, state, running)
            return None
        if members.podgroup is None:
            message = (
                f"no {members.kind} {members.name} in {members.namespace}: its size is unknown"
            )
            self.tell(members, "Warning", "NoPodGroup", message)
            return None
        need = members.min_member or 1
        # members bound before and finished count: the operator that bound them may have
        # stopped before binding their siblings, which would otherwise wait for ever
        if len(waiting) + members.ran < need:
            if members.gated:
                self._gated(members, need)
            else:
                self._incomplete(members, len(waiting) + members.ran, need)
            return None
        arrival = min(created(p.meta) for p in waiting)
        request, ordered = gang(members, waiting, self.config)
        if state is not None:  # its pods' affinity and spread against what runs now
            request = resolve_gang(request, ordered, running, state.fabric, self.config)
        return Waiting(
            members.key, members, request, ordered, arrival, queue=members.queue, evictable=False
        )

    def _gated(self, members: Members, need: int) -> None:
        self.tell(members, "Normal", "WaitingForGates", gates_message(members.gated, need))

    def _claims(self, members: Members) -> None:
        self.tell(members, "Warning", "ResourceClaimsUnsupported", claims_message(members.claims))

    def _incomplete(self, members: Members, arrived: int, need: int) -> None:
        first = min(created(p.meta) for p in members.pods)
        timeout = members.timeout_s or self.config.group_timeout_s
        if self.wall() - first > timeout:
            message = f"{arrived} of {need} members arrived in {timeout:.0f} s; still waiting"
            self.tell(members, "Warning", "GroupIncomplete", message)

    def _top_up(
        self,
        members: Members,
        waiting: list[Pod],
        bound: list[Pod],
        state: ClusterState | None,
        running: Running,
    ) -> None:
        """New members of a group already placed go near the others, all or none of them,
        under the members' pod terms (the bound members count among the pods they name)."""
        if state is None:
            return
        whole, ordered = gang(members, [*bound, *waiting], self.config)
        whole = resolve_gang(whole, ordered, running, state.fabric, self.config)
        if whole.roles:
            message = "new members of a group with several pod sets are not placed near the rest"
            self.tell(members, "Warning", "Unplaceable", message)
            return
        survivors = {i: str(p.node) for i, p in enumerate(bound)}
        missing = list(range(len(bound), len(bound) + len(waiting)))
        found = repair(state.snapshot, whole, survivors, missing, self.config.queue().place)
        if found is None:
            message = f"no room for {len(waiting)} new members near the {len(bound)} placed"
            self.tell(members, "Normal", "Waiting", message)
            return
        state.snapshot.apply(whole, found)
        pods = dict(zip(missing, waiting, strict=True))
        results = self.bind(members.key, members.namespace, whole, found, pods)
        self._told(members, found, results)

    def started(self, waiting: Waiting, placement: Placement, results: list[bool]) -> bool:
        """A group the queue started, once its members' bindings (`results`) were asked for."""
        ok = self._told(waiting.members, placement, results)
        if ok:
            self.queue.succeeded(waiting.key)
            self.metrics.placed(waiting.gang, self.wall() - waiting.arrival)
        else:
            self.queue.backoff(waiting.key, self.clock())
        return ok

    def _told(self, members: Members, placement: Placement, results: list[bool]) -> bool:
        if all(results):
            spans = ", ".join(f"{n} {lv}" for lv, n in placement.domains.items() if n > 1)
            message = f"bound {len(results)} pods" + (f" spanning {spans}" if spans else "")
            self.tell(members, "Normal", "Scheduled", message)
            return True
        failed = len(results) - sum(results)
        message = f"{failed} of {len(results)} bindings failed; the rest will be placed near"
        self.tell(members, "Warning", "BindFailed", message)
        return False

    def bind(
        self,
        owner: str,
        namespace: str,
        whole: GangRequest,
        placement: Placement,
        pods: dict[int, Pod],
    ) -> list[bool]:
        """Bind pods[rank] where `placement` puts that rank (for every rank in `pods`); the
        cache is expected to show every binding that succeeded before `owner` is judged
        again. One result per pod bound, in placement order."""
        return self.bind_many([Binding(owner, namespace, whole, placement, pods)])[0]

    def bind_many(self, items: list[Binding]) -> list[list[bool]]:
        """`bind` for every item, all their pods in one batch on the API threads (one gang at a
        time would leave most threads idle behind a small gang); results per item."""
        todos = [[a for a in b.placement.pods if a.rank in b.pods] for b in items]
        pairs = [
            (b.namespace, b.pods[a.rank].meta.name, a.host, b.queue)
            for b, todo in zip(items, todos, strict=True)
            for a in todo
        ]
        flat = iter(self.bind_all(pairs))
        out = []
        for b, todo in zip(items, todos, strict=True):
            results = [next(flat) for _ in todo]
            done = [a for a, ok in zip(todo, results, strict=True) if ok]
            names = [b.pods[a.rank].meta.name for a in done]
            only = b.placement.model_copy(update={"pods": tuple(done)})
            self.expect.bound(b.owner, b.whole, only, names)
            out.append(results)
        return out

    def wait(self, waiting: Waiting, reason: str, message: str) -> None:
        kind = "Warning" if reason in ("Unplaceable", "NeverFits") else "Normal"
        self.tell(waiting.members, kind, reason, message)

    def tell(self, members: Members, kind: str, reason: str, message: str) -> None:
        """When the group's reason changes: an event (the recorder aggregates repeats) and its
        PodGroup's condition Scheduled (True once every member is bound, else False with the
        reason it waits); its members not bound yet say why on each call."""
        if reason != "Scheduled":
            self.why.tell(members.waiting, reason, message)
        if self.reasons.get(members.key) == reason:
            self._refresh(members, reason, message)
            return
        try:
            self.recorder.record(members.ref(), kind, reason, message)
        except ApiError as exc:  # told again next cycle: the reason is not remembered
            self.metrics.api_error("record")
            log.warning("event not written", group=members.key, error=str(exc))
            return
        try:
            if members.podgroup is not None and not members.alone:
                self._condition(members.podgroup, reason, message)
        except ApiError as exc:  # the same: the repeated event is aggregated
            self.metrics.api_error("patch_podgroup_status")
            log.warning("condition not written", group=members.key, error=str(exc))
            return
        self.reasons[members.key] = reason
        self.said[members.key] = (message, self.clock())

    def _refresh(self, members: Members, reason: str, message: str) -> None:
        """The same reason with new numbers: the PodGroup's condition says them, at most once
        a minute (as its pods' messages), with no new event."""
        said, at = self.said.get(members.key, ("", -math.inf))
        if message == said or self.clock() - at < REFRESH_S:
            return
        self.said[members.key] = (message, self.clock())
        if members.podgroup is not None and not members.alone:
            try:
                self._condition(members.podgroup, reason, message)
            except ApiError as exc:
                self.metrics.api_error("patch_podgroup_status")
                log.warning("condition not written", group=members.key, error=str(exc))

    def _condition(self, podgroup: PodGroup, reason: str, message: str) -> None:
        old, kind = podgroup.conditions, podgroup.condition
        scheduled = condition(kind, reason == "Scheduled", reason, message, old)
        others = [c.body() for c in old if c.type != kind]
        status = {"conditions": [*others, scheduled.body()]}
        self.patch_status(podgroup, status)
