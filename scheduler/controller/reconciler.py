"""One reconcile cycle: read everything, fix what is half done, place what is pending.

Contract. Level-triggered: every cycle rebuilds the picture from the API (nodes, pods, jobs),
so a restarted or newly elected operator resumes exactly where the cluster is. Each job is
handled on its own: a job that cannot be read becomes that job's InvalidSpec condition, an
unexpected failure in one job is logged with the job's key and stack and counted, and the cycle
goes on with the others. The operator touches only pods it created (controller owner reference
to a live TrainingJob's uid); it charges every bound pod on a node, whoever placed it.

A TrainingJob is run as a Job controller runs a Job, and scheduled as any pod group: its pods
are made first, unbound (launch.py), then its gang is queued and bound exactly as a pod
group's (grouprun.py). A gang is never left half bound: pods that are not all bound are
completed near the bound ones when the job allows piecemeal repair, and otherwise deleted and
placed again whole. A running gang keeps its pods through a NotReady blip shorter than the
grace period and through a cordon; after that only the lost pods are made again and bound near
the survivors, unless the job asks for a whole-gang move. Finished jobs are never run again.
Which waiting gang starts, waits or preempts is the scheduling queue's decision
(scheduler/queue), the same object the simulator drives; this module applies its decisions
through the API server."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import structlog

from scheduler.controller import status as st
from scheduler.controller.access import NOT_SERVED, PROTECTED, Access, why
from scheduler.controller.config import OperatorConfig
from scheduler.controller.events import Recorder, job_ref, node_ref
from scheduler.controller.expect import Expectations
from scheduler.controller.gateway import ApiError
from scheduler.controller.grouprun import Binding, GroupRunner, Waiting
from scheduler.controller.groups import Members, collect
from scheduler.controller.jobs import InvalidSpecError, JobView, key, total_gpus, translate
from scheduler.controller.launch import Launch, Launcher
from scheduler.controller.observability import Metrics
from scheduler.controller.pods import (
    RANK_LABEL,
    generation,
    made_from,
    owned_by,
    pod,
    service,
)
from scheduler.controller.podwhy import PendingPods
from scheduler.controller.spec import RepairPolicy
from scheduler.controller.state import ClusterState, StateBuilder, host_of
from scheduler.model import GangRequest, Placement, PlacementStatus, PodAssignment
from scheduler.placement.cost import domains_spanned, traffic
from scheduler.placement.repair import piecemeal, repair
from scheduler.queue import Decisions, Eviction, Move, Running, SchedulingQueue, Wait
from scheduler.queue.effects import apply

Obj = dict[str, Any]
T = TypeVar("T")
log = structlog.get_logger("rackwise")
# the annotation a job writes when it has checkpointed (RFC 3339): moves wait for it
CHECKPOINTED = "rackwise.io/checkpointed-at"
WARNINGS = {"Unplaceable", "NeverFits", "InvalidSpec", "NodeLost", "PodRejected", "BindFailed"}
WARNINGS |= {"IncompleteGang", "RepairWaiting", "Preempted"}
Pending = dict[str, tuple[JobView, Waiting]]  # job uid -> the job and its unbound gang


class Api(Protocol):
    """What the reconciler needs of the API: the gateway, or a fake in unit tests."""

    def nodes(self) -> list[Obj]: ...
    def pods(self) -> list[Obj]: ...
    def jobs(self) -> list[Obj]: ...
    def podgroups(self) -> list[Obj]: ...
    def create_pod(self, namespace: str, body: Obj) -> None: ...
    def bind(self, namespace: str, pod: str, node: str) -> None: ...
    def delete_pod(self, namespace: str, pod: str) -> None: ...
    def delete_job(self, namespace: str, name: str) -> None: ...
    def ensure_service(self, namespace: str, body: Obj) -> None: ...
    def patch_status(self, namespace: str, name: str, status: Obj) -> None: ...
    def patch_podgroup_status(self, namespace: str, name: str, status: Obj) -> None: ...
    def patch_pod_status(self, namespace: str, name: str, status: Obj) -> None: ...
    def can_write(self, namespace: str) -> bool: ...
    def create_event(self, namespace: str, body: Obj) -> str: ...
    def patch_event(self, namespace: str, name: str, patch: Obj) -> None: ...


@dataclass
class CycleReport:
    placed: int = 0
    pods_bound: int = 0
    pending: int = 0
    invalid: int = 0
    errors: int = 0
    solve_seconds: float = 0.0
    seconds: float = 0.0


def _assignment(view: JobView, pod: Obj, host: str) -> PodAssignment:
    rank = max(_rank(pod), 0)
    role, index = view.role_of(rank) if rank < view.total_pods else ("", rank)
    return PodAssignment(rank=rank, host=host, role=role, role_rank=index if role else None)


def _first_placement(view: JobView) -> bool:
    """Neither restarted nor preempted before: its wait since creation is time to place."""
    status = view.obj.get("status") or {}
    preempted = any(c.get("type") == "Preempted" for c in status.get("conditions") or [])
    return not status.get("restarts") and not preempted


def _seconds(value: int | None) -> float | None:
    return None if value is None else float(value)


def _stale(view: JobView, pod: Obj) -> bool:
    """An unbound pod made from an earlier generation of its job's spec (a bound one runs on)."""
    return not pod["spec"].get("nodeName") and made_from(pod) != generation(view.obj)


def _rank(pod: Obj) -> int:
    text = str((pod["metadata"].get("labels") or {}).get(RANK_LABEL, ""))
    return int(text) if text.isdigit() else -1


class Reconciler:
    def __init__(
        self,
        api: Api,
        config: OperatorConfig,
        metrics: Metrics,
        identity: str = "rackwise",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.config = config
        self.metrics = metrics
        self.clock = clock
        self.builder = StateBuilder(config)
        self.pool = ThreadPoolExecutor(config.api_workers, thread_name_prefix="api")
        self.queue = SchedulingQueue(config.queue())
        self.place_config = self.queue.config.place
        self.recorder = Recorder(api, identity)
        self.launcher = Launcher(
            create=api.create_pod,
            build=lambda launch, rank: pod(launch.view, rank, config),
            submit=self.pool.submit,
            budget=config.launch_budget,
        )
        self.launches: dict[str, Launch] = {}  # job uid -> its pods being made
        self.started: dict[str, float] = {}  # job uid -> when its current run began
        self.not_ready_since: dict[str, float] = {}  # node -> first seen NotReady
        self.noted_nodes: set[tuple[str, str]] = set()  # (node, reason) already reported
        self.node_names: set[str] = set()  # every Node object seen in the last cycle
        self.expect = Expectations(self.clock)  # own writes the cache may not show yet
        # job uid -> the status last written: a cache that lags (or an older watch event that
        # lands after the patch) must not make it written again, with its event, every cycle
        self.written: dict[str, Obj] = {}
        self.marked: set[str] = set()  # job uids marked to move after their next checkpoint
        self.why = PendingPods(api.patch_pod_status, self.recorder, metrics)
        self.access = Access(api.can_write, self.clock, config.protected_namespaces)
        self.refused: dict[str, str] = {}  # uid of an object not scheduled -> why (reported)
        self.refusing: dict[str, str] = {}  # the same, this cycle
        self.groups = GroupRunner(
            config,
            self.queue,
            self.recorder,
            self._bind_pairs,
            self.clock,
            time.time,
            metrics,
            self.expect,
            api.patch_podgroup_status,
            self.why,
        )

    def close(self) -> None:
        """End of a leadership term: the API threads go with it."""
        self.pool.shutdown(wait=False, cancel_futures=True)

    def cycle(self) -> CycleReport:
        start = time.perf_counter()
        report = CycleReport()
        self._made(report)
        nodes, pods = self.api.nodes(), self.api.pods()
        self.refusing = {}
        jobs = self._served(self.api.jobs(), "TrainingJob")
        groups = collect(pods, self.api.podgroups(), self.config)
        groups = [g for g in groups if self._may(g.namespace, g.key, f"pod group {g.key[9:]}")]
        self._count_refused()
        self.expect.settle(pods)
        state = self.builder.build(nodes, pods)
        self._watch_nodes(nodes, state)
        owned: dict[str, list[Obj]] = {}
        for p in pods:
            uid = owned_by(p)
            if uid is not None:
                owned.setdefault(uid, []).append(p)
        live = {str(j["metadata"]["uid"]): j for j in jobs}
        self._forget(set(live) | {g.key for g in groups})
        self.why.forget({str(p["metadata"]["uid"]) for p in pods})
        self._delete(p for uid, ps in owned.items() if uid not in live for p in ps)
        if state is not None:
            self.expect.reserve(state.snapshot, pods)
        pending: Pending = {}
        running: dict[str, tuple[JobView, list[Obj]]] = {}
        for job in jobs:
            handle = functools.partial(self._job, job, owned, state, pending, running)
            self.isolated(job, report, handle)
        waiting = self._groups(groups, state, report)
        self._place(pending, running, state, report, waiting)
        self._launch(report)
        refs = {str(g.ref()["uid"]) for g in groups}
        self.recorder.forget(set(live) | refs | {str(n["metadata"].get("uid")) for n in nodes})
        report.seconds = time.perf_counter() - start
        self.metrics.cycle(report.pending, report.invalid, len(self.launches), report.seconds)
        return report

    def _forget(self, live: set[str]) -> None:
        """Drop what is remembered of deleted jobs: memory stays bounded by the live ones."""
        self.launches = {u: v for u, v in self.launches.items() if u in live}
        self.started = {u: v for u, v in self.started.items() if u in live}
        self.written = {u: v for u, v in self.written.items() if u in live}
        self.expect.forget(live)
        self.queue.forget(live)

    # namespaces not served (access.py)
    def _served(self, objs: list[Obj], kind: str) -> list[Obj]:
        out = []
        for obj in objs:
            meta = obj["metadata"]
            if self._may(meta["namespace"], str(meta["uid"]), f"{kind} {key(obj)}"):
                out.append(obj)
        return out

    def _may(self, namespace: str, uid: str, what: str) -> bool:
        """Whether the object is scheduled; the first time it is not, an event says why in
        the operator's namespace."""
        reason = self.access.refusal(namespace)
        if reason is None:
            return True
        self.refusing[uid] = reason
        if self.refused.get(uid) != reason:
            lease = self.config.leader_election
            ref = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}
            ref |= {"name": lease.name, "namespace": lease.namespace}
            message = f"{what} is not scheduled: {why(reason, namespace)}"
            if self._try(self.recorder.record, ref, "Warning", reason, message, uid):
                self.refused[uid] = reason
        return False

    def _count_refused(self) -> None:
        """The gauge of objects not scheduled now; those gone or served since are forgotten
        (one that is refused again is reported again)."""
        self.refused = {u: r for u, r in self.refused.items() if u in self.refusing}
        for reason in (PROTECTED, NOT_SERVED):
            self.metrics.ignored.labels(reason).set(list(self.refusing.values()).count(reason))

    def _groups(
        self, groups: list[Members], state: ClusterState | None, report: CycleReport
    ) -> dict[str, Waiting]:
        """Pod groups ready for the queue; each handled on its own, as jobs are."""
        self.groups.forget({g.key for g in groups})
        out: dict[str, Waiting] = {}
        for members in groups:
            if self.expect.waiting(members.key):
                continue  # the cache does not show its last bindings yet
            try:
                found = self.groups.one(members, state)
            except InvalidSpecError as exc:
                report.invalid += 1
                self.groups.tell(members, "Warning", "InvalidSpec", str(exc))
                continue
            except Exception:  # as for jobs: this group's surprise must not stop the others
                report.errors += 1
                self.metrics.job_errors.inc()
                log.exception("pod group handling failed", group=members.key)
                continue
            if found is not None:
                out[members.key] = found
        return out

    def isolated(self, job: Obj, report: CycleReport, handle: Callable[[], None]) -> bool:
        """Run one job's handling; False when it raised (reported on the job, or logged)."""
        try:
            handle()
        except InvalidSpecError as exc:
            report.invalid += 1
            self._invalid(job, str(exc))
        except Exception:  # one job's surprise must not stop the others; its stack is logged
            report.errors += 1
            self.metrics.job_errors.inc()
            log.exception("job handling failed", job=key(job))
        else:
            return True
        return False

    # nodes
    def _watch_nodes(self, nodes: list[Obj], state: ClusterState | None) -> None:
        now = self.clock()
        ready = state.ready if state else set()
        names: set[str] = set()
        for node in nodes:
            name = node["metadata"]["name"]
            names.add(name)
            if name in ready:
                self.not_ready_since.pop(name, None)
            else:
                self.not_ready_since.setdefault(name, now)
            reason = state.excluded.get(name) if state else None
            if reason and (name, reason) not in self.noted_nodes:
                self.noted_nodes.add((name, reason))
                self._try(self.recorder.record, node_ref(node), "Warning", "NodeIgnored", reason)
        self.node_names = names
        self.not_ready_since = {n: t for n, t in self.not_ready_since.items() if n in names}
        self.noted_nodes = {(n, r) for n, r in self.noted_nodes if n in names}

    def _lost(self, node: str | None) -> bool:
        """Gone, or NotReady for longer than the grace period. A cordoned node is not lost,
        and a node rackwise ignores (no labels) keeps the pods already on it."""
        if node is None or node not in self.node_names:
            return True
        since = self.not_ready_since.get(node)
        return since is not None and self.clock() - since > self.config.node_grace_s

    # jobs
    def _job(
        self,
        job: Obj,
        owned: dict[str, list[Obj]],
        state: ClusterState | None,
        pending: Pending,
        running: dict[str, tuple[JobView, list[Obj]]],
    ) -> None:
        uid = str(job["metadata"]["uid"])
        if (job.get("status") or {}).get("phase") in st.TERMINAL:
            self._finished(job, owned.get(uid, []))
            return
        if uid in self.launches or self.expect.waiting(uid):
            return  # its pods being made, or the cache does not show what was just done to it
        view = translate(job, self.config)
        pods = owned.get(uid, [])
        stale = [p for p in pods if _stale(view, p)]
        if view.spec.suspend:
            self._suspend(view, pods)
        elif stale:
            self._delete(stale)  # made from a spec since edited: made again from the new one
        elif len(pods) > view.total_pods:
            self._rollback(view, pods, "Resized", "its size changed; it is placed again")
        elif len(pods) < view.total_pods:
            self._make(view, pods)
        else:
            self._existing(view, pods, state, pending, running)

    def _make(self, view: JobView, pods: list[Obj]) -> None:
        """Make the pods it lacks, unbound: every rank of a gang not placed yet, the lost
        ranks of one that may be repaired near its bound pods; one that may not goes whole."""
        if any(p["spec"].get("nodeName") for p in pods) and not self._repairable(view):
            self._rollback(view, pods, "IncompleteGang", "the gang will be placed again")
            return
        if self.queue.backing_off(view.uid, self.clock()):
            return  # a failed creation or a restart: not before its backoff has passed
        if not self._try(self.api.ensure_service, view.namespace, service(view)):
            # without it MASTER_ADDR does not resolve: no pod is made, try again later
            self.queue.backoff(view.uid, self.clock())
            self._pending(view, "BindFailed", "could not create the rendezvous Service; retrying")
            return
        have = {_rank(p) for p in pods}
        missing = tuple(r for r in range(view.total_pods) if r not in have)
        self.launches[view.uid] = Launch(view, missing)

    def _existing(
        self,
        view: JobView,
        pods: list[Obj],
        state: ClusterState | None,
        pending: Pending,
        running: dict[str, tuple[JobView, list[Obj]]],
    ) -> None:
        """Bring a gang whose pods all exist to its next step: queued while none is bound,
        running once all are."""
        phases = [p.get("status", {}).get("phase") for p in pods]
        if "Failed" in phases:
            self._pod_failed(view, pods)
            return
        if all(p == "Succeeded" for p in phases):
            self._running_status(view, pods)
            return
        bound = [p for p in pods if p["spec"].get("nodeName")]
        lost = [p for p in bound if self._lost(host_of(p))]
        if lost:
            self._node_lost(view, pods, lost)
        elif len(bound) == len(pods):
            self._running_status(view, pods)
            running[view.uid] = (view, pods)
        elif bound:
            self._complete(view, pods, state)
        else:
            pending[view.uid] = (view, self._waiting(view, pods))

    def _waiting(self, view: JobView, pods: list[Obj]) -> Waiting:
        """Its unbound gang, as the queue sees a pod group: rank i = pods[i]."""
        ordered = sorted(pods, key=_rank)
        members = Members(view.namespace, view.name, ordered, None)
        expected = _seconds(view.spec.expected_runtime_seconds)
        return Waiting(view.uid, members, view.gang, ordered, st.created(view.obj), expected)

    def _pod_failed(self, view: JobView, pods: list[Obj]) -> None:
        """The whole gang restarts (its pods deleted, queued again in its place) until the
        backoff limit; then the job is Failed and no pod of it is left."""
        failed = next(p for p in pods if (p.get("status") or {}).get("phase") == "Failed")
        name, limit = failed["metadata"]["name"], view.spec.backoff_limit
        restarts = int((view.obj.get("status") or {}).get("restarts") or 0)
        self._delete(pods)
        self.started.pop(view.uid, None)
        if restarts < limit:
            self.queue.backoff(view.uid, self.clock())
            message = (
                f"pod {name} failed; the gang restarts from its latest checkpoint "
                f"(restart {restarts + 1} of {limit})"
            )
            cond = self._cond(view, "Placed", False, "Restarting", message)
            self._set(view, "Pending", [cond], restarts=restarts + 1)
            return
        message = f"pod {name} failed after {restarts} restarts (backoffLimit {limit})"
        placed = self._cond(view, "Placed", False, "BackoffLimitExceeded", message)
        running = self._cond(view, "Running", False, "BackoffLimitExceeded", message)
        self._set(view, "Failed", [placed, running])

    def _suspend(self, view: JobView, pods: list[Obj]) -> None:
        if pods:
            self._delete(pods)
        self.started.pop(view.uid, None)
        message = "spec.suspend is true: no pods; it is queued again when set to false"
        self._set(view, "Suspended", [self._cond(view, "Placed", False, "Suspended", message)])

    def _finished(self, job: Obj, pods: list[Obj]) -> None:
        """A failed job keeps no pod; a finished one goes when its TTL has passed."""
        status = job.get("status") or {}
        if status.get("phase") == "Failed" and pods:
            self._delete(pods)
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        done = st.seconds(status.get("completionTime"))
        if isinstance(ttl, int) and done and time.time() - done >= ttl:
            meta = job["metadata"]
            self._try(self.api.delete_job, meta["namespace"], meta["name"])

    def _repairable(self, view: JobView) -> bool:
        return view.spec.repair is RepairPolicy.LOST_PODS and piecemeal(view.gang)

    def _node_lost(self, view: JobView, pods: list[Obj], lost: list[Obj]) -> None:
        nodes = sorted({str(host_of(p)) for p in lost})
        where = ", ".join(nodes[:5]) + (" ..." if len(nodes) > 5 else "")
        if not self._repairable(view):
            self._rollback(view, pods, "NodeLost", f"node {where} lost; moving the whole gang")
            return
        self._delete(lost)
        message = f"node {where} lost; re-placing {len(lost)} of {len(pods)} pods near the rest"
        self._set(view, "Repairing", [self._cond(view, "Placed", False, "NodeLost", message)])

    def _complete(self, view: JobView, pods: list[Obj], state: ClusterState | None) -> None:
        """Some pods bound, some not (lost ones made again, a binding that failed, an operator
        that stopped mid-binding): the unbound ones go near the bound, all or none of them, or
        the gang goes whole when the job does not allow piecemeal repair."""
        if not self._repairable(view):
            self._rollback(view, pods, "IncompleteGang", "the gang will be placed again")
            return
        if state is None or self.queue.backing_off(view.uid, self.clock()):
            return
        survivors = {_rank(p): str(host_of(p)) for p in pods if p["spec"].get("nodeName")}
        unbound = {_rank(p): p for p in pods if not p["spec"].get("nodeName")}
        found = repair(state.snapshot, view.gang, survivors, sorted(unbound), self.place_config)
        if found is None:
            message = f"no room for {len(unbound)} pods near the rest of the gang yet"
            cond = self._cond(view, "Placed", False, "RepairWaiting", message)
            self._set(view, "Repairing", [cond])
            return
        state.snapshot.apply(view.gang, found)
        if not all(self.groups.bind(view.uid, view.namespace, view.gang, found, unbound)):
            self.queue.backoff(view.uid, self.clock())  # the rest are completed next time
            return
        self._placed(view, self._combined(state, view, survivors, found), repair=True)

    def _combined(
        self, state: ClusterState, view: JobView, survivors: dict[int, str], found: Placement
    ) -> Placement:
        kept = [PodAssignment(rank=r, host=h) for r, h in survivors.items()]
        pods = tuple(sorted([*kept, *found.pods], key=lambda p: p.rank))
        fabric = state.fabric
        cost = traffic(fabric, view.gang, pods)
        hosts = [fabric.host_index[p.host] for p in pods if p.host in fabric.host_index]
        return found.model_copy(
            update={
                "pods": pods,
                "domains": domains_spanned(fabric, hosts),
                "cost": cost.cost,
                "bound": None,
                "gap": None,
                "optimal": False,
                "engine": "repair",
            }
        )

    # pending jobs: the queue decides, this applies
    def _place(
        self,
        pending: Pending,
        running: dict[str, tuple[JobView, list[Obj]]],
        state: ClusterState | None,
        report: CycleReport,
        groups: dict[str, Waiting],
    ) -> None:
        """Every waiting gang, pod group or TrainingJob, goes into the queue the same way."""
        waiting = {**groups, **{uid: w for uid, (_, w) in pending.items()}}
        report.pending += len(waiting)
        depth = dict.fromkeys(self.config.pool_names, 0)
        for w in waiting.values():
            depth[w.gang.pool] = depth.get(w.gang.pool, 0) + 1
        self.metrics.depth(depth)
        for uid in self.queue.keys() - set(waiting):
            self.queue.remove(uid)
        self.groups.enqueue(waiting)
        if state is None:
            for view, unbound in pending.values():
                self.waits(view, unbound, "NoNodes", "the cluster has no labelled nodes")
            return
        if not len(self.queue):
            self.marked = set()  # no waiting gang: no move is wanted
            return  # nothing waits: no need to describe every running gang to the queue
        holding = [r for r in (self._running(state, *vp) for vp in running.values()) if r]
        decisions = self.queue.cycle(self.clock(), state.snapshot, holding)
        apply(decisions, _CycleEffects(self, pending, running, state, report, groups))

    def _running(self, state: ClusterState, view: JobView, pods: list[Obj]) -> Running | None:
        """What the queue may preempt: a gang holding hosts rackwise knows (None otherwise)."""
        index = state.fabric.host_index
        hosts = [host_of(p) for p in pods]
        if any(h not in index for h in hosts):
            return None
        assignments = tuple(_assignment(view, p, str(h)) for p, h in zip(pods, hosts, strict=True))
        placement = Placement(
            gang=view.gang.name, policy="rackwise", status=PlacementStatus.PLACED, pods=assignments
        )
        started = self.started.get(view.uid)
        if started is None:  # placed before this operator started: the pods' age tells
            age = time.time() - min(st.created(p) for p in pods)
            started = self.started.setdefault(view.uid, self.clock() - max(age, 0.0))
        spec = view.spec
        expected = _seconds(spec.expected_runtime_seconds)
        return Running(
            view.uid,
            view.gang,
            placement,
            started,
            tenant=view.namespace,
            checkpoint_s=_seconds(spec.checkpoint_interval_seconds),
            end_s=None if expected is None else started + expected,
            checkpointed_s=self._checkpointed(view),
        )

    def _checkpointed(self, view: JobView) -> float:
        """When the job last said it checkpointed (its annotation), on this operator's clock;
        -inf when it never did: a job is moved only after a checkpoint it reported."""
        notes = view.obj["metadata"].get("annotations") or {}
        at = st.parse_time(notes.get(CHECKPOINTED))
        return -math.inf if at is None else self.clock() - max(0.0, time.time() - at)

    def starts(
        self,
        starts: list[tuple[str, Placement]],
        pending: Pending,
        groups: dict[str, Waiting],
        state: ClusterState,
        report: CycleReport,
    ) -> None:
        """Every gang the queue started, pod groups and TrainingJobs alike: all their pods
        bound in one batch, then each told how it went (its status and event writes, too, on
        the API threads: each touches only its own gang's entries)."""
        chosen = [(groups.get(uid) or pending[uid][1], placement) for uid, placement in starts]
        for waiting, placement in chosen:
            state.snapshot.apply(waiting.gang, placement)
        batch = [
            Binding(w.key, w.members.namespace, w.gang, p, dict(enumerate(w.pods)))
            for w, p in chosen
        ]
        bound = list(zip(chosen, self.groups.bind_many(batch), strict=True))
        told = functools.partial(self._told, pending=pending, groups=groups, report=report)
        for (_, results), ok in zip(bound, self._map(told, bound), strict=True):
            if ok:
                report.placed += 1
                report.pods_bound += len(results)

    def _told(
        self,
        item: tuple[tuple[Waiting, Placement], list[bool]],
        pending: Pending,
        groups: dict[str, Waiting],
        report: CycleReport,
    ) -> bool:
        """A started gang's status and events, once its bindings are known; True when all
        its pods were bound."""
        (waiting, placement), results = item
        if waiting.key in groups:
            return self.groups.started(waiting, placement, results)
        view = pending[waiting.key][0]
        done = functools.partial(self._started, view, placement, results)
        return self.isolated(view.obj, report, done) and all(results)

    def evict(
        self, eviction: Eviction, view: JobView, pods: list[Obj], gangs: dict[str, GangRequest]
    ) -> None:
        """Its pods go; a Preempted condition naming the preemptor stays while it waits."""
        preemptor = gangs[eviction.preemptor]
        message = (
            f"preempted by {preemptor.name} (priority {preemptor.priority}); "
            f"{eviction.lost_gpu_s / 3600:.2f} GPU-hours since its last checkpoint lost; "
            "queued again"
        )
        self._delete(pods)
        self.metrics.preempted(view.gang)
        placed = self._cond(view, "Placed", False, "Preempted", message)
        preempted = self._cond(view, "Preempted", True, "Preempted", message)
        self._set(view, "Pending", [placed, preempted])

    def move(
        self, view: JobView, pods: list[Obj], move: Move, gangs: dict[str, GangRequest]
    ) -> None:
        """Moved at the checkpoint it reported: its pods go, and it restarts on the hosts the
        queue holds for it as soon as they are free."""
        why = (
            f"to let {gangs[move.waiting].name} start"
            if move.waiting in gangs
            else "to cut its own cross-fabric traffic"
        )
        self._delete(pods)
        self.metrics.moved(view.gang)
        self._pending(view, "Moved", f"moved at its checkpoint {why}; restarting on new hosts")

    def _started(self, view: JobView, placement: Placement, results: list[bool]) -> None:
        """Its pods were bound where the queue placed them (`results`), as a group's are."""
        if not all(results):
            self.queue.backoff(view.uid, self.clock())
            failed = len(results) - sum(results)
            message = (
                f"{failed} of {len(results)} bindings failed; the gang is completed or placed again"
            )
            self._pending(view, "BindFailed", message)
            return
        self.queue.succeeded(view.uid)
        self.started[view.uid] = self.clock()
        self._placed(view, placement, repair=False)

    # pods being made
    def _launch(self, report: CycleReport) -> None:
        """Send the creations the budget allows; they run while this cycle ends and the next
        begins (`_made` takes them in)."""
        if self.launches:
            self._made(report)
            self.launcher.step(list(self.launches.values()))
            self._made(report)

    def _made(self, report: CycleReport) -> None:
        """Gangs whose pods are all made are judged once the cache shows them; a failed
        creation, once none of its calls is in flight, deletes what it made. A call that
        raised something unexpected is that job's alone: logged, and its making starts over."""
        for uid, launch in list(self.launches.items()):
            if not self.isolated(launch.view.obj, report, launch.collect):
                del self.launches[uid]
            elif launch.finished:
                del self.launches[uid]
                names = [launch.pod_name(r) for r in launch.ranks]
                self.expect.created(uid, launch.view.namespace, names)
            elif launch.error is not None and not launch.inflight:
                del self.launches[uid]
                ns = launch.view.namespace
                pairs = [(ns, launch.pod_name(r)) for r in launch.created]
                self._map(lambda t: self._try(self.api.delete_pod, *t), pairs)
                self._launch_failed(launch)

    def _launch_failed(self, launch: Launch) -> None:
        assert launch.error is not None
        name, error = launch.error
        view = launch.view
        if error.rejected:
            reason = "PodRejected"
            message = f"the API server rejected pod {name}: {error.message}"
        else:
            reason = "BindFailed"
            message = f"could not create pod {name} ({error.message}); retrying"
        self.queue.backoff(view.uid, self.clock(), long=error.rejected)
        phase = "Repairing" if launch.size < view.total_pods else "Pending"
        self._set(view, phase, [self._cond(view, "Placed", False, reason, message)])

    def _bind_pairs(self, pairs: list[tuple[str, str, str]]) -> list[bool]:
        return self._map(lambda t: self._try(self.api.bind, *t), pairs)

    def _try(self, fn: Callable[..., None], *args: Any) -> bool:
        try:
            fn(*args)
        except ApiError as exc:
            self.metrics.api_error(getattr(fn, "__name__", "call"))
            log.warning("api call failed", call=getattr(fn, "__name__", "call"), error=str(exc))
            return False
        return True

    def _map(self, fn: Callable[[Any], T], items: list[Any]) -> list[T]:
        """fn over items on the API thread pool (a single item runs inline)."""
        return list(self.pool.map(fn, items)) if len(items) > 1 else [fn(i) for i in items]

    def _delete(self, pods: Iterable[Obj]) -> None:
        pods = list(pods)
        pairs = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods]
        self._map(lambda t: self._try(self.api.delete_pod, *t), pairs)
        for uid in {owned_by(p) for p in pods} - {None}:
            self.expect.gone(str(uid), [p for p in pods if owned_by(p) == uid])

    # status
    def _rollback(self, view: JobView, pods: list[Obj], reason: str, message: str) -> None:
        self._delete(pods)
        self._pending(view, reason, f"{reason}: {message}")

    def waits(self, view: JobView, unbound: Waiting, reason: str, message: str) -> None:
        """A queued job and its pods say why it waits."""
        self._pending(view, reason, message)
        self.why.tell(unbound.pods, reason, message)

    def _pending(self, view: JobView, reason: str, message: str) -> None:
        self._set(view, "Pending", [self._cond(view, "Placed", False, reason, message)])

    def _running_status(self, view: JobView, pods: list[Obj]) -> None:
        phases = [p.get("status", {}).get("phase") for p in pods]
        old = view.obj.get("status") or {}
        before: Obj = next(
            (c for c in old.get("conditions") or [] if c.get("type") == "Placed"), {}
        )
        message = before.get("message") if before.get("status") == "True" else "all pods bound"
        placed = self._cond(view, "Placed", True, "Placed", str(message))
        if "Failed" in phases:
            phase, reason, text = "Failed", "PodFailed", "a pod failed"
        elif all(p == "Succeeded" for p in phases):
            phase, reason, text = "Succeeded", "Completed", "all pods succeeded"
        elif all(p == "Running" for p in phases):
            phase, reason, text = "Running", "AllPodsRunning", "all pods running"
        else:
            phase, reason, text = "Placed", "Starting", "waiting for pods to start"
        running = self._cond(view, "Running", phase == "Running", reason, text)
        conditions = [placed, running]
        if view.uid in self.marked:
            message = f"will be moved after its next checkpoint (annotation {CHECKPOINTED})"
            conditions.append(self._cond(view, "MoveRequested", True, "Defragmentation", message))
        self._set(view, phase, conditions, old.get("placement"))

    def _placed(self, view: JobView, whole: Placement, repair: bool) -> None:
        message = (
            f"{view.total_pods} pods across "
            + " ".join(f"{level}={n}" for level, n in whole.domains.items())
            + (" (lost pods re-placed)" if repair else "")
        )
        placed = self._cond(view, "Placed", True, "Placed", message)
        running = self._cond(view, "Running", False, "Starting", "waiting for pods to start")
        if _first_placement(view) and not repair:
            self.metrics.placed(view.gang, time.time() - st.created(view.obj))
        self._set(view, "Placed", [placed, running], st.summary(whole))
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

    def _invalid(self, job: Obj, message: str) -> None:
        conditions = (job.get("status") or {}).get("conditions") or []
        placed = st.condition("Placed", False, "InvalidSpec", message, conditions)
        self._write(job, st.build(job, "Invalid", [placed], 0))

    def _cond(self, view: JobView, kind: str, ok: bool, reason: str, message: str) -> Obj:
        conditions = (view.obj.get("status") or {}).get("conditions") or []
        return st.condition(kind, ok, reason, message, conditions)

    def _set(
        self,
        view: JobView,
        phase: str,
        conditions: list[Obj],
        placement: Obj | None = None,
        restarts: int | None = None,
    ) -> None:
        if phase == "Pending":
            conditions = [*conditions, *self._still_preempted(view, conditions)]
        gpus = total_gpus(view.spec)
        self._write(view.obj, st.build(view.obj, phase, conditions, gpus, placement, restarts))

    def _still_preempted(self, view: JobView, conditions: list[Obj]) -> list[Obj]:
        """A preempted job keeps saying so until it is placed again."""
        if any(c["type"] == "Preempted" for c in conditions):
            return []
        old = (view.obj.get("status") or {}).get("conditions") or []
        return [c for c in old if c.get("type") == "Preempted" and c.get("status") == "True"]

    def _write(self, job: Obj, new: Obj) -> None:
        """Patch the status if it changed; an event when the Placed reason changes (compared
        with the stored status, so a restarted operator does not repeat itself)."""
        meta = job["metadata"]
        old = self.written.get(str(meta.get("uid"))) or job.get("status") or {}
        if st.same(old, new):
            return
        if not self._try(self.api.patch_status, meta["namespace"], meta["name"], new):
            return
        before, after = st.reason_of({"status": old}), st.reason_of({"status": new})
        job["status"] = new
        self.written[str(meta.get("uid"))] = new
        if after and after != before:
            placed = next(c for c in new["conditions"] if c["type"] == "Placed")
            kind = "Warning" if after in WARNINGS else "Normal"
            self._try(self.recorder.record, job_ref(job), kind, after, placed["message"])


@dataclass
class _CycleEffects:
    """The operator's side of the port (queue/effects.py) for one cycle: each effect through
    the API server, each object's handling on its own (`Reconciler.isolated`)."""

    r: Reconciler
    pending: Pending
    running: dict[str, tuple[JobView, list[Obj]]]
    state: ClusterState
    report: CycleReport
    groups: dict[str, Waiting]

    def __post_init__(self) -> None:
        self.gangs = {
            **{u: g.gang for u, g in self.groups.items()},
            **{u: v.gang for u, (v, _) in self.pending.items()},
        }

    def learnt(self, decisions: Decisions) -> None:
        by_name = {g.name: g for g in self.gangs.values()}
        for placement in decisions.tried:
            self.report.solve_seconds += placement.solve_seconds
            if placement.gang in by_name:
                self.r.metrics.observe(placement, by_name[placement.gang])
        self.r.marked = set(decisions.marked)

    def fail(self, key: str, exc: Exception) -> None:
        self.report.errors += 1
        self.r.metrics.job_errors.inc()
        log.error("job handling failed", job=self.gangs[key].name, exc_info=exc)

    def evict(self, eviction: Eviction) -> None:
        view, pods = self.running[eviction.victim]
        evict = functools.partial(self.r.evict, eviction, view, pods, self.gangs)
        self.r.isolated(view.obj, self.report, evict)

    def move(self, move: Move) -> None:
        view, pods = self.running[move.key]
        moved = functools.partial(self.r.move, view, pods, move, self.gangs)
        self.r.isolated(view.obj, self.report, moved)

    def wait(self, key: str, wait: Wait) -> None:
        if key in self.groups:
            self.r.groups.wait(self.groups[key], wait.reason.value, wait.message)
            return
        view, unbound = self.pending[key]
        waits = functools.partial(self.r.waits, view, unbound, wait.reason.value, wait.message)
        self.r.isolated(view.obj, self.report, waits)

    def nominate(self, key: str, placement: Placement) -> None:
        pass  # the queue holds its hosts; it starts there once its victims' pods are gone

    def start(self, starts: list[tuple[str, Placement]]) -> None:
        self.r.starts(starts, self.pending, self.groups, self.state, self.report)
