"""Pod groups: the pods of any workload, placed by rackwise as one gang.

A pod with `schedulerName` set to the operator's and the label `scheduling.x-k8s.io/pod-group:
NAME` belongs to group NAME of its namespace (the scheduler-plugins coscheduling convention;
whatever controller created it: a batch/v1 Job, a StatefulSet, a JobSet). The group's PodGroup
object (scheduling.x-k8s.io/v1alpha1) says how many members must have arrived (`minMember`) and
how long to wait for them (`scheduleTimeoutSeconds`). rackwise only binds such pods: it never
creates, changes or deletes them.

Topology requests come from the pods' annotations (set on the workload's pod template), in
rackwise's words or Kueue's: `rackwise.io/required-level`, `rackwise.io/preferred-level`,
`rackwise.io/slice-level` + `rackwise.io/slice-size`, or `kueue.x-k8s.io/podset-required-
topology`, `...-preferred-topology`, `...-slice-required-topology` + `...-slice-size`, which name
a node label (mapped to the operator's level read from that label), or KAI's segments:
`kai.scheduler/segment-size` with `kai.scheduler/segment-topology-required-placement` or
`...-preferred-placement` (a node label). A slice and a required segment are not both given.
A pod set other than the workers with `rackwise.io/gradients: "true"` joins their gradient
ring. The pool is the pod label `rackwise.io/pool` (training otherwise); the priority is the
pod's resolved `spec.priority`.
The workers' parallel shape, as a TrainingJob's `spec.parallelism` states it, is the annotation
`rackwise.io/parallelism: "tp=8,pp=2,dp=4,ep=2"` (any of dp, tp, pp, ep; 1 where left out):
with it, each expert-parallel block is a preferred segment at the NVLink level unless the group
states one there (placement/hints.py) and TP groups that span pods are ranked together, as for
a TrainingJob of that shape.

Members may differ: the largest set of alike pods (same requests, node constraints and topology
annotations) are the workers, the others roles placed near them (a LeaderWorkerSet's leader, a
Ray head, a driver), each with the topology its own annotations ask for, as Kueue reads them
per pod set. Pool and priority are the group's and must agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from scheduler.controller.cluster.resources import Charge, pod_charge
from scheduler.controller.config import OperatorConfig
from scheduler.controller.podgroup.annotations import KUEUE, gradients, notes, shape, topology
from scheduler.controller.pods.constraints import check_pool_selector, constraints, known_pool
from scheduler.controller.pods.podspec import InvalidSpecError, PodSpec, describe
from scheduler.controller.runtime.events import Ref
from scheduler.controller.runtime.objects import GroupApi, Pod, PodGroup
from scheduler.model import GangRequest
from scheduler.model.gang import Role

Obj = dict[str, Any]

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
POOL_LABEL = "rackwise.io/pool"
QUEUE_LABEL = "rackwise.io/queue"  # the team Queue a job or group belongs to (teams.py)
ROLE_LABEL = "rackwise.io/role"  # names a pod set other than the workers (else set-<i>)
INDEX = "batch.kubernetes.io/job-completion-index"
GROUP_NAME = KUEUE + "group-name"  # pod sets placed in one domain together (Kueue's PodSet group)


@dataclass(frozen=True)
class Members:
    """The live pods of one group and its PodGroup object, if there is one; `ran` counts its
    members that were bound and have finished (they count toward `minMember`)."""

    namespace: str
    name: str
    pods: list[Pod]
    podgroup: PodGroup | None
    ran: int = 0
    api: GroupApi = GroupApi.PLUGINS  # which PodGroup kind the members name
    alone: str = ""  # a member of a basic-policy group, placed on its own: its name

    @property
    def key(self) -> str:
        kind = "podgroup" if self.api is GroupApi.PLUGINS else "workload-podgroup"
        return f"{kind}:{self.label}"

    @property
    def label(self) -> str:
        """namespace/name, and the member's name when it is placed on its own."""
        return f"{self.namespace}/{self.name}" + (f"/{self.alone}" if self.alone else "")

    @property
    def queue(self) -> str:
        """The Queue its PodGroup's label, else its pods', names ("": its namespace's)."""
        if self.podgroup is not None and self.podgroup.meta.labels.get(QUEUE_LABEL):
            return self.podgroup.meta.labels[QUEUE_LABEL]
        return next(
            (p.meta.labels[QUEUE_LABEL] for p in self.pods if QUEUE_LABEL in p.meta.labels), ""
        )

    @property
    def kind(self) -> str:
        """The PodGroup kind, named apart from the other one (messages, docs)."""
        return f"PodGroup ({self.api.value})"

    @property
    def waiting(self) -> list[Pod]:
        """Members not bound yet and free to be (no scheduling gate), in rank order (a Job's
        completion index, else name)."""
        return sorted((p for p in self.pods if not p.node and not p.gates), key=_rank_key)

    @property
    def gated(self) -> list[Pod]:
        """Members not bound yet that carry scheduling gates: the API server refuses to bind
        them (Kubernetes 1.30+), so they neither count toward `minMember` nor are placed."""
        return [p for p in self.pods if not p.node and p.gates]

    @property
    def claims(self) -> list[tuple[str, str]]:
        """(pod, claim) for each resource claim of a member not bound yet."""
        return [(p.meta.name, c) for p in self.pods if not p.node for c in p.claims]

    @property
    def bound(self) -> list[Pod]:
        return sorted((p for p in self.pods if p.node), key=_rank_key)

    @property
    def min_member(self) -> int | None:
        return self.podgroup.min_member if self.podgroup else None

    @property
    def timeout_s(self) -> float | None:
        return self.podgroup.timeout_s if self.podgroup else None

    def ref(self) -> Ref:
        """The object events are about: the PodGroup, else the first member."""
        if self.podgroup and not self.alone:
            meta, api, kind = self.podgroup.meta, self.podgroup.api.value, "PodGroup"
        else:
            meta, api, kind = self.pods[0].meta, "v1", "Pod"
        return Ref(api, kind, meta.name, meta.namespace, meta.uid or self.key)


def _rank_key(pod: Pod) -> tuple[int, tuple[str | int, ...]]:
    """Ranks follow the Job's completion index, then the numbers in the pod's name as numbers
    (StatefulSet `w-10`, PyTorchJob `job-worker-10`, JobSet and LeaderWorkerSet `x-0-10`
    after `x-0-2`), then the name."""
    index = pod.meta.annotations.get(INDEX, "")
    return (int(index) if index.isdigit() else 1 << 30, _natural(pod.meta.name))


def _natural(name: str) -> tuple[str | int, ...]:
    # re.split with a group alternates text (even places) and digits (odd): same types meet
    return tuple(int(p) if i % 2 else p for i, p in enumerate(re.split(r"(\d+)", name)))


def collect(pods: list[Pod], podgroups: list[PodGroup], config: OperatorConfig) -> list[Members]:
    """Every group with a live member: pods of the operator's scheduler with the group label
    (scheduler-plugins) or a `spec.schedulingGroup` (the Workload API), neither finished nor
    being deleted; with each, how many of its members ran and finished. A member of a Workload
    API PodGroup with the basic policy is a group of its own."""
    by_name = {(g.api, g.meta.namespace, g.meta.name): g for g in podgroups}
    found: dict[tuple[GroupApi, str, str], list[Pod]] = {}
    ran: dict[tuple[GroupApi, str, str], int] = {}
    for pod in pods:
        where = _group_of(pod, config)
        if where is None:
            continue
        if pod.done:
            ran[where] = ran.get(where, 0) + bool(pod.node)
        elif not pod.meta.deleting:
            found.setdefault(where, []).append(pod)
    out = []
    for (api, ns, name), members in found.items():
        podgroup = by_name.get((api, ns, name))
        done = ran.get((api, ns, name), 0)
        if podgroup is not None and podgroup.basic:
            out += [Members(ns, name, [p], podgroup, 0, api, p.meta.name) for p in members]
        else:
            out.append(Members(ns, name, members, podgroup, done, api))
    return out


def departing(pods: list[Pod], config: OperatorConfig) -> dict[str, list[Pod]]:
    """Members being deleted that have not finished, by their group's key: the pods `collect`
    leaves out that may still hold a host while they go (binding/leaving.py)."""
    out: dict[str, list[Pod]] = {}
    for pod in pods:
        where = _group_of(pod, config)
        if where is not None and pod.meta.deleting and not pod.done:
            api, ns, name = where
            out.setdefault(Members(ns, name, [], None, 0, api).key, []).append(pod)
    return out


def _group_of(pod: Pod, config: OperatorConfig) -> tuple[GroupApi, str, str] | None:
    """The group a pod of the operator's scheduler names: the Workload API's field first (a
    pod may carry a stale plugins label copied from a template)."""
    if pod.scheduler != config.scheduler_name:
        return None
    if pod.scheduling_group:
        return GroupApi.WORKLOAD, pod.meta.namespace, pod.scheduling_group
    label = pod.meta.labels.get(GROUP_LABEL)
    return (GroupApi.PLUGINS, pod.meta.namespace, label) if label else None


def gang(
    members: Members, pods: list[Pod], config: OperatorConfig
) -> tuple[GangRequest, list[Pod]]:
    """The gang of `pods` (members of one group) and the pods in rank order; InvalidSpecError
    says what is wrong. The largest set of alike pods (same requests, node constraints and
    topology annotations) are the workers, whose traffic the placement minimises; any other
    set (a leader, a driver, a head) is a role placed near them (placement/roles.py), all or
    nothing. Each set's topology comes from its own annotations."""
    first = _agreed(pods)
    pool = first.meta.labels.get(POOL_LABEL, "training")
    known_pool(pool, f"label {POOL_LABEL}", config)
    sets = _pod_sets(pods, config)
    for _, alike in sets:  # a set shares its node selector and affinity
        _check_pool(alike[0], pool, config)
    main = max(range(len(sets)), key=lambda i: (len(sets[i][1]), -i))
    per_pod, workers = sets[main]
    others = [s for i, s in enumerate(sets) if i != main]
    wanted = _group_topology(members, topology(notes(workers[0]), config), config)
    try:
        request = GangRequest(
            name=members.label,
            pods=len(workers),
            **per_pod.per_pod(),
            pool=pool,
            objective=config.objective(pool),
            priority=first.priority or 0,
            constraints=constraints(_pod_spec(workers[0]), pool, config, tolerate_lenders=False),
            roles=tuple(
                _role(i, c, ps, pool, config, notes(workers[0])) for i, (c, ps) in enumerate(others)
            ),
            shape=shape(notes(workers[0])),
            **wanted,
        )
    except ValidationError as exc:
        raise InvalidSpecError(describe(exc, "annotations")) from exc
    return request, [*workers, *(p for _, ps in others for p in ps)]


def _group_topology(members: Members, wanted: dict[str, Any], config: OperatorConfig) -> Obj:
    """A Workload API PodGroup's topology constraint is the workers' required level: its key
    names a node label the operator reads a level from (as Kueue's required topology)."""
    key = members.podgroup.topology_key if members.podgroup else None
    if key is None:
        return wanted
    field = f"{members.kind} {members.name}: spec.schedulingConstraints.topology[0].key"
    level = config.levels_by_label().get(key)
    if level is None:
        raise InvalidSpecError(f"{field}: no level is read from node label {key!r}")
    if wanted["required_level"] not in (None, level):
        raise InvalidSpecError(
            f"{field} asks {level!r}, the pods' annotations {wanted['required_level']!r}"
        )
    return wanted | {"required_level": level}


def _check_pool(pod: Pod, pool: str, config: OperatorConfig) -> None:
    """A member whose own node selector or required node affinity rules out its pool's nodes
    is refused, as a TrainingJob template is: binding it there would override what the pod
    asked for (and a kubelet would reject it)."""
    key, name = config.pools.label_key, pod.meta.name
    spec = _pod_spec(pod)
    check_pool_selector(spec.node_selector, key, pool, f"pod {name}: spec", "its pool")
    pool_node = {key: pool}
    terms = constraints(spec, pool, config, tolerate_lenders=False).affinity
    if terms and not any(all(r.matches(pool_node) for r in t if r.key == key) for t in terms):
        raise InvalidSpecError(
            f"pod {name}: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuring"
            f"Execution: no term admits a node of its pool {pool!r} (label {key})"
        )


def _agreed(pods: list[Pod]) -> Pod:
    """The first pod, once every member agrees on what is the group's, not a pod set's: pool
    and priority."""
    shared = [_group_fields(p) for p in pods]
    for pod, fields in zip(pods, shared, strict=True):
        if fields != shared[0]:
            raise InvalidSpecError(
                f"pod {pod.meta.name} differs from {pods[0].meta.name} in "
                "its pool or priority; a group has one of each"
            )
    return pods[0]


def _pod_sets(pods: list[Pod], config: OperatorConfig) -> list[tuple[Charge, list[Pod]]]:
    """Alike pods together (same charge, node constraints and topology annotations), in order
    of first appearance."""
    sets: dict[tuple[object, ...], tuple[Charge, list[Pod]]] = {}
    for pod in pods:
        cost = pod_charge(pod, config.gpu_resource)
        key = (repr(cost), pod.where, repr(sorted(notes(pod).items())))
        sets.setdefault(key, (cost, []))[1].append(pod)
    return list(sets.values())


def _role(
    i: int, cost: Charge, pods: list[Pod], pool: str, config: OperatorConfig, workers: Obj
) -> Role:
    """A pod set besides the workers. In the workers' PodSet group (Kueue's
    `podset-group-name`, the same on both) it shares their domain of the required level, as
    Kueue places a group; otherwise its own annotations are its own topology."""
    named = {p.meta.labels.get(ROLE_LABEL) for p in pods}
    name = named.pop() if len(named) == 1 and None not in named else f"set-{i + 1}"
    own = notes(pods[0])
    wanted = topology(own, config)
    group = own.get(GROUP_NAME)
    together = group is not None and group == workers.get(GROUP_NAME)
    if together and wanted != topology(workers, config):
        raise InvalidSpecError(
            f"annotation {GROUP_NAME}: pod sets of group {group!r} ask different topologies; "
            "a group has one"
        )
    return Role(
        name=str(name),
        pods=len(pods),
        **cost.per_pod(),
        constraints=constraints(_pod_spec(pods[0]), pool, config, tolerate_lenders=False),
        required_level=None if together else wanted["required_level"],
        preferred_level=next(iter(wanted.get("preferred_levels", {})), None),
        slices=wanted.get("slices", ()),
        gradients=gradients(own),
        in_group=together,
    )


def _group_fields(pod: Pod) -> tuple[object, ...]:
    return (pod.meta.labels.get(POOL_LABEL), pod.priority)


def _pod_spec(pod: Pod) -> PodSpec:
    try:
        return PodSpec.model_validate(pod.spec)
    except ValidationError as exc:
        raise InvalidSpecError(describe(exc, "spec")) from exc
