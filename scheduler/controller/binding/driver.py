"""The scheduler's side of the operator: waiting gangs into the queue, its decisions out.

Contract. Each cycle `place` takes the waiting gangs (TrainingJobs' and pod groups', one kind
of `Waiting`), the running TrainingJobs and the cluster state; queues the waiting, describes
the running ones to the queue (what it may preempt or move: hosts, start, checkpoints) and
applies the cycle's decisions through the Effects port (queue/effects.py): victims' and moved
gangs' pods deleted with their status saying why, waits written on jobs, groups and pods, every
start bound in one batch and then told. `isolated` runs one object's handling so that its
error (InvalidSpec, or anything unexpected: logged with its stack) touches nothing else.
Promises: a gang is bound whole or its failure reported and backed off; pod groups are never
preemption victims (the queue sees only TrainingJobs as running)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import structlog

from scheduler.controller.cluster.state import ClusterState
from scheduler.controller.config import OperatorConfig
from scheduler.controller.podgroup.members import QUEUE_LABEL
from scheduler.controller.podgroup.runner import Binding, GroupRunner, Waiting
from scheduler.controller.pods.nominate import Nominations, spread
from scheduler.controller.runtime import status as st
from scheduler.controller.runtime.admitted import admitted_by
from scheduler.controller.runtime.calls import Calls
from scheduler.controller.runtime.objects import Pod, TrainingJob
from scheduler.controller.runtime.observability import Metrics
from scheduler.controller.trainingjob.controller import Bound, Pending, rank_of, seconds
from scheduler.controller.trainingjob.status import CHECKPOINTED, JobStatus
from scheduler.controller.trainingjob.translate import InvalidSpecError, JobView, key
from scheduler.model import GangRequest, Placement, PlacementStatus, PodAssignment
from scheduler.queue import Decisions, Eviction, Move, Running, SchedulingQueue, Wait
from scheduler.queue.effects import apply

log = structlog.get_logger("rackwise")


@dataclass
class CycleReport:
    placed: int = 0
    pods_bound: int = 0
    pending: int = 0
    invalid: int = 0
    errors: int = 0
    solve_seconds: float = 0.0
    seconds: float = 0.0


def _assignment(view: JobView, pod: Pod, host: str) -> PodAssignment:
    rank = max(rank_of(pod), 0)
    role, index = view.role_of(rank) if rank < view.total_pods else ("", rank)
    return PodAssignment(rank=rank, host=host, role=role, role_rank=index if role else None)


@dataclass(frozen=True)
class Gangs:
    """What a cycle hands the queue: TrainingJobs waiting (each with its unbound pods) and
    running, pod groups waiting, and gangs whose pods still hold hosts while they go
    (binding/leaving.py), which a reservation counts on."""

    pending: Pending
    running: Bound
    groups: dict[str, Waiting]
    leaving: Sequence[Running] = ()


@dataclass
class QueueDriver:
    config: OperatorConfig
    queue: SchedulingQueue
    clock: Callable[[], float]
    metrics: Metrics
    calls: Calls
    status: JobStatus
    groups: GroupRunner
    started: dict[str, float]  # shared with the TrainingJob controller
    wall: Callable[[], float]  # the API's clock (pods' creation, checkpoint annotations)
    nominations: Nominations  # where the pods of gangs that hold hosts will go
    # a borrower of a team Queue's quota was evicted for it: (queue, message, at a checkpoint)
    quota_reclaimed: Callable[[str, str, bool], None] = lambda _q, _m, _c: None

    def isolated(self, job: TrainingJob, report: CycleReport, handle: Callable[[], None]) -> bool:
        """Run one job's handling; False when it raised (reported on the job, or logged)."""
        try:
            handle()
        except InvalidSpecError as exc:
            report.invalid += 1
            self.status.invalid(job, str(exc))
        except Exception:  # one job's surprise must not stop the others; its stack is logged
            report.errors += 1
            self.metrics.job_errors.inc()
            log.exception("job handling failed", job=key(job))
        else:
            return True
        return False

    def place(
        self, gangs: Gangs, state: ClusterState | None, report: CycleReport, teams: bool = False
    ) -> None:
        """Every waiting gang, pod group or TrainingJob, goes into the queue the same way.
        With teams' quotas (`teams`), the queue is told the running gangs every cycle, so that
        their Queues' numbers hold even when nothing waits."""
        pending, running, groups = gangs.pending, gangs.running, gangs.groups
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
                self.status.waits(view, unbound, "NoNodes", "the cluster has no labelled nodes")
            return
        if not len(self.queue):
            self.status.marked = set()  # no waiting gang: no move is wanted
            if not teams:
                return  # nothing waits: no need to describe every running gang to the queue
        holding = [r for r in (self._running(state, *vp) for vp in running.values()) if r]
        decisions = self.queue.cycle(self.clock(), state.snapshot, holding, gangs.leaving)
        apply(decisions, _CycleEffects(self, pending, running, state, report, groups))
        self._nominate(decisions, waiting, state)

    def _nominate(
        self, decisions: Decisions, waiting: dict[str, Waiting], state: ClusterState
    ) -> None:
        """The gangs that hold hosts while they wait, and where their pods will go: pinned
        ones (preemptors, gangs a move or a reclaim made room for) rank by rank, a pool's
        first blocked gang over its reservation's hosts."""
        held = {**decisions.nominated, **self.queue.held()}
        for gang, placement in held.items():
            if gang in waiting:
                nodes = {a.rank: a.host for a in placement.pods}
                self.nominations.hold(waiting[gang].pods, nodes)
        hosts = state.fabric.hosts
        for r in decisions.reservations.values():
            if r.key in waiting and r.key not in held:
                names = [hosts[h].name for h in sorted(r.hosts)]
                pods = waiting[r.key].pods
                self.nominations.hold(pods, spread(names, len(pods)))

    def _running(self, state: ClusterState, view: JobView, pods: list[Pod]) -> Running | None:
        """What the queue may preempt: a gang holding hosts rackwise knows (None otherwise)."""
        index = state.fabric.host_index
        hosts = [p.node for p in pods]
        if any(h not in index for h in hosts):
            return None
        assignments = tuple(_assignment(view, p, str(h)) for p, h in zip(pods, hosts, strict=True))
        placement = Placement(
            gang=view.gang.name, policy="rackwise", status=PlacementStatus.PLACED, pods=assignments
        )
        started = self.started.get(view.uid)
        if started is None:  # placed before this operator started: the pods' age tells
            age = self.wall() - min(st.created(p.meta) for p in pods)
            started = self.started.setdefault(view.uid, self.clock() - max(age, 0.0))
        spec = view.spec
        expected = seconds(spec.expected_runtime_seconds)
        return Running(
            view.uid,
            view.gang,
            placement,
            started,
            tenant=view.namespace,
            queue=view.obj.meta.labels.get(QUEUE_LABEL, ""),
            admitted=admitted_by(pods),
            checkpoint_s=seconds(spec.checkpoint_interval_seconds),
            end_s=None if expected is None else started + expected,
            checkpointed_s=self._checkpointed(view),
        )

    def _checkpointed(self, view: JobView) -> float:
        """When the job last said it checkpointed (its annotation), on this operator's clock;
        -inf when it never did: a job is moved only after a checkpoint it reported."""
        at = st.parse_time(view.obj.meta.annotations.get(CHECKPOINTED))
        return -math.inf if at is None else self.clock() - max(0.0, self.wall() - at)

    def starts(
        self,
        starts: list[tuple[str, Placement]],
        pending: Pending,
        groups: dict[str, Waiting],
        state: ClusterState,
        report: CycleReport,
        admitted: Mapping[str, str],
    ) -> None:
        """Every gang the queue started, pod groups and TrainingJobs alike: all their pods
        bound in one batch (each pod annotated with the team queue that `admitted` it), then
        each told how it went (its status and event writes, too, on
        the API threads: each touches only its own gang's entries)."""
        chosen = [(groups.get(uid) or pending[uid][1], placement) for uid, placement in starts]
        for waiting, placement in chosen:
            state.snapshot.apply(waiting.gang, placement)
        batch = [
            Binding(
                w.key,
                w.members.namespace,
                w.gang,
                p,
                dict(enumerate(w.pods)),
                admitted.get(w.key, ""),
            )
            for w, p in chosen
        ]
        bound = list(zip(chosen, self.groups.bind_many(batch), strict=True))
        told = functools.partial(self._told, pending=pending, groups=groups, report=report)
        for (_, results), ok in zip(bound, self.calls.each(told, bound), strict=True):
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
        self, eviction: Eviction, view: JobView, pods: list[Pod], gangs: dict[str, GangRequest]
    ) -> None:
        """Its pods go; a Preempted (or Reclaimed) condition naming the gang it made room for
        stays while it waits."""
        if eviction.reclaimed:
            self._reclaimed(eviction, view, pods, gangs)
            return
        preemptor = gangs[eviction.preemptor]
        message = (
            f"preempted by {preemptor.name} (priority {preemptor.priority}); "
            f"{eviction.lost_gpu_s / 3600:.2f} GPU-hours since its last checkpoint lost; "
            "queued again"
        )
        self.calls.delete(pods)
        self.metrics.preempted(view.gang)
        placed = self.status.cond(view, "Placed", False, "Preempted", message)
        preempted = self.status.cond(view, "Preempted", True, "Preempted", message)
        self.status.set(view, "Pending", [placed, preempted])

    def _reclaimed(
        self, eviction: Eviction, view: JobView, pods: list[Pod], gangs: dict[str, GangRequest]
    ) -> None:
        owner = gangs.get(eviction.preemptor)
        quota = view.uid in self.status.beyond
        team = self.queue.team_of(eviction.preemptor) if quota else None
        lost = eviction.lost_gpu_s / 3600
        if quota:  # the owner's queue (unnamed if the owner has left the queue since)
            lender, what = f"queue {team}" if team else "its lender", "the quota it borrowed"
        else:
            lender = owner.pool if owner is not None else "its lender"
            what = "the hosts it lent"
        message = (
            f"{lender} took back {what}, for {owner.name if owner else 'its own gang'}; "
            f"{lost:.2f} GPU-hours since its last checkpoint lost; queued again in {view.gang.pool}"
        )
        self.calls.delete(pods)
        pool = owner.pool if owner is not None else view.gang.pool  # the lender's
        self.metrics.reclaimed(pool, eviction.lost_gpu_s == 0, eviction.waited_s)
        if team is not None:
            self.quota_reclaimed(team, f"{view.gang.name}: {message}", eviction.lost_gpu_s == 0)
        placed = self.status.cond(view, "Placed", False, "Reclaimed", message)
        reclaimed = self.status.cond(view, "Reclaimed", True, "Reclaimed", message)
        self.status.set(view, "Pending", [placed, reclaimed])

    def move(
        self, view: JobView, pods: list[Pod], move: Move, gangs: dict[str, GangRequest]
    ) -> None:
        """Moved at the checkpoint it reported: its pods go, and it restarts on the hosts the
        queue holds for it as soon as they are free."""
        why = (
            f"to let {gangs[move.waiting].name} start"
            if move.waiting in gangs
            else "to cut its own cross-fabric traffic"
        )
        self.calls.delete(pods)
        self.metrics.moved(view.gang)
        self.status.pending(
            view, "Moved", f"moved at its checkpoint {why}; restarting on new hosts"
        )

    def _started(self, view: JobView, placement: Placement, results: list[bool]) -> None:
        """Its pods were bound where the queue placed them (`results`), as a group's are."""
        if not all(results):
            self.queue.backoff(view.uid, self.clock())
            failed = len(results) - sum(results)
            message = (
                f"{failed} of {len(results)} bindings failed; the gang is completed or placed again"
            )
            self.status.pending(view, "BindFailed", message)
            return
        self.queue.succeeded(view.uid)
        self.started[view.uid] = self.clock()
        self.status.placed(view, placement, repair=False)


@dataclass
class _CycleEffects:
    """The operator's side of the port (queue/effects.py) for one cycle: each effect through
    the API server, each object's handling on its own (`QueueDriver.isolated`)."""

    r: QueueDriver
    pending: Pending
    running: Bound
    state: ClusterState
    report: CycleReport
    groups: dict[str, Waiting]
    admitted: Mapping[str, str] = field(default_factory=dict)  # the starts' team queues

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
        self.r.status.marked = set(decisions.marked)
        # deadlines on the API's clock: the queue's is this operator's monotonic one
        offset = self.r.wall() - self.r.clock()
        self.r.status.reclaiming = {k: at + offset for k, at in decisions.reclaiming.items()}
        self.r.status.node_pools = self.state.fabric.host_pool
        self.r.status.beyond = self.r.queue.beyond_quota()
        self.admitted = decisions.admitted
        self.r.metrics.lending(decisions.lent)

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
        waits = functools.partial(
            self.r.status.waits, view, unbound, wait.reason.value, wait.message
        )
        self.r.isolated(view.obj, self.report, waits)

    def nominate(self, key: str, placement: Placement) -> None:
        pass  # the queue holds its hosts; it starts there once its victims' pods are gone

    def start(self, starts: list[tuple[str, Placement]]) -> None:
        self.r.starts(starts, self.pending, self.groups, self.state, self.report, self.admitted)
