"""Typed views of the Kubernetes objects the operator reads: pods, nodes, TrainingJobs, pod groups
and its Lease.

Contract. Each view is made once from the API's JSON (`Pod.of`, `Node.of`, ...), by the informer
cache when an object arrives or by the reader when it lists, and is frozen (its mappings too, by
contract: they are plain dicts, for speed, and no one writes into them): no module below the
gateway indexes the API's dicts, and a field the operator reads is read here, once, with its
default. Making a view never raises on a well-formed object of its kind: a value that cannot be
read (a malformed quantity in a pod's requests) is kept as the reason it cannot be, for the part
that reads it to report. What is passed through rather than read (a TrainingJob's spec, parsed
by trainingjob/spec.py and copied into its pods; a pod's spec, parsed by pods/podspec.py) is kept
as the document the API sent, under a name that says so."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any, TypeGuard

from scheduler.controller.runtime.gateway import API_VERSION
from scheduler.controller.runtime.podrequests import claims_of, names, part, requests
from scheduler.controller.runtime.quantity import QuantityError

Obj = dict[str, Any]
TRAINING_JOB = (API_VERSION, "TrainingJob")  # an owner reference's (apiVersion, kind)
# kubectl's copy of the whole applied object: never read, and as large as the object itself
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _strings(value: object) -> Mapping[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class Owner:
    """An owner reference."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool

    @classmethod
    def of(cls, ref: Obj) -> Owner:
        return cls(
            str(ref.get("apiVersion") or ""),
            str(ref.get("kind") or ""),
            str(ref.get("name") or ""),
            str(ref.get("uid") or ""),
            ref.get("controller") is True,
        )


@dataclass(frozen=True, slots=True)
class Meta:
    name: str
    namespace: str  # "" for a cluster-scoped object
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    owners: tuple[Owner, ...] = ()
    created: str = ""  # creationTimestamp, RFC 3339
    deleting: bool = False  # a deletionTimestamp is set
    version: str = ""  # resourceVersion
    generation: int = 0
    finalizers: tuple[str, ...] = ()

    @classmethod
    def of(cls, obj: Obj) -> Meta:
        meta = part(obj, "metadata")
        owners = meta.get("ownerReferences")
        return cls(
            name=str(meta.get("name") or ""),
            namespace=str(meta.get("namespace") or ""),
            uid=str(meta.get("uid") or ""),
            labels=_strings(meta.get("labels")),
            annotations={
                k: v for k, v in _strings(meta.get("annotations")).items() if k != LAST_APPLIED
            },
            owners=tuple(Owner.of(r) for r in owners if isinstance(r, dict))
            if isinstance(owners, list)
            else (),
            created=str(meta.get("creationTimestamp") or ""),
            deleting=bool(meta.get("deletionTimestamp")),
            version=str(meta.get("resourceVersion") or ""),
            generation=count(meta.get("generation")),
            finalizers=tuple(str(f) for f in meta.get("finalizers") or () if isinstance(f, str)),
        )

    @property
    def key(self) -> str:
        """The object's identity: its uid, else namespace/name."""
        return self.uid or f"{self.namespace}/{self.name}"

    def controller_of(self, api_version: str, kind: str) -> str | None:
        """The uid of the owner of this kind that controls the object, if there is one."""
        for ref in self.owners:
            if ref.controller and ref.uid and (ref.api_version, ref.kind) == (api_version, kind):
                return ref.uid
        return None


@dataclass(frozen=True, slots=True)
class Condition:
    """A status condition; its transition time is not part of what it says (`==`)."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    since: str = field(default="", compare=False)  # lastTransitionTime

    @classmethod
    def of(cls, c: Obj) -> Condition:
        return cls(
            str(c.get("type") or ""),
            str(c.get("status") or ""),
            str(c.get("reason") or ""),
            str(c.get("message") or ""),
            str(c.get("lastTransitionTime") or ""),
        )

    @property
    def true(self) -> bool:
        return self.status == "True"

    def body(self) -> Obj:
        """As the API writes it."""
        out = {"type": self.type, "status": self.status, "reason": self.reason}
        return out | {"message": self.message, "lastTransitionTime": self.since}


def conditions_of(status: Obj) -> tuple[Condition, ...]:
    found = status.get("conditions")
    return tuple(Condition.of(c) for c in found if isinstance(c, dict)) if found else ()


def find(conditions: tuple[Condition, ...], kind: str) -> Condition | None:
    return next((c for c in conditions if c.type == kind), None)


@dataclass(frozen=True, slots=True)
class Pod:
    meta: Meta
    node: str | None  # spec.nodeName: where it is bound (None: not bound)
    scheduler: str  # spec.schedulerName
    priority: int | None  # spec.priority, as the API server resolved it
    phase: str | None
    scheduled: Condition | None  # its PodScheduled condition: what it says of why it waits
    requests: Mapping[str, Decimal] | None  # None: unreadable (`unreadable` says why)
    unreadable: str = ""
    spec: Obj = field(default_factory=dict, compare=False)  # as sent, for pods/podspec.py
    # nodeSelector, affinity and tolerations as sent: pods alike in these may run alike
    where: str = ""
    gates: tuple[str, ...] = ()  # spec.schedulingGates' names: the API server refuses its binding
    claims: tuple[str, ...] = ()  # spec.resourceClaims, each as `name (source)`: see claims_of
    nominated: str | None = None  # status.nominatedNodeName: where a scheduler expects it to go
    # spec.schedulingGroup.podGroupName: its Workload API PodGroup (1.36), in its namespace
    scheduling_group: str | None = None

    @classmethod
    def of(cls, obj: Obj) -> Pod:
        spec, status = part(obj, "spec"), part(obj, "status")
        try:
            wanted: dict[str, Decimal] | None = requests(spec, status)
            why = ""
        except QuantityError as exc:
            wanted, why = None, str(exc)
        priority = spec.get("priority")
        return cls(
            meta=Meta.of(obj),
            node=str(spec["nodeName"]) if spec.get("nodeName") else None,
            scheduler=str(spec.get("schedulerName") or ""),
            priority=priority if isinstance(priority, int) else None,
            phase=str(status["phase"]) if status.get("phase") else None,
            scheduled=find(conditions_of(status), "PodScheduled"),
            requests=wanted,
            unreadable=why,
            spec=spec,
            where=repr([spec.get(k) for k in ("nodeSelector", "affinity", "tolerations")]),
            gates=names(spec.get("schedulingGates")),
            claims=claims_of(spec),
            nominated=str(status["nominatedNodeName"]) if status.get("nominatedNodeName") else None,
            scheduling_group=str(group)
            if (group := part(spec, "schedulingGroup").get("podGroupName"))
            else None,
        )

    @property
    def done(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def owner_job(self) -> str | None:
        """The uid of the TrainingJob that controls this pod (None: rackwise did not make it:
        labels can be copied by anyone, an owner uid cannot be guessed)."""
        return self.meta.controller_of(*TRAINING_JOB)


@dataclass(frozen=True, slots=True)
class NodeTaint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Node:
    meta: Meta
    allocatable: Mapping[str, str]  # resource -> quantity, as written
    taints: tuple[NodeTaint, ...]
    unschedulable: bool  # cordoned
    ready: bool  # the Ready condition is True

    @classmethod
    def of(cls, obj: Obj) -> Node:
        spec, status = part(obj, "spec"), part(obj, "status")
        taints = spec.get("taints") if isinstance(spec.get("taints"), list) else []
        ready = find(conditions_of(status), "Ready")
        return cls(
            meta=Meta.of(obj),
            allocatable=_strings(status.get("allocatable")),
            taints=tuple(
                NodeTaint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect")))
                for t in taints or []
                if isinstance(t, dict)
            ),
            unschedulable=bool(spec.get("unschedulable")),
            ready=ready is not None and ready.true,
        )

    @property
    def name(self) -> str:
        return self.meta.name


@dataclass(frozen=True, slots=True)
class JobState:
    """A TrainingJob's status, as rackwise last wrote it (`==` ignores transition times)."""

    phase: str | None = None
    gpus: int = 0
    observed: int = 0  # observedGeneration
    conditions: tuple[Condition, ...] = ()
    placement: Obj | None = None  # the placement summary (runtime/status.py), kept as written
    restarts: int | None = None
    finished: str | None = None  # completionTime

    @classmethod
    def of(cls, status: Obj) -> JobState:
        placement = status.get("placement")
        return cls(
            phase=str(status["phase"]) if status.get("phase") else None,
            gpus=count(status.get("gpus")),
            observed=count(status.get("observedGeneration")),
            conditions=conditions_of(status),
            placement=placement if isinstance(placement, dict) else None,
            restarts=count(status["restarts"]) if status.get("restarts") is not None else None,
            finished=str(status["completionTime"]) if status.get("completionTime") else None,
        )

    def reason(self, kind: str = "Placed") -> str:
        found = find(self.conditions, kind)
        return found.reason if found else ""


@dataclass(frozen=True, slots=True)
class TrainingJob:
    meta: Meta
    # as the user wrote it (None: not an object): parsed by trainingjob/spec.py, its templates
    # copied into the pods
    spec: Obj | None
    status: JobState

    @classmethod
    def of(cls, obj: Obj) -> TrainingJob:
        spec = obj.get("spec")
        spec = spec if isinstance(spec, dict) else None
        return cls(Meta.of(obj), spec, JobState.of(part(obj, "status")))

    def with_status(self, status: JobState) -> TrainingJob:
        return TrainingJob(self.meta, self.spec, status)

    def template(self, role: int | None = None) -> tuple[Obj, Obj]:
        """(metadata, spec) of the workers' pod template, else of role `role`'s, as written."""
        spec = self.spec or {}
        if role is not None:
            roles = spec.get("roles") or []
            spec = roles[role] if role < len(roles) and isinstance(roles[role], dict) else {}
        template = part(spec, "template")
        return part(template, "metadata"), part(template, "spec")

    @property
    def ttl_s(self) -> int | None:
        """spec.ttlSecondsAfterFinished, when a whole number."""
        ttl = (self.spec or {}).get("ttlSecondsAfterFinished")
        return ttl if whole(ttl) else None

    @property
    def pods_asked(self) -> int:
        """Workers and every role's replicas, as written (0 where not a whole number)."""
        spec = self.spec or {}
        roles = [r for r in spec.get("roles") or [] if isinstance(r, dict)]
        return sum(count(s.get("replicas")) for s in (spec, *roles))

    @property
    def key(self) -> str:
        return f"{self.meta.namespace}/{self.meta.name}"


@dataclass(frozen=True)
class QueueObject:
    """A Queue (rackwise.io/v1alpha1, cluster-scoped): a team's quotas; read by
    controller/teams.py."""

    meta: Meta
    spec: Obj | None  # as written (None: not an object)
    status: Obj

    @classmethod
    def of(cls, obj: Obj) -> QueueObject:
        spec = obj.get("spec", {})
        return cls(Meta.of(obj), spec if isinstance(spec, dict) else None, part(obj, "status"))


class GroupApi(StrEnum):
    """The two PodGroup kinds, easily confused by name: scheduler-plugins' coscheduling CRD
    (pods join by label) and the Kubernetes Workload API's (alpha in 1.35-1.36; pods join by
    `spec.schedulingGroup.podGroupName`)."""

    PLUGINS = "scheduling.x-k8s.io/v1alpha1"
    WORKLOAD = "scheduling.k8s.io/v1alpha2"


@dataclass(frozen=True, slots=True)
class PodGroup:
    meta: Meta
    min_member: int | None  # minMember (plugins) / schedulingPolicy.gang.minCount, when >= 1
    timeout_s: float | None  # spec.scheduleTimeoutSeconds when a whole number > 0 (plugins)
    conditions: tuple[Condition, ...]
    api: GroupApi = GroupApi.PLUGINS
    # Workload API: spec.schedulingConstraints.topology[0].key, the node label of the domain
    # every member must share
    topology_key: str | None = None
    basic: bool = False  # Workload API basic policy: each member placed on its own

    @classmethod
    def of(cls, obj: Obj) -> PodGroup:
        spec = part(obj, "spec")
        least, wait = spec.get("minMember"), spec.get("scheduleTimeoutSeconds")
        return cls(
            meta=Meta.of(obj),
            min_member=least if whole(least) and least >= 1 else None,
            timeout_s=float(wait) if whole(wait) and wait > 0 else None,
            conditions=conditions_of(part(obj, "status")),
        )

    @classmethod
    def of_workload(cls, obj: Obj) -> PodGroup:
        """A Workload API PodGroup: a gang policy's minCount; a basic policy (or none readable)
        places each member on its own (podgroup/members.py)."""
        spec = part(obj, "spec")
        gang = part(spec, "schedulingPolicy").get("gang")
        least = gang.get("minCount") if isinstance(gang, dict) else None
        found = part(spec, "schedulingConstraints").get("topology")
        first = found[0] if isinstance(found, list) and found and isinstance(found[0], dict) else {}
        return cls(
            meta=Meta.of(obj),
            min_member=least if whole(least) and least >= 1 else 1,
            timeout_s=None,
            conditions=conditions_of(part(obj, "status")),
            api=GroupApi.WORKLOAD,
            topology_key=str(first["key"]) if first.get("key") else None,
            basic=not isinstance(gang, dict),
        )

    @property
    def condition(self) -> str:
        """The condition type that says whether it is scheduled, in its API's words."""
        return "PodGroupScheduled" if self.api is GroupApi.WORKLOAD else "Scheduled"


def whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int)


def count(value: object) -> int:
    """A whole number as written, else 0: a view is made whatever a writer put there (the
    schema types these fields; a view must not fail where it does not)."""
    return value if whole(value) else 0
