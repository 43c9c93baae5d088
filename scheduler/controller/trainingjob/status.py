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
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from scheduler.controller.podgroup.runner import Waiting
from scheduler.controller.pods.podwhy import PendingPods
from scheduler.controller.runtime import status as st
from scheduler.controller.runtime.calls import Calls
from scheduler.controller.runtime.events import Recorder, job_ref
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


def first_placement(view: JobView) -> bool:
    """Neither restarted nor preempted before: its wait since creation is time to place."""
    status = view.obj.get("status") or {}
    preempted = any(
        c.get("type") in ("Preempted", "Reclaimed") for c in status.get("conditions") or []
    )
    return not status.get("restarts") and not preempted


@dataclass
class JobStatus:
    api: StatusApi
    calls: Calls
    recorder: Recorder
    metrics: Metrics
    why: PendingPods
    wall: Callable[[], float]  # the API's clock (creation timestamps)
    # job uid -> the status last written
    written: dict[str, Obj] = field(default_factory=dict)
    marked: set[str] = field(default_factory=set)  # job uids marked to move (this cycle)
    # lending: job uid -> the deadline of its reclaim (this cycle); node -> its pool
    reclaiming: dict[str, float] = field(default_factory=dict)
    node_pools: dict[str, str] = field(default_factory=dict)

    def forget(self, live: set[str]) -> None:
        self.written = {u: s for u, s in self.written.items() if u in live}

    def rollback(self, view: JobView, pods: list[Obj], reason: str, message: str) -> None:
        self.calls.delete(pods)
        self.pending(view, reason, f"{reason}: {message}")

    def waits(self, view: JobView, unbound: Waiting, reason: str, message: str) -> None:
        """A queued job and its pods say why it waits."""
        self.pending(view, reason, message)
        self.why.tell(unbound.pods, reason, message)

    def pending(self, view: JobView, reason: str, message: str) -> None:
        self.set(view, "Pending", [self.cond(view, "Placed", False, reason, message)])

    def running(self, view: JobView, pods: list[Obj]) -> None:
        phases = [p.get("status", {}).get("phase") for p in pods]
        old = view.obj.get("status") or {}
        before: Obj = next(
            (c for c in old.get("conditions") or [] if c.get("type") == "Placed"), {}
        )
        message = before.get("message") if before.get("status") == "True" else "all pods bound"
        placed = self.cond(view, "Placed", True, "Placed", str(message))
        phase, reason, text = _phase(phases)
        running = self.cond(view, "Running", phase == "Running", reason, text)
        conditions = [placed, running]
        if view.uid in self.marked:
            message = f"will be moved after its next checkpoint (annotation {CHECKPOINTED})"
            conditions.append(self.cond(view, "MoveRequested", True, "Defragmentation", message))
        conditions += self._lending(view, pods)
        self.set(view, phase, conditions, old.get("placement"))

    def _lending(self, view: JobView, pods: list[Obj]) -> list[Obj]:
        """Borrowed: it runs on hosts another pool lent to its own; Reclaimed: that pool wants
        them back, by the deadline (earlier at its next checkpoint)."""
        nodes = {p["spec"].get("nodeName") for p in pods}
        lenders = sorted(
            {self.node_pools.get(str(n), view.gang.pool) for n in nodes} - {view.gang.pool}
        )
        if not lenders:
            return []
        out = [
            self.cond(
                view, "Borrowed", True, "Borrowed", f"runs on hosts lent by {', '.join(lenders)}"
            )
        ]
        deadline = self.reclaiming.get(view.uid)
        if deadline is not None:
            by = st.stamp(deadline)
            message = f"{', '.join(lenders)} takes its hosts back at its next checkpoint, by {by}"
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
        if first_placement(view) and not repair:
            self.metrics.placed(view.gang, self.wall() - st.created(view.obj))
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

    def invalid(self, job: Obj, message: str) -> None:
        conditions = (job.get("status") or {}).get("conditions") or []
        placed = st.condition("Placed", False, "InvalidSpec", message, conditions)
        self._write(job, st.build(job, "Invalid", [placed], 0))

    def cond(self, view: JobView, kind: str, ok: bool, reason: str, message: str) -> Obj:
        conditions = (view.obj.get("status") or {}).get("conditions") or []
        return st.condition(kind, ok, reason, message, conditions)

    def set(
        self,
        view: JobView,
        phase: str,
        conditions: list[Obj],
        placement: Obj | None = None,
        restarts: int | None = None,
    ) -> None:
        if phase == "Pending":
            conditions = [*conditions, *_still_preempted(view, conditions)]
        gpus = total_gpus(view.spec)
        self._write(view.obj, st.build(view.obj, phase, conditions, gpus, placement, restarts))

    def _write(self, job: Obj, new: Obj) -> None:
        meta = job["metadata"]
        old = self.written.get(str(meta.get("uid"))) or job.get("status") or {}
        if st.same(old, new):
            return
        if not self.calls.attempt(self.api.patch_status, meta["namespace"], meta["name"], new):
            return
        before, after = st.reason_of({"status": old}), st.reason_of({"status": new})
        job["status"] = new
        self.written[str(meta.get("uid"))] = new
        if after and after != before:
            placed = next(c for c in new["conditions"] if c["type"] == "Placed")
            kind = "Warning" if after in WARNINGS else "Normal"
            self.calls.attempt(self.recorder.record, job_ref(job), kind, after, placed["message"])
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


def _lending_news(old: Obj, new: Obj) -> list[tuple[str, str]]:
    """(reason, message) of each lending condition (Borrowed, Reclaimed while running) that
    is new or changed its reason: each gets its event once."""

    def of(status: Obj) -> dict[str, str]:
        return {
            c["type"]: c.get("reason", "")
            for c in status.get("conditions") or []
            if c.get("type") in ("Borrowed", "Reclaimed") and c.get("status") == "True"
        }

    before, after = of(old), of(new)
    out = []
    for c in new.get("conditions") or []:
        kind = c.get("type")
        if kind in after and after[kind] != before.get(kind) and c.get("reason") != "Reclaimed":
            out.append((str(c["reason"]), str(c.get("message", ""))))
    return out


def _still_preempted(view: JobView, conditions: list[Obj]) -> list[Obj]:
    """A preempted (or reclaimed) job keeps saying so until it is placed again."""
    given = {c["type"] for c in conditions}
    old = (view.obj.get("status") or {}).get("conditions") or []
    return [
        c
        for c in old
        if c.get("type") in ("Preempted", "Reclaimed")
        and c.get("type") not in given
        and c.get("status") == "True"
        and c.get("reason") != "Reclaiming"
    ]
