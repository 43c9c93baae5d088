"""Queue objects in, the teams the scheduling queue admits by, and each Queue's numbers out.

Contract. Takes, every cycle, the Queue objects (rackwise.io/v1alpha1, cluster-scoped) and gives
the teams (teams.Teams) made of those that are valid, the established first (by creation time):
a namespace or the default listed by two Queues stays with the one created first, and the
newcomer is invalid with the conflict named. An invalid one (unknown pool, bad or out-of-bound
quantity, a conflict) says why in its Ready condition; if it was ever valid, the spec it last
had then (kept in memory and in its status, `specInForce`, so it survives a restart) stays in
force held (`stopPolicy: Hold`): its admitted gangs stay charged to it and it admits nothing new,
until it is valid again. A Queue being deleted is held the same way, kept by the finalizer
`rackwise.io/admitted-gangs` until no gang it admitted runs. No Queue at all: no quotas. After
the cycle it writes each Queue's status when it changed: nominal, used and borrowed GPUs (every
pool summed, and per pool with CPU and memory), gangs pending and admitted, the Ready condition
and the spec in force; and the same as metrics, with the longest wait of its pending gangs and
the reclaims of its quota. Events on a Queue: a Warning when it becomes invalid (once per reason,
not every cycle), and `Reclaimed` each time its quota is taken back from borrowers (the driver
tells it, `reclaimed`).
Promises: one bad Queue, or a Queue edited or deleted, never changes what the others admit nor
re-charges a running gang; a status is written only when something in it changed (a condition
keeps its lastTransitionTime while its status holds)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal
from typing import Any

import structlog
from pydantic import ValidationError

from scheduler.controller.cluster.resources import requested
from scheduler.controller.config import OperatorConfig
from scheduler.controller.podgroup.members import POOL_LABEL, Members
from scheduler.controller.runtime.admitted import admitted_by
from scheduler.controller.runtime.events import Recorder, Ref
from scheduler.controller.runtime.gateway import API_VERSION
from scheduler.controller.runtime.objects import Condition, QueueObject, conditions_of, find
from scheduler.controller.runtime.observability import Metrics
from scheduler.controller.runtime.quantity import MI, QuantityError, parse
from scheduler.queue.teams.quotas import RESOURCES
from scheduler.queue.teams.use import Charge, Numbers
from scheduler.teams import MAX_GPUS, QueueSpec, Resource, StopPolicy, Teams

Obj = dict[str, Any]
log = structlog.get_logger("rackwise")
FIELDS = {
    "nominal": "nominal",
    "borrowingLimit": "borrowing_limit",
    "lendingLimit": "lending_limit",
}


class InvalidQueueError(ValueError):
    pass


StatusWriter = Callable[[str, Obj], object]  # a Queue's name and its new status
Finalizers = Callable[[str, list[str]], object]  # a Queue's name and its finalizers, all of them
FINALIZER = "rackwise.io/admitted-gangs"  # a Queue being deleted stays while its gangs run


@dataclass
class QueueObjects:
    config: OperatorConfig
    metrics: Metrics
    recorder: Recorder
    errors: dict[str, str] = field(default_factory=dict)  # queue -> why it is invalid
    refs: dict[str, Ref] = field(default_factory=dict)  # queue -> its object, for events
    # Queue uid -> the spec it last had while valid (a Queue made again under its name is new)
    in_force: dict[str, QueueSpec] = field(default_factory=dict)
    held: set[str] = field(default_factory=set)  # queues held: invalid, or being deleted
    reclaims: dict[str, list[str]] = field(default_factory=dict)  # queue -> this cycle's, told

    def reclaimed(self, queue: str, message: str, at_checkpoint: bool) -> None:
        """A borrower of `queue`'s quota was evicted for it: counted, and named in the one
        event the cycle's reclaims of that queue make (`publish`)."""
        self.metrics.queue_reclaims.labels(
            queue=queue, result="checkpoint" if at_checkpoint else "deadline"
        ).inc()
        self.reclaims.setdefault(queue, []).append(message)

    def _tell_reclaims(self) -> None:
        """One Reclaimed event per queue and cycle, naming every victim."""
        for queue, messages in self.reclaims.items():
            ref = self.refs.get(queue)
            if ref is None:
                continue
            text = (
                messages[0]
                if len(messages) == 1
                else f"{len(messages)} gangs: " + "; ".join(messages)
            )
            self.recorder.record(ref, "Normal", "Reclaimed", text, about=f"Queue/{queue}")
        self.reclaims = {}

    def read(self, objects: list[QueueObject]) -> Teams:
        self.errors, self.held = {}, set()
        self.refs = {o.meta.name: Ref.to(o.meta, API_VERSION, "Queue") for o in objects}
        uids = {o.meta.uid for o in objects}
        self.in_force = {u: s for u, s in self.in_force.items() if u in uids}
        valid: list[QueueSpec] = []
        claimed: dict[str, str] = {}
        for obj in sorted(objects, key=lambda o: (o.meta.created, o.meta.name)):
            spec = self._valid(obj, claimed, valid)
            if spec is None:
                continue
            valid.append(spec)
            claimed.update(dict.fromkeys(spec.namespaces, spec.name))
        return Teams(queues=tuple(valid))

    def _valid(
        self, obj: QueueObject, claimed: dict[str, str], valid: list[QueueSpec]
    ) -> QueueSpec | None:
        """Its spec if valid (held while it is being deleted); else the spec last in force,
        held, less what established Queues have claimed since; else None."""
        name = obj.meta.name
        try:
            spec = self._spec(obj)
            _no_overlap(spec, claimed)
            _one_default(spec, valid)
        except InvalidQueueError as exc:
            self.errors[name] = str(exc)
            kept = self.in_force.get(obj.meta.uid) or _kept(obj)
            if kept is None:
                return None
            self.in_force[obj.meta.uid] = kept
            self.held.add(name)
            return _hold(kept, claimed, valid)
        self.in_force[obj.meta.uid] = spec
        if obj.meta.deleting:
            self.held.add(name)
            return _hold(spec, claimed, valid)
        return spec

    def _spec(self, obj: QueueObject) -> QueueSpec:
        spec = obj.spec
        if spec is None:
            raise InvalidQueueError("spec is not an object")
        pools = {p.name for p in self.config.pool_list}
        quotas = spec.get("quotas") or []
        if not isinstance(quotas, list):
            raise InvalidQueueError("spec.quotas is not a list")
        for q in quotas:
            if not isinstance(q, dict) or q.get("pool") not in pools:
                pool = q.get("pool") if isinstance(q, dict) else q
                raise InvalidQueueError(f"unknown pool {pool!r}; pools are {sorted(pools)}")
        try:
            return QueueSpec.model_validate(
                {
                    "name": obj.meta.name,
                    **{k: v for k, v in spec.items() if k != "quotas"},
                    "quotas": [_quota(q) for q in quotas],
                }
            )
        except (ValidationError, QuantityError) as exc:
            raise InvalidQueueError(_first(exc)) from exc

    def publish(
        self,
        objects: list[QueueObject],
        teams: Teams,
        numbers: dict[str, Numbers],
        write: StatusWriter,
        now: str,
        clock: float,
        finalize: Finalizers | None = None,
    ) -> None:
        """`clock`: the time now on the clock the queue's arrivals are stamped with;
        `finalize` sets a Queue's finalizers (None: they are left as they are)."""
        specs = teams.by_name
        self._tell_reclaims()
        for obj in objects:
            name = obj.meta.name
            found = numbers.get(name, Numbers())
            self._invalid(obj)
            oldest = found.oldest
            self.metrics.queue_wait.labels(queue=name).set(
                max(0.0, clock - oldest) if oldest is not None else 0.0
            )
            status = self._status(specs.get(name), found, name, obj, now)
            if status != obj.status:
                write(name, status)
            if finalize is not None:
                _finalize(obj, found, finalize)

    def _invalid(self, obj: QueueObject) -> None:
        """A Warning when a Queue is found invalid, or invalid for a new reason (not every
        cycle: only when its Ready condition does not say so yet)."""
        error = self.errors.get(obj.meta.name)
        old = find(conditions_of(obj.status), "Ready")
        if error is None or (old is not None and old.status == "False" and old.message == error):
            return
        ref = self.refs[obj.meta.name]
        self.recorder.record(ref, "Warning", "InvalidSpec", error, about=f"Queue/{obj.meta.name}")

    def _status(
        self, spec: QueueSpec | None, n: Numbers, name: str, obj: QueueObject, now: str
    ) -> Obj:
        error = self.errors.get(name)
        ready = _condition(obj, error, now, name in self.held, obj.meta.deleting)
        if spec is None:  # invalid and never valid: no numbers it does not have
            return {"conditions": [ready]}
        nominal = {q.pool: q.owned(Resource.GPUS) for q in spec.quotas}
        pools = sorted(set(nominal) | set(n.used))
        used = {p: n.used.get(p, [0, 0, 0]) for p in pools}
        borrowed = sum(max(0, used[p][0] - nominal.get(p, 0)) for p in pools)
        self._measure(name, sum(nominal.values()), used, borrowed, n)
        return {
            "nominalGPUs": sum(nominal.values()),
            "usedGPUs": sum(u[0] for u in used.values()),
            "borrowedGPUs": borrowed,
            "pendingGangs": n.pending,
            "admittedGangs": n.admitted,
            "leavingGangs": n.leaving,  # their pods on their way out, still counted in use
            "pools": [_pool(p, spec, used[p]) for p in pools],
            "conditions": [ready],
            # what stays in force, held, if the Queue turns invalid (read back after a restart)
            "specInForce": self.in_force[obj.meta.uid].model_dump(mode="json", by_alias=True),
        }

    def _measure(
        self, name: str, nominal: int, used: dict[str, list[int]], borrowed: int, n: Numbers
    ) -> None:
        gpus = self.metrics.queue_gpus
        gpus.labels(queue=name, kind="nominal").set(nominal)
        gpus.labels(queue=name, kind="used").set(sum(u[0] for u in used.values()))
        gpus.labels(queue=name, kind="borrowed").set(borrowed)
        self.metrics.queue_gangs.labels(queue=name, state="pending").set(n.pending)
        self.metrics.queue_gangs.labels(queue=name, state="admitted").set(n.admitted)
        self.metrics.queue_gangs.labels(queue=name, state="leaving").set(n.leaving)


def charged(groups: list[Members], config: OperatorConfig) -> list[Charge]:
    """What running pod groups hold, per group: its Queue label, namespace, pool, the GPUs,
    millicores and MiB its bound members request, and the queue that admitted it (the queue is
    not told of them as running gangs, but their quota is spent)."""
    out: list[Charge] = []
    for members in groups:
        bound = [p for p in members.bound if p.requests is not None]
        if not bound:
            continue
        pool = bound[0].meta.labels.get(POOL_LABEL, "training")
        demand = requested(bound, config.gpu_resource)
        out.append((members.queue, members.namespace, pool, demand, admitted_by(bound)))
    return out


def _quota(q: Obj) -> Obj:
    out: Obj = {"pool": q.get("pool")}
    for key in FIELDS:
        if q.get(key) is not None:
            out[key] = _amounts(q[key], key)
    unknown = set(q) - {"pool", *FIELDS}
    if unknown:
        raise InvalidQueueError(f"unknown quota fields {sorted(unknown)}")
    return out


def _amounts(given: object, where: str) -> dict[str, int]:
    if not isinstance(given, dict):
        raise InvalidQueueError(f"{where} is not an object")
    out: dict[str, int] = {}
    for key, value in given.items():
        if key == Resource.GPUS:
            out[key] = _count(value, where)
        elif key == Resource.CPU:  # parse bounds a quantity (0 .. 2^50): within int64 here
            out[key] = int((parse(value) * 1000).to_integral_value(ROUND_CEILING))
        elif key == Resource.MEMORY:
            out[key] = int((parse(value) / Decimal(MI)).to_integral_value(ROUND_CEILING))
        else:
            raise InvalidQueueError(f"{where}: unknown resource {key!r} (gpus, cpu, memory)")
    return out


def _count(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidQueueError(f"{where}.gpus must be a whole number of GPUs, not {value!r}")
    if value > MAX_GPUS:
        raise InvalidQueueError(f"{where}.gpus is {value}, more than {MAX_GPUS:,} GPUs")
    return value


def _no_overlap(spec: QueueSpec, claimed: dict[str, str]) -> None:
    for ns in spec.namespaces:
        if ns in claimed:
            raise InvalidQueueError(f"namespace {ns!r} belongs to queue {claimed[ns]} already")


def _one_default(spec: QueueSpec, valid: list[QueueSpec]) -> None:
    first = next((q.name for q in valid if q.default), None)
    if spec.default and first is not None:
        raise InvalidQueueError(f"queue {first} is the default already")


def _first(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        return f"{where}: {err['msg']}"
    return str(exc)


def _pool(pool: str, spec: QueueSpec, used: list[int]) -> Obj:
    q = spec.quota(pool)
    return {
        "pool": pool,
        "nominal": {str(r): q.owned(r) for r in RESOURCES if q.limits(r)},
        "used": {"gpus": used[0], "cpu": f"{used[1]}m", "memory": f"{used[2]}Mi"},
    }


def _condition(obj: QueueObject, error: str | None, now: str, held: bool, deleting: bool) -> Obj:
    status = "False" if error or deleting else "True"
    old = find(conditions_of(obj.status), "Ready")
    since = old.since if old is not None and old.status == status and old.since else now
    reason = "InvalidSpec" if error else "Terminating" if deleting else "Valid"
    message = error or "quotas in force"
    if deleting and not error:
        message = "being deleted"
    if held:
        message += (
            "; the spec last found valid stays in force, held: the gangs it admitted stay "
            "charged to it until they end, and it admits none"
        )
    return Condition("Ready", status, reason, message, since).body()


def _kept(obj: QueueObject) -> QueueSpec | None:
    """The spec in force that its status recorded (an operator restarted since)."""
    found = obj.status.get("specInForce")
    if not isinstance(found, dict):
        return None
    try:
        return QueueSpec.model_validate({**found, "name": obj.meta.name})
    except ValidationError:
        return None


def _hold(spec: QueueSpec, claimed: dict[str, str], valid: list[QueueSpec]) -> QueueSpec:
    """Held: it admits nothing new; namespaces (and the default) that established Queues claim
    now are theirs."""
    free = tuple(ns for ns in spec.namespaces if ns not in claimed)
    default = spec.default and not any(q.default for q in valid)
    update = {"namespaces": free, "default": default, "stop_policy": StopPolicy.HOLD}
    return spec.model_copy(update=update)


def _finalize(obj: QueueObject, found: Numbers, finalize: Finalizers) -> None:
    """Every live Queue carries the finalizer; a Queue being deleted loses it once no gang it
    admitted runs (Kueue's ClusterQueue does the same with its own)."""
    mine = FINALIZER in obj.meta.finalizers
    busy = found.admitted > 0 or any(u[0] for u in found.used.values())
    if not obj.meta.deleting and not mine:
        finalize(obj.meta.name, [*obj.meta.finalizers, FINALIZER])
    elif obj.meta.deleting and mine and not busy:
        finalize(obj.meta.name, [f for f in obj.meta.finalizers if f != FINALIZER])
