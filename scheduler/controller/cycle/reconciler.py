"""One reconcile cycle: read everything, fix what is half done, place what is pending.

Contract. Level-triggered: every cycle rebuilds the picture from the API (nodes, pods, jobs, pod
groups), so a restarted or newly elected operator resumes exactly where the cluster is. Each object
is handled on its own: one that cannot be read becomes its InvalidSpec condition, an unexpected
failure is logged with its key and stack and counted, and the cycle goes on with the others. The
operator touches only pods it created (controller owner reference to a live TrainingJob's uid); it
charges every bound pod on a node, whoever placed it.

The cycle only orders the parts, each in its own module with its contract: which objects are served
(cluster/access.py), the cluster state (cluster/state.py, cluster/ledger.py) and which nodes are
lost (cluster/nodewatch.py); each TrainingJob brought to its next step (trainingjob/controller.py:
where a job becomes a waiting gang) and each pod group (podgroup/runner.py); every waiting gang into
the one scheduling queue and its decisions out through the Effects port (binding/driver.py: where a
decision becomes a binding); statuses and events (trainingjob/status.py, pods/podwhy.py); the pods
being made (trainingjob/launch.py). The queue (scheduler/queue) is the same object the simulator
drives."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Protocol, TypeVar

import structlog

from scheduler.controller.binding.driver import CycleReport, Gangs, QueueDriver
from scheduler.controller.binding.leaving import leaving, quota_held
from scheduler.controller.cluster.access import Access, Refusals
from scheduler.controller.cluster.nodewatch import NodeWatch
from scheduler.controller.cluster.state import ClusterState, StateBuilder
from scheduler.controller.config import OperatorConfig
from scheduler.controller.cycle.teams import QueueObjects, charged
from scheduler.controller.podgroup.members import Members, collect, departing
from scheduler.controller.podgroup.runner import GroupRunner, Waiting
from scheduler.controller.pods.affinity import Running, resolve_gang
from scheduler.controller.pods.nominate import Nominations
from scheduler.controller.pods.podwhy import PendingPods
from scheduler.controller.runtime import status as st
from scheduler.controller.runtime.calls import Calls
from scheduler.controller.runtime.events import Recorder
from scheduler.controller.runtime.expect import Expectations, owned_by
from scheduler.controller.runtime.gateway import ApiError
from scheduler.controller.runtime.objects import (
    GroupApi,
    Node,
    Pod,
    PodGroup,
    QueueObject,
    TrainingJob,
)
from scheduler.controller.runtime.observability import Metrics
from scheduler.controller.trainingjob.controller import Pending, TrainingJobs
from scheduler.controller.trainingjob.launch import Launch, Launcher
from scheduler.controller.trainingjob.pods import pod
from scheduler.controller.trainingjob.status import JobStatus
from scheduler.controller.trainingjob.translate import InvalidSpecError, JobView
from scheduler.queue import Running as QueueRunning
from scheduler.queue import SchedulingQueue
from scheduler.teams import Teams

Obj = dict[str, Any]
T = TypeVar("T")
log = structlog.get_logger("rackwise")


class Api(Protocol):
    """What the reconciler needs of the API: the gateway's reads as typed views (the informer
    cache's, or a listing's: operator.py), its writes; or a fake in unit tests."""

    def nodes(self) -> list[Node]: ...
    def pods(self) -> list[Pod]: ...
    def jobs(self) -> list[TrainingJob]: ...
    def podgroups(self) -> list[PodGroup]: ...
    def queues(self) -> list[QueueObject]: ...
    def patch_queue_status(self, name: str, status: Obj) -> None: ...
    def set_queue_finalizers(self, name: str, finalizers: list[str]) -> None: ...
    def create_pod(self, namespace: str, body: Obj) -> None: ...
    def bind(self, namespace: str, pod: str, node: str, queue: str = "") -> None: ...
    def delete_pod(self, namespace: str, pod: str) -> None: ...
    def delete_job(self, namespace: str, name: str) -> None: ...
    def ensure_service(self, namespace: str, body: Obj) -> None: ...
    def patch_status(self, namespace: str, name: str, status: Obj) -> None: ...
    def patch_podgroup_status(
        self, namespace: str, name: str, status: Obj, api: GroupApi = GroupApi.PLUGINS
    ) -> None: ...
    def patch_pod_status(self, namespace: str, name: str, status: Obj) -> None: ...
    def can_write(self, namespace: str) -> bool: ...
    def create_event(self, namespace: str, body: Obj) -> str: ...
    def patch_event(self, namespace: str, name: str, patch: Obj) -> None: ...


class Reconciler:
    def __init__(
        self,
        api: Api,
        config: OperatorConfig,
        metrics: Metrics,
        identity: str = "rackwise",
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        """`clock` measures intervals (the queue's time); `wall` reads the API's timestamps
        (creation, checkpoints, TTLs): both injected, so a test can drive either."""
        self.api = api
        self.config = config
        self.metrics = metrics
        self.clock = clock
        self.builder = StateBuilder(config)
        self.pool = ThreadPoolExecutor(config.api_workers, thread_name_prefix="api")
        self.queue = SchedulingQueue(config.queue())
        self.place_config = self.queue.config.place
        self.wall = wall
        self.recorder = Recorder(api, identity)
        self.teams = QueueObjects(config, metrics, self.recorder)  # the teams' Queue objects
        self.last_teams = Teams()  # as last read (kept when a listing fails)
        self.launcher = Launcher(
            create=api.create_pod,
            build=lambda launch, rank: pod(launch.view, rank, config),
            submit=self.pool.submit,
            budget=config.launch_budget,
        )
        self.launches: dict[str, Launch] = {}  # job uid -> its pods being made
        self.started: dict[str, float] = {}  # job uid -> when its current run began
        self.expect = Expectations(self.clock)  # own writes the cache may not show yet
        self.calls = Calls(api, metrics, self.pool, self.expect)
        self.nodewatch = NodeWatch(self.clock, config.node_grace_s, self.calls, self.recorder)
        self.why = PendingPods(api.patch_pod_status, self.recorder, self.calls, self.clock)
        self.status = JobStatus(api, self.calls, self.recorder, metrics, self.why, wall)
        access = Access(api.can_write, self.clock, config.protected_namespaces)
        self.refusals = Refusals(access, config, self.calls, self.recorder, metrics)
        self.groups = _group_runner(self, api)
        self.driver = _driver(self, api)
        self.jobs = _training_jobs(self, api)

    def close(self) -> None:
        """End of a leadership term: the API threads go with it."""
        self.pool.shutdown(wait=False, cancel_futures=True)

    def cycle(self) -> CycleReport:
        start = time.perf_counter()
        report = CycleReport()
        self._made(report)
        nodes, pods = self.api.nodes(), self.api.pods()
        self.refusals.begin()
        queues, teams = self._teams()
        jobs = [self.status.fresh(j) for j in self.refusals.served(self.api.jobs())]
        groups = collect(pods, self.api.podgroups(), self.config)
        groups = [
            g for g in groups if self.refusals.may(g.namespace, g.key, f"pod group {g.label}")
        ]
        self.refusals.count()
        holding = charged(groups, self.config) if teams.on else []  # running pod groups
        self.queue.use_teams(teams, holding)
        self.expect.settle(pods)
        state = self.builder.build(nodes, pods)
        self.nodewatch.watch(nodes, state)
        owned: dict[str, list[Pod]] = {}
        for p in pods:
            uid = owned_by(p)
            if uid is not None:
                owned.setdefault(uid, []).append(p)
        live = {j.meta.uid: j for j in jobs}
        self._forget(set(live) | {g.key for g in groups})
        self.why.forget({p.meta.uid for p in pods})
        self.calls.retry(pods)
        self.calls.delete(p for uid, ps in owned.items() if uid not in live for p in ps)
        if state is not None:
            self.expect.reserve(state.snapshot, pods)
        pending: Pending = {}
        running: dict[str, tuple[JobView, list[Pod]]] = {}
        for job in jobs:
            handle = functools.partial(self.jobs.handle, job, owned, state, pending, running)
            self.driver.isolated(job, report, handle)
        now_running = Running.of(pods)
        waiting = self._groups(groups, state, report, now_running)
        if state is not None:
            self._terms(pending, now_running, state, report)
        self.jobs.make()
        going = [] if state is None else self._leaving(pods, owned, set(live), set(running), state)
        if teams.on and state is not None:  # pods on their way out keep their quota
            held = quota_held(owned, set(running), pods, state, self.config)
            self.queue.use_teams(teams, holding, held)
        self.driver.place(Gangs(pending, running, waiting, going), state, report, teams.on)
        self._publish(queues, teams)
        self.driver.nominations.sync(pods)
        self._launch(report)
        refs = {g.ref().uid for g in groups}
        queues_seen = {f"Queue/{name}" for name in self.teams.refs}
        self.recorder.forget(set(live) | refs | {n.meta.uid for n in nodes} | queues_seen)
        report.seconds = time.perf_counter() - start
        self.metrics.cycle(report.pending, report.invalid, len(self.launches), report.seconds)
        return report

    def _leaving(
        self,
        pods: list[Pod],
        owned: dict[str, list[Pod]],
        live: set[str],
        running: set[str],
        state: ClusterState,
    ) -> list[QueueRunning]:
        """Jobs' and pod groups' pods that hold hosts while they go (binding/leaving.py): a
        group is never listed as running, so only its members being deleted count."""
        now, resource = self.clock(), self.config.gpu_resource
        members = departing(pods, self.config)
        jobs = leaving(owned, live, running, state, now, resource)
        return jobs + leaving(members, set(members), set(), state, now, resource)

    def _teams(self) -> tuple[list[QueueObject], Teams]:
        """The Queues and the teams they make; when they cannot be read, the teams last read
        stay in force (no quota is dropped for a failed list) and nothing is written."""
        try:
            queues = self.api.queues()
        except ApiError as exc:
            log.warning("queues could not be read; the last ones stay in force", error=str(exc))
            return [], self.last_teams
        self.last_teams = self.teams.read(queues)
        return queues, self.last_teams

    def _publish(self, queues: list[QueueObject], teams: Teams) -> None:
        """Each Queue's numbers and condition, written when they changed (its own failure is
        logged, the cycle goes on)."""
        if not queues:
            return
        write = functools.partial(self.calls.attempt, self.api.patch_queue_status)
        finalize = functools.partial(self.calls.attempt, self.api.set_queue_finalizers)
        wall, numbers = self.wall(), self.queue.team_numbers()
        self.teams.publish(queues, teams, numbers, write, st.stamp(wall), wall, finalize)

    def _forget(self, live: set[str]) -> None:
        """Drop what is remembered of deleted jobs: memory stays bounded by the live ones."""
        for kept in (self.launches, self.started):  # in place: the parts share them
            for uid in set(kept) - live:
                del kept[uid]
        self.status.forget(live)
        self.jobs.forget(live)
        self.expect.forget(live)
        self.queue.forget(live)

    def _groups(
        self,
        groups: list[Members],
        state: ClusterState | None,
        report: CycleReport,
        running: Running,
    ) -> dict[str, Waiting]:
        """Pod groups ready for the queue; each handled on its own, as jobs are."""
        self.groups.forget({g.key for g in groups})
        out: dict[str, Waiting] = {}
        for members in groups:
            if self.expect.waiting(members.key):
                continue  # the cache does not show its last bindings yet
            try:
                found = self.groups.one(members, state, running)
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

    def _terms(
        self, pending: Pending, running: Running, state: ClusterState, report: CycleReport
    ) -> None:
        """Each waiting TrainingJob's gang with its pods' affinity, anti-affinity and spread
        resolved against what runs now (pods/affinity.py; a pod group's is resolved where it
        is read, GroupRunner.one); one whose terms cannot be honoured is told so and waits out
        of the queue, the others go on."""
        for uid, (view, w) in list(pending.items()):
            found: list[Waiting] = []
            resolve = functools.partial(self._resolve_into, found, w, running, state)
            if self.driver.isolated(view.obj, report, resolve):
                pending[uid] = (view, found[0])
            else:
                del pending[uid]

    def _resolve_into(
        self, found: list[Waiting], w: Waiting, running: Running, state: ClusterState
    ) -> None:
        gang = resolve_gang(w.gang, w.pods, running, state.fabric, self.config)
        found.append(w if gang == w.gang else replace(w, gang=gang))

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
            if not self.driver.isolated(launch.view.obj, report, launch.collect):
                del self.launches[uid]
            elif launch.finished:
                del self.launches[uid]
                names = [launch.pod_name(r) for r in launch.ranks]
                self.expect.created(uid, launch.view.namespace, names)
            elif launch.error is not None and not launch.inflight:
                del self.launches[uid]
                ns = launch.view.namespace
                pairs = [(ns, launch.pod_name(r)) for r in launch.created]
                self.calls.each(lambda t: self.calls.attempt(self.api.delete_pod, *t), pairs)
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
        self.status.set(view, phase, [self.status.cond(view, "Placed", False, reason, message)])


def _group_runner(r: Reconciler, api: Api) -> GroupRunner:
    return GroupRunner(
        r.config,
        r.queue,
        r.recorder,
        r.calls.bind_pairs,
        r.clock,
        r.wall,
        r.metrics,
        r.expect,
        lambda g, status: api.patch_podgroup_status(g.meta.namespace, g.meta.name, status, g.api),
        r.why,
    )


def _driver(r: Reconciler, api: Api) -> QueueDriver:
    return QueueDriver(
        r.config,
        r.queue,
        r.clock,
        r.metrics,
        r.calls,
        r.status,
        r.groups,
        r.started,
        r.wall,
        Nominations(api.patch_pod_status, r.calls, r.config.scheduler_name),
        r.teams.reclaimed,
    )


def _training_jobs(r: Reconciler, api: Api) -> TrainingJobs:
    return TrainingJobs(
        r.config,
        api,
        r.queue,
        r.clock,
        r.calls,
        r.status,
        r.nodewatch,
        r.groups,
        r.expect,
        r.launches,
        r.started,
        r.place_config,
        r.wall,
    )
