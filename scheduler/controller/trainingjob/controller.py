"""The TrainingJob controller: each job brought to its next step, as a Job controller would.

Contract. Takes a TrainingJob, the pods it owns and the cluster state. Decides its next step: a
finished job keeps no pod (a failed one) or goes when its TTL has passed; a suspended job has no
pods; pods made from an edited spec are made again; a gang of the wrong size is placed again; the
pods it lacks are made, unbound (trainingjob/launch.py), after its rendezvous Service exists; a
failed pod restarts the whole gang until the backoff limit; pods on a lost node are put back near
the rest (`repair: LostPods`, piecemeal gangs) or the gang is placed again whole; a gang half bound
is completed near its bound pods. A gang whose pods all exist and none is bound is handed to the
queue as a `Waiting` (rank i = pods[i]); one whose pods are all bound is running. Promises: one
job's handling touches only that job's pods and status; a job whose last writes the cache does not
show yet is not judged (runtime/expect.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import structlog

from scheduler.controller.cluster.nodewatch import NodeWatch
from scheduler.controller.cluster.state import ClusterState
from scheduler.controller.config import OperatorConfig
from scheduler.controller.podgroup.members import QUEUE_LABEL, Members
from scheduler.controller.podgroup.runner import (
    GroupRunner,
    Waiting,
    claims_message,
    gates_message,
)
from scheduler.controller.runtime import status as st
from scheduler.controller.runtime.calls import Calls
from scheduler.controller.runtime.expect import Expectations
from scheduler.controller.runtime.objects import Pod, TrainingJob
from scheduler.controller.runtime.podrequests import claims_of
from scheduler.controller.trainingjob.launch import Launch
from scheduler.controller.trainingjob.pods import RANK_LABEL, generation, made_from, service
from scheduler.controller.trainingjob.spec import RepairPolicy
from scheduler.controller.trainingjob.status import JobStatus
from scheduler.controller.trainingjob.translate import JobView, translate
from scheduler.model import Placement, PodAssignment
from scheduler.model.placement import PlaceConfig
from scheduler.placement.cost import domains_spanned, traffic
from scheduler.placement.repair import piecemeal, repair
from scheduler.queue import SchedulingQueue

Obj = dict[str, Any]
log = structlog.get_logger("rackwise")
Pending = dict[str, tuple[JobView, Waiting]]  # job uid -> the job and its unbound gang
Bound = dict[str, tuple[JobView, list[Pod]]]  # job uid -> the job and its bound pods


class ServiceApi(Protocol):
    def ensure_service(self, namespace: str, body: Obj) -> None: ...
    def delete_job(self, namespace: str, name: str) -> None: ...


def seconds(value: int | None) -> float | None:
    return None if value is None else float(value)


def _stale(view: JobView, pod: Pod) -> bool:
    """An unbound pod made from an earlier generation of its job's spec (a bound one runs on)."""
    return not pod.node and made_from(pod) != generation(view.obj)


def _same_spec(old: TrainingJob, new: TrainingJob) -> bool:
    return old.meta.generation == new.meta.generation and old.spec == new.spec


def _template_claims(job: TrainingJob) -> list[tuple[str, str]]:
    """(template, claim) for each resource claim its workers' or roles' templates ask for."""
    roles = (job.spec or {}).get("roles")
    which = [None, *range(len(roles) if isinstance(roles, list) else 0)]
    return [
        ("template" if role is None else f"roles[{role}] template", claim)
        for role in which
        for claim in claims_of(job.template(role)[1])
    ]


def rank_of(pod: Pod) -> int:
    text = pod.meta.labels.get(RANK_LABEL, "")
    return int(text) if text.isdigit() else -1


@dataclass
class TrainingJobs:
    config: OperatorConfig
    api: ServiceApi
    queue: SchedulingQueue
    clock: Callable[[], float]
    calls: Calls
    status: JobStatus
    nodes: NodeWatch
    groups: GroupRunner
    expect: Expectations
    launches: dict[str, Launch]  # shared with the reconciler, which makes the pods
    started: dict[str, float]  # shared with the queue driver: when each run began
    place_config: PlaceConfig
    wall: Callable[[], float]  # the API's clock (completion times, for TTLs)
    # gangs whose pods are to be made this cycle, with their Service and the ranks missing
    making: list[tuple[JobView, Obj, tuple[int, ...]]] = field(default_factory=list)
    views: dict[str, JobView] = field(default_factory=dict)  # job uid -> its last translation

    def forget(self, live: set[str]) -> None:
        self.views = {uid: v for uid, v in self.views.items() if uid in live}

    def _translated(self, job: TrainingJob) -> JobView:
        """The job's translation, made again only when its spec changed (a new generation, or
        a spec that differs): parsing and checking a spec was most of a waiting job's share of
        every cycle. A translation depends on nothing else that can change: the spec, the
        job's name and namespace (fixed for its uid) and the config (fixed)."""
        kept = self.views.get(job.meta.uid)
        if kept is not None and _same_spec(kept.obj, job):
            return replace(kept, obj=job)
        view = self.views[job.meta.uid] = translate(job, self.config)
        return view

    def handle(
        self,
        job: TrainingJob,
        owned: dict[str, list[Pod]],
        state: ClusterState | None,
        pending: Pending,
        running: Bound,
    ) -> None:
        uid = job.meta.uid
        if job.status.phase in st.TERMINAL:
            self._finished(job, owned.get(uid, []))
            return
        if uid in self.launches or self.expect.waiting(uid):
            return  # its pods being made, or the cache does not show what was just done to it
        if self.calls.refusing(owned.get(uid, [])):
            return  # deletes refused: tried again (calls.py); judged once they went, not redone
        view = self._translated(job)
        pods = owned.get(uid, [])
        stale = [p for p in pods if _stale(view, p)]
        claims = _template_claims(job)
        if view.spec.suspend:
            self._suspend(view, pods)
        elif claims:
            self.status.pending(view, "ResourceClaimsUnsupported", claims_message(claims))
        elif stale:
            self.calls.delete(stale)  # made from a spec since edited: made again from the new one
        elif len(pods) > view.total_pods:
            self.status.rollback(view, pods, "Resized", "its size changed; it is placed again")
        elif len(pods) < view.total_pods:
            self._make(view, pods)
        else:
            self._existing(view, pods, state, pending, running)

    def _make(self, view: JobView, pods: list[Pod]) -> None:
        """Make the pods it lacks, unbound: every rank of a gang not placed yet, the lost
        ranks of one that may be repaired near its bound pods; one that may not goes whole."""
        if any(p.node for p in pods) and not self._repairable(view):
            self.status.rollback(view, pods, "IncompleteGang", "the gang will be placed again")
            return
        if self.queue.backing_off(view.uid, self.clock()):
            return  # a failed creation or a restart: not before its backoff has passed
        have = {rank_of(p) for p in pods}
        missing = tuple(r for r in range(view.total_pods) if r not in have)
        self.making.append((view, service(view), missing))

    def make(self) -> None:
        """The Services of this cycle's new gangs, created together on the API threads (one
        after another, 200 new jobs waited 2.8 s on them); each gang whose Service exists has its
        pods made (trainingjob/launch.py). Without it MASTER_ADDR does not resolve: no pod is
        made, and the job tries again after its backoff."""
        making, self.making = self.making, []
        made = self.calls.each(self._service, [(view, body) for view, body, _ in making])
        for (view, _, missing), ok in zip(making, made, strict=True):
            if ok:
                self.launches[view.uid] = Launch(view, missing)
                continue
            self.queue.backoff(view.uid, self.clock())
            message = "could not create the rendezvous Service; retrying"
            self.status.pending(view, "BindFailed", message)

    def _service(self, item: tuple[JobView, Obj]) -> bool:
        view, body = item
        try:
            return self.calls.attempt(self.api.ensure_service, view.namespace, body)
        except Exception:  # one Service's surprise must not stop the others'
            log.exception("service creation failed", job=view.gang.name)
            return False

    def _existing(
        self,
        view: JobView,
        pods: list[Pod],
        state: ClusterState | None,
        pending: Pending,
        running: Bound,
    ) -> None:
        """Bring a gang whose pods all exist to its next step: queued while none is bound,
        running once all are."""
        phases = [p.phase for p in pods]
        if "Failed" in phases:
            self._pod_failed(view, pods)
            return
        if all(p == "Succeeded" for p in phases):
            self.status.running(view, pods)
            return
        bound = [p for p in pods if p.node]
        lost = [p for p in bound if self.nodes.lost(p.node)]
        if lost:
            self._node_lost(view, pods, lost)
        elif len(bound) == len(pods):
            self.status.running(view, pods)
            running[view.uid] = (view, pods)
        elif any(p.gates for p in pods if not p.node):
            gated = [p for p in pods if not p.node and p.gates]
            self.status.pending(view, "WaitingForGates", gates_message(gated, len(pods)))
        elif bound:
            self._complete(view, pods, state)
        else:
            pending[view.uid] = (view, self._waiting(view, pods))

    def _waiting(self, view: JobView, pods: list[Pod]) -> Waiting:
        """Its unbound gang, as the queue sees a pod group: rank i = pods[i]."""
        ordered = sorted(pods, key=rank_of)
        members = Members(view.namespace, view.name, ordered, None)
        expected = seconds(view.spec.expected_runtime_seconds)
        created = st.created(view.obj.meta)
        queue = view.obj.meta.labels.get(QUEUE_LABEL, "")
        return Waiting(view.uid, members, view.gang, ordered, created, expected, queue)

    def _pod_failed(self, view: JobView, pods: list[Pod]) -> None:
        """The whole gang restarts (its pods deleted, queued again in its place) until the
        backoff limit; then the job is Failed and no pod of it is left."""
        failed = next(p for p in pods if p.phase == "Failed")
        name, limit = failed.meta.name, view.spec.backoff_limit
        restarts = view.obj.status.restarts or 0
        self.calls.delete(pods)
        self.started.pop(view.uid, None)
        if restarts < limit:
            self.queue.backoff(view.uid, self.clock())
            message = (
                f"pod {name} failed; the gang restarts from its latest checkpoint "
                f"(restart {restarts + 1} of {limit})"
            )
            cond = self.status.cond(view, "Placed", False, "Restarting", message)
            self.status.set(view, "Pending", [cond], restarts=restarts + 1)
            return
        message = f"pod {name} failed after {restarts} restarts (backoffLimit {limit})"
        placed = self.status.cond(view, "Placed", False, "BackoffLimitExceeded", message)
        running = self.status.cond(view, "Running", False, "BackoffLimitExceeded", message)
        self.status.set(view, "Failed", [placed, running])

    def _suspend(self, view: JobView, pods: list[Pod]) -> None:
        if pods:
            self.calls.delete(pods)
        self.started.pop(view.uid, None)
        message = "spec.suspend is true: no pods; it is queued again when set to false"
        self.status.set(
            view, "Suspended", [self.status.cond(view, "Placed", False, "Suspended", message)]
        )

    def _finished(self, job: TrainingJob, pods: list[Pod]) -> None:
        """A failed job keeps no pod; a finished one goes when its TTL has passed; an edit of
        either (a suspend) is only observed."""
        self.status.observe(job)
        if job.status.phase == "Failed" and pods:
            self.calls.delete(pods)
        ttl, done = job.ttl_s, st.seconds(job.status.finished)
        if ttl is not None and done and self.wall() - done >= ttl:
            self.calls.attempt(self.api.delete_job, job.meta.namespace, job.meta.name)

    def _repairable(self, view: JobView) -> bool:
        return view.spec.repair is RepairPolicy.LOST_PODS and piecemeal(view.gang)

    def _node_lost(self, view: JobView, pods: list[Pod], lost: list[Pod]) -> None:
        nodes = sorted({str(p.node) for p in lost})
        where = ", ".join(nodes[:5]) + (" ..." if len(nodes) > 5 else "")
        if not self._repairable(view):
            self.status.rollback(
                view, pods, "NodeLost", f"node {where} lost; moving the whole gang"
            )
            return
        self.calls.delete(lost)
        message = f"node {where} lost; re-placing {len(lost)} of {len(pods)} pods near the rest"
        self.status.set(
            view, "Repairing", [self.status.cond(view, "Placed", False, "NodeLost", message)]
        )

    def _complete(self, view: JobView, pods: list[Pod], state: ClusterState | None) -> None:
        """Some pods bound, some not (lost ones made again, a binding that failed, an operator
        that stopped mid-binding): the unbound ones go near the bound, all or none of them, or
        the gang goes whole when the job does not allow piecemeal repair."""
        if not self._repairable(view):
            self.status.rollback(view, pods, "IncompleteGang", "the gang will be placed again")
            return
        if state is None or self.queue.backing_off(view.uid, self.clock()):
            return
        survivors = {rank_of(p): str(p.node) for p in pods if p.node}
        unbound = {rank_of(p): p for p in pods if not p.node}
        found = repair(state.snapshot, view.gang, survivors, sorted(unbound), self.place_config)
        if found is None:
            message = f"no room for {len(unbound)} pods near the rest of the gang yet"
            cond = self.status.cond(view, "Placed", False, "RepairWaiting", message)
            self.status.set(view, "Repairing", [cond])
            return
        state.snapshot.apply(view.gang, found)
        if not all(self.groups.bind(view.uid, view.namespace, view.gang, found, unbound)):
            self.queue.backoff(view.uid, self.clock())  # the rest are completed next time
            return
        self.status.placed(view, self._combined(state, view, survivors, found), repair=True)

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
