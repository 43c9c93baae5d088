"""A TrainingJob's status and events: what the operator says of each job.

Contract. Takes a job (its view) and what happened to it; writes its status (phase, the
`Placed`, `Running`, `Preempted`, `MoveRequested`, `Borrowed` and `Reclaimed` conditions, the
placement summary) only when it changed, compared with what was last written (a cache that lags
must not make it written again, with its event, every cycle), and records an event when the
`Placed` reason changes, or a lending condition appears (compared with the stored status, so a
restarted operator does not repeat itself). Promises: a preempted job keeps its `Preempted`
condition until it is placed again, a reclaimed one its `Reclaimed`; a waiting job's pods say
what the job says (pods/podwhy.py); an API error is counted, logged and retried on a later
cycle, never raised."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import structlog

from scheduler.controller.podgroup.runner import Waiting
from scheduler.controller.pods.podwhy import PendingPods
from scheduler.controller.runtime import status as st
from scheduler.controller.runtime.calls import Calls
from scheduler.controller.runtime.events import Recorder, job_ref
from scheduler.controller.runtime.objects import Condition, JobState, Pod, TrainingJob, find
from scheduler.controller.runtime.observability import Metrics
from scheduler.controller.trainingjob.translate import JobView, total_gpus
from scheduler.model import Placement

Obj = dict[str, Any]
log = structlog.get_logger("rackwise")
# the annotation a job writes when it has checkpointed (RFC 3339): moves wait for it
CHECKPOINTED = "rackwise.io/checkpointed-at"
WARNINGS = {"Unplaceable", "NeverFits", "InvalidSpec", "NodeLost", "PodRejected", "BindFailed"}
WARNINGS |= {"IncompleteGang", "RepairWaiting", "Preempted"}


class StatusApi(Protocol):
    def patch_status(self, namespace: str, name: str, status: Obj) -> None: ...


def first_placement(status: JobState) -> bool:
    """Neither restarted nor preempted before: its wait since creation is time to place."""
    preempted = any(c.type in ("Preempted", "Reclaimed") for c in status.conditions)
    return not status.restarts and not preempted


@dataclass
class JobStatus:
    api: StatusApi
    calls: Calls
    recorder: Recorder
    metrics: Metrics
    why: PendingPods
    wall: Callable[[], float]  # the API's clock (creation timestamps)
    # job uid -> the status last written (the cache may not show it yet)
    written: dict[str, JobState] = field(default_factory=dict)
    marked: set[str] = field(default_factory=set)  # job uids marked to move (this cycle)
    # lending: job uid -> the deadline of its reclaim (this cycle); node -> its pool
    reclaiming: dict[str, float] = field(default_factory=dict)
    node_pools: dict[str, str] = field(default_factory=dict)
    # teams: job uid -> the Queue whose nominal quota it runs beyond (borrowed in its cohort)
    beyond: dict[str, str] = field(default_factory=dict)

    def forget(self, live: set[str]) -> None:
        self.written = {u: s for u, s in self.written.items() if u in live}

    def fresh(self, job: TrainingJob) -> TrainingJob:
        """The job with the status last written, where the cache does not show it yet."""
        written = self.written.get(job.meta.uid)
        return job if written is None or written == job.status else job.with_status(written)

    def state(self, job: TrainingJob) -> JobState:
        return self.written.get(job.meta.uid) or job.status

    def observe(self, job: TrainingJob) -> None:
        """A finished job whose spec was edited since (suspended, say): its status says it saw
        that generation, nothing else changes."""
        old = self.state(job)
        if old.observed != job.meta.generation:
            self._write(job, replace(old, observed=job.meta.generation))

    def rollback(self, view: JobView, pods: list[Pod], reason: str, message: str) -> None:
        self.calls.delete(pods)
        self.pending(view, reason, f"{reason}: {message}")

    def waits(self, view: JobView, unbound: Waiting, reason: str, message: str) -> None:
        """A queued job and its pods say why it waits."""
        self.pending(view, reason, message)
        self.why.tell(unbound.pods, reason, message)

    def pending(self, view: JobView, reason: str, message: str) -> None:
        self.set(view, "Pending", [self.cond(view, "Placed", False, reason, message)])

    def running(self, view: JobView, pods: list[Pod]) -> None:
        phases = [p.phase for p in pods]
        old = self.state(view.obj)
        before = find(old.conditions, "Placed")
        message = before.message if before and before.true else "all pods bound"
        placed = self.cond(view, "Placed", True, "Placed", message)
        phase, reason, text = _phase(phases)
        running = self.cond(view, "Running", phase == "Running", reason, text)
        conditions = [placed, running]
        if view.uid in self.marked:
            message = f"will be moved after its next checkpoint (annotation {CHECKPOINTED})"
            conditions.append(self.cond(view, "MoveRequested", True, "Defragmentation", message))
        conditions += self._lending(view, pods)
        self.set(view, phase, conditions, old.placement)

    def _lending(self, view: JobView, pods: list[Pod]) -> list[Condition]:
        """Borrowed: it runs on hosts another pool lent to its own, or beyond its Queue's
        nominal quota on quota its cohort lends; Reclaimed: the lender wants them back, by the
        deadline (earlier at its next checkpoint)."""
        nodes = {p.node for p in pods}
        lenders = sorted(
            {self.node_pools.get(str(n), view.gang.pool) for n in nodes} - {view.gang.pool}
        )
        queue = self.beyond.get(view.uid)
        if lenders:
            reason, how = "Borrowed", f"runs on hosts lent by {', '.join(lenders)}"
            back = f"{', '.join(lenders)} takes its hosts back"
        elif queue is not None:
            reason, how = (
                "BeyondQuota",
                f"runs beyond queue {queue}'s nominal quota, on quota its cohort lends",
            )
            back = "its cohort takes the quota back"
        else:
            return []
        out = [self.cond(view, "Borrowed", True, reason, how)]
        deadline = self.reclaiming.get(view.uid)
        if deadline is not None:
            message = f"{back} at its next checkpoint, by {st.stamp(deadline)}"
            out.append(self.cond(view, "Reclaimed", True, "Reclaiming", message))
        return out

    def placed(self, view: JobView, whole: Placement, repair: bool) -> None:
        message = (
            f"{view.total_pods} pods across "
            + " ".join(f"{level}={n}" for level, n in whole.domains.items())
            + (" (lost pods re-placed)" if repair else "")
        )
        placed = self.cond(view, "Placed", True, "Placed", message)
        running = self.cond(view, "Running", False, "Starting", "waiting for pods to start")
        if first_placement(self.state(view.obj)) and not repair:
            self.metrics.placed(view.gang, self.wall() - st.created(view.obj.meta))
        self.set(view, "Placed", [placed, running], st.summary(whole))
        log.info(
            "placed",
            job=view.gang.name,
            repair=repair,
            cost=round(whole.cost, 3),
            engine=whole.engine,
            seconds=round(whole.solve_seconds, 4),
            broke=whole.broken,  # whole domains it broke, and the J it paid to break fewer
            premium=round(whole.premium, 4),
            **whole.domains,
        )

    def invalid(self, job: TrainingJob, message: str) -> None:
        old = self.state(job)
        placed = st.condition("Placed", False, "InvalidSpec", message, old.conditions)
        self._write(job, st.build(job.meta, old, "Invalid", [placed], 0))

    def cond(self, view: JobView, kind: str, ok: bool, reason: str, message: str) -> Condition:
        return st.condition(kind, ok, reason, message, self.state(view.obj).conditions)

    def set(
        self,
        view: JobView,
        phase: str,
        conditions: list[Condition],
        placement: Obj | None = None,
        restarts: int | None = None,
    ) -> None:
        old = self.state(view.obj)
        if phase == "Pending":
            conditions = [*conditions, *_still_preempted(old, conditions)]
        gpus = total_gpus(view.spec)
        new = st.build(view.obj.meta, old, phase, conditions, gpus, placement, restarts)
        self._write(view.obj, new)

    def _write(self, job: TrainingJob, new: JobState) -> None:
        meta = job.meta
        old = self.state(job)
        if old == new:  # equal but for transition times: no write when nothing changed
            return
        if not self.calls.attempt(self.api.patch_status, meta.namespace, meta.name, st.body(new)):
            return
        before, after = old.reason(), new.reason()
        self.written[meta.uid] = new
        if after and after != before:
            placed = find(new.conditions, "Placed")
            kind = "Warning" if after in WARNINGS else "Normal"
            text = placed.message if placed else after
            self.calls.attempt(self.recorder.record, job_ref(job), kind, after, text)
        for reason, message in _lending_news(old, new):
            self.calls.attempt(self.recorder.record, job_ref(job), "Normal", reason, message)


def _phase(phases: list[str | None]) -> tuple[str, str, str]:
    """(phase, Running reason, message) of a gang whose pods are all bound."""
    if "Failed" in phases:
        return "Failed", "PodFailed", "a pod failed"
    if all(p == "Succeeded" for p in phases):
        return "Succeeded", "Completed", "all pods succeeded"
    if all(p == "Running" for p in phases):
        return "Running", "AllPodsRunning", "all pods running"
    return "Placed", "Starting", "waiting for pods to start"


def _lending_news(old: JobState, new: JobState) -> list[tuple[str, str]]:
    """(reason, message) of each lending condition (Borrowed, Reclaimed while running) that
    is new or changed its reason: each gets its event once."""

    def of(status: JobState) -> dict[str, str]:
        return {
            c.type: c.reason
            for c in status.conditions
            if c.type in ("Borrowed", "Reclaimed") and c.true
        }

    before, after = of(old), of(new)
    return [
        (c.reason, c.message)
        for c in new.conditions
        if c.type in after and after[c.type] != before.get(c.type) and c.reason != "Reclaimed"
    ]


def _still_preempted(old: JobState, conditions: list[Condition]) -> list[Condition]:
    """A preempted (or reclaimed) job keeps saying so until it is placed again."""
    given = {c.type for c in conditions}
    return [
        c
        for c in old.conditions
        if c.type in ("Preempted", "Reclaimed")
        and c.type not in given
        and c.true
        and c.reason != "Reclaiming"
    ]
