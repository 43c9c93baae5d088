"""One reconcile cycle: read everything, fix what is half done, place what is pending.

Level-triggered: every cycle rebuilds the whole picture from the API (nodes, all pods, all
TrainingJobs), so a restarted operator resumes exactly where the cluster is. A gang is launched
in two steps, all pods created (each annotated with its node, which reserves the capacity), then
all bound; a failure in either step deletes the gang's pods again, so a gang is never left
partly placed. Binding uses the pods/binding subresource, as kube-scheduler does."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog

from scheduler.controller import status as st
from scheduler.controller.config import OperatorConfig
from scheduler.controller.gateway import ApiError, Gateway
from scheduler.controller.jobs import InvalidSpecError, JobView, key, to_gang
from scheduler.controller.observability import Metrics
from scheduler.controller.pods import gang_pods, service
from scheduler.controller.state import JOB_LABEL, NODE_ANNOTATION, ClusterState, StateBuilder
from scheduler.model import PlaceConfig, Placement, PlacementStatus
from scheduler.placement import place_one

Obj = dict[str, Any]
T = TypeVar("T")
log = structlog.get_logger("rackwise")


@dataclass
class CycleReport:
    placed: int = 0
    pods_bound: int = 0
    pending: int = 0
    solve_seconds: float = 0.0
    seconds: float = 0.0


def _order(job: Obj) -> tuple[int, str, str]:
    spec = job.get("spec") or {}
    meta = job["metadata"]
    return (-int(spec.get("priority", 0)), meta.get("creationTimestamp", ""), key(job))


class Reconciler:
    def __init__(self, gateway: Gateway, config: OperatorConfig, metrics: Metrics) -> None:
        self.gw = gateway
        self.config = config
        self.metrics = metrics
        self.builder = StateBuilder(config)
        self.pool = ThreadPoolExecutor(config.api_workers, thread_name_prefix="api")
        self.place_config = PlaceConfig(
            time_limit_s=config.solver_time_limit_s, compact_wait_s=config.compact_wait_s
        )
        self.placeable_since: dict[str, float] = {}  # job uid -> first time it could start
        self.backoff: dict[str, tuple[float, float]] = {}  # job uid -> (retry at, delay)

    def cycle(self) -> CycleReport:
        start = time.perf_counter()
        report = CycleReport()
        nodes, pods, jobs = self.gw.nodes(), self.gw.pods(), self.gw.jobs()
        state = self.builder.build(nodes, pods)
        by_job: dict[str, list[Obj]] = {}
        for pod in pods:
            owner = (pod["metadata"].get("labels") or {}).get(JOB_LABEL)
            if owner:
                by_job.setdefault(f"{pod['metadata']['namespace']}/{owner}", []).append(pod)
        live = {key(j): j for j in jobs}
        self._delete_orphans(p for k, ps in by_job.items() if k not in live for p in ps)
        pending: list[JobView] = []
        for job in sorted(jobs, key=_order):
            try:
                view = JobView(job, to_gang(job))
            except InvalidSpecError as exc:
                self._invalid(job, str(exc))
                continue
            mine = by_job.get(key(job), [])
            if mine:
                self._existing(view, mine, state)
            else:
                pending.append(view)
        self._place(pending, state, report)
        report.seconds = time.perf_counter() - start
        self.metrics.pending.set(report.pending)
        return report

    # jobs that already have pods
    def _existing(self, job: JobView, pods: list[Obj], state: ClusterState | None) -> None:
        stale = [p for p in pods if _annotation(p, "rackwise.io/gang-uid") != job.uid]
        if stale:  # left by an earlier job of the same name
            self._delete_orphans(stale)
            return
        ready = state.ready if state else set()
        complete = len(pods) == job.gang.pods
        targets = {_annotation(p, NODE_ANNOTATION) for p in pods}
        if not complete or not targets <= ready:
            reason = "NodeLost" if complete else "IncompleteGang"
            self._rollback(job, pods, reason, f"{reason}: the gang will be placed again")
            return
        unbound = [p for p in pods if not p["spec"].get("nodeName")]
        if unbound and not self._bind_all(unbound):
            self._rollback(job, pods, "BindFailed", "binding failed; the gang will be placed again")
            return
        self._running_status(job, pods)

    def _running_status(self, job: JobView, pods: list[Obj]) -> None:
        phases = [p.get("status", {}).get("phase") for p in pods]
        old = job.obj.get("status") or {}
        conditions = old.get("conditions") or []
        before: Obj = next((c for c in conditions if c.get("type") == "Placed"), {})
        message = before.get("message") if before.get("status") == "True" else "all pods bound"
        placed = st.condition("Placed", True, "Placed", str(message), conditions)
        if "Failed" in phases:
            phase, reason, text = "Failed", "PodFailed", "a pod failed"
        elif all(p == "Succeeded" for p in phases):
            phase, reason, text = "Succeeded", "Completed", "all pods succeeded"
        elif all(p == "Running" for p in phases):
            phase, reason, text = "Running", "AllPodsRunning", "all pods running"
        else:
            phase, reason, text = "Placed", "Starting", "waiting for pods to start"
        running = st.condition("Running", phase == "Running", reason, text, conditions)
        self._status(job.obj, st.build(job.obj, phase, [placed, running], old.get("placement")))

    # pending jobs
    def _place(
        self, pending: list[JobView], state: ClusterState | None, report: CycleReport
    ) -> None:
        launches: list[tuple[JobView, Placement]] = []
        for job in pending:
            if self.backoff.get(job.uid, (0.0, 0.0))[0] > time.monotonic():
                report.pending += 1
                continue
            if state is None:
                self._pending(job, "NoNodes", "the cluster has no nodes")
                report.pending += 1
                continue
            placement = place_one(state.snapshot, job.gang, self._config_for(job))
            report.solve_seconds += placement.solve_seconds
            self.metrics.observe(placement)
            if placement.status is PlacementStatus.WAITING:
                self.placeable_since.setdefault(job.uid, time.monotonic())
            if placement.placed:
                self.placeable_since.pop(job.uid, None)
                state.snapshot.apply(job.gang, placement)
                launches.append((job, placement))
            else:
                waiting = placement.status is PlacementStatus.WAITING
                self._pending(
                    job,
                    "WaitingForCompactPlacement" if waiting else "Unplaceable",
                    placement.reason,
                )
                report.pending += 1
        for job, placement, ok in self._launch_all(launches):
            if ok:
                report.placed += 1
                report.pods_bound += job.gang.pods
                self._placed(job, placement)
            else:
                report.pending += 1

    def _config_for(self, job: JobView) -> PlaceConfig:
        """Patience counts from the first cycle in which the gang could have started."""
        if not self.config.compact_wait_s:
            return self.place_config
        since = self.placeable_since.get(job.uid, time.monotonic())
        return self.place_config.model_copy(update={"waited_s": time.monotonic() - since})

    def _launch_all(
        self, launches: list[tuple[JobView, Placement]]
    ) -> Iterable[tuple[JobView, Placement, bool]]:
        """Create every pod of every gang, then bind the gangs whose pods all exist. A gang
        that fails either step loses exactly the pods this call created, nothing else.

        Each step is one flat pass over the thread pool: a task that waited on tasks of the
        same pool would deadlock it once there are more gangs than threads."""
        services = self._map(
            lambda jp: self._try(self.gw.ensure_service, jp[0].namespace, service(jp[0])), launches
        )
        work = [
            (i, body)
            for i, ((job, placement), ok) in enumerate(zip(launches, services, strict=True))
            if ok
            for body in gang_pods(job, placement, self.config)
        ]
        made = self._map(
            lambda wb: self._try(self.gw.create_pod, wb[1]["metadata"]["namespace"], wb[1]), work
        )
        created: list[list[str]] = [[] for _ in launches]
        for (i, body), ok in zip(work, made, strict=True):
            if ok:
                created[i].append(body["metadata"]["name"])
        binds = [
            (i, launches[i][0].namespace, f"{launches[i][0].name}-{p.rank}", p.host)
            for i, (job, placement) in enumerate(launches)
            if len(created[i]) == job.gang.pods
            for p in placement.pods
        ]
        results = self._map(lambda b: self._try(self.gw.bind, *b[1:]), binds)
        bound = [len(created[i]) == job.gang.pods for i, (job, _) in enumerate(launches)]
        for (i, *_), ok in zip(binds, results, strict=True):
            bound[i] = bound[i] and ok
        for i, (job, placement) in enumerate(launches):
            if bound[i]:
                self.backoff.pop(job.uid, None)
            else:
                self._delete_names(job.namespace, created[i])
                self._retry_later(job)
                self._pending(job, "BindFailed", "could not create or bind every pod; retrying")
                self._event(job.obj, "Warning", "BindFailed", "could not create or bind every pod")
            yield job, placement, bound[i]

    def _retry_later(self, job: JobView) -> None:
        """Exponential backoff (1 s .. 60 s) for a gang whose launch failed."""
        _, delay = self.backoff.get(job.uid, (0.0, 0.5))
        delay = min(delay * 2, 60.0)
        self.backoff[job.uid] = (time.monotonic() + delay, delay)

    def _bind_all(self, pods: list[Obj]) -> bool:
        pairs = [
            (p["metadata"]["namespace"], p["metadata"]["name"], _annotation(p, NODE_ANNOTATION))
            for p in pods
        ]
        return all(self._map(lambda t: self._try(self.gw.bind, *t), pairs))

    def _try(self, fn: Callable[..., None], *args: Any) -> bool:
        try:
            fn(*args)
        except ApiError as exc:
            log.warning(
                "api call failed",
                call=fn.__name__,
                args=[str(a)[:60] for a in args],
                error=str(exc),
            )
            return False
        return True

    def _map(self, fn: Callable[[Any], T], items: list[Any]) -> list[T]:
        """fn over items on the API thread pool (a single item runs inline)."""
        return list(self.pool.map(fn, items)) if len(items) > 1 else [fn(i) for i in items]

    # rollback and status
    def _rollback(self, job: JobView, pods: list[Obj], reason: str, message: str) -> None:
        self._delete_orphans(pods)
        self._pending(job, reason, message)
        self._event(job.obj, "Warning", reason, message)

    def _rollback_names(
        self, job: JobView, placement: Placement, reason: str, message: str
    ) -> None:
        names = [f"{job.name}-{p.rank}" for p in placement.pods]
        self._map(lambda n: self._try(self.gw.delete_pod, job.namespace, n), names)
        self._pending(job, reason, message)
        self._event(job.obj, "Warning", reason, message)

    def _delete_names(self, namespace: str, names: list[str]) -> None:
        self._map(lambda n: self._try(self.gw.delete_pod, namespace, n), names)

    def _delete_orphans(self, pods: Iterable[Obj]) -> None:
        pairs = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods]
        self._map(lambda t: self._try(self.gw.delete_pod, *t), pairs)

    def _pending(self, job: JobView, reason: str, message: str) -> None:
        old = job.obj.get("status") or {}
        conditions = old.get("conditions") or []
        placed = st.condition("Placed", False, reason, message, conditions)
        before: Obj = next((c for c in conditions if c.get("type") == "Placed"), {})
        if before.get("message") != placed["message"] and reason == "Unplaceable":
            self._event(job.obj, "Warning", reason, message)
        self._status(job.obj, st.build(job.obj, "Pending", [placed]))

    def _placed(self, job: JobView, placement: Placement) -> None:
        racks = placement.domains.get("rack", 0)
        message = (
            f"{job.gang.pods} pods on {placement.domains.get('host', 0)} hosts, "
            f"{racks} racks, {placement.domains.get('spine', 0)} spines"
        )
        conditions = (job.obj.get("status") or {}).get("conditions") or []
        placed = st.condition("Placed", True, "Placed", message, conditions)
        running = st.condition(
            "Running", False, "Starting", "waiting for pods to start", conditions
        )
        self._status(job.obj, st.build(job.obj, "Placed", [placed, running], st.summary(placement)))
        self._event(job.obj, "Normal", "Placed", message)
        log.info(
            "placed",
            job=job.gang.name,
            cost=round(placement.cost, 3),
            engine=placement.engine,
            seconds=round(placement.solve_seconds, 4),
            **placement.domains,
        )

    def _invalid(self, job: Obj, message: str) -> None:
        conditions = (job.get("status") or {}).get("conditions") or []
        placed = st.condition("Placed", False, "InvalidSpec", message, conditions)
        before: Obj = next((c for c in conditions if c.get("type") == "Placed"), {})
        if before.get("reason") != "InvalidSpec":
            self._event(job, "Warning", "InvalidSpec", message)
        self._status(job, st.build(job, "Invalid", [placed]))

    def _status(self, job: Obj, new: Obj) -> None:
        if st.same(job.get("status") or {}, new):
            return
        meta = job["metadata"]
        self._try(self.gw.patch_status, meta["namespace"], meta["name"], new)
        job["status"] = new

    def _event(self, job: Obj, kind: str, reason: str, message: str) -> None:
        self._try(self.gw.event, job, kind, reason, message)


def _annotation(pod: Obj, name: str) -> str:
    return str((pod["metadata"].get("annotations") or {}).get(name, ""))
