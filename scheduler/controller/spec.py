"""Typed parsing of a TrainingJob's spec and pod template.

The CRD keeps the template open (`x-kubernetes-preserve-unknown-fields`), so the API server
accepts anything there. Every field rackwise reads, or that decides where and how a pod runs, is
parsed here with Kubernetes' own types; a wrong type, a malformed quantity or an impossible
value is an InvalidSpecError naming the field. Fields rackwise does not read pass through to the
pod untouched, and the API server judges them when the pod is created."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
)
from pydantic.alias_generators import to_camel

from scheduler.controller.quantity import QuantityError, parse
from scheduler.model import MAX_LEVELS, Pool

Obj = dict[str, Any]
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


class InvalidSpecError(ValueError):
    """The job cannot run as written; the message names the field."""


def _quantity(value: StrictStr | StrictInt | StrictFloat) -> StrictStr | StrictInt | StrictFloat:
    try:
        parse(value)
    except QuantityError as exc:
        raise ValueError(str(exc)) from exc
    return value


def _dns_label(value: str) -> str:
    if len(value) > 63 or not DNS_LABEL.match(value):
        raise ValueError(f"{value[:80]!r} is not a DNS label (a-z, 0-9, '-', at most 63)")
    return value


def _label_key(value: str) -> str:
    prefix, _, name = value.rpartition("/")
    if len(name) > 63 or not LABEL_NAME.match(name) or len(prefix) > 253:
        raise ValueError(f"{value[:80]!r} is not a valid label key")
    return value


def _label_value(value: str) -> str:
    if len(value) > 63 or not LABEL_VALUE.match(value):
        raise ValueError(f"{value[:80]!r} is not a valid label value")
    return value


Quantity = Annotated[StrictStr | StrictInt | StrictFloat, AfterValidator(_quantity)]
Resources = dict[StrictStr, Quantity]
Labels = dict[
    Annotated[StrictStr, AfterValidator(_label_key)],
    Annotated[StrictStr, AfterValidator(_label_value)],
]


class K8s(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")


class Closed(K8s):
    """A part whose every field rackwise reads: an unknown field is a typo, not a pass-through."""

    model_config = ConfigDict(extra="forbid")


class ResourceRequirements(K8s):
    limits: Resources = Field(default_factory=dict)
    requests: Resources = Field(default_factory=dict)


class Capabilities(K8s):
    add: list[StrictStr] = Field(default_factory=list)
    drop: list[StrictStr] = Field(default_factory=list)


class SeccompProfile(K8s):
    type: StrictStr


class WindowsOptions(K8s):
    host_process: StrictBool | None = None


class SecurityContext(K8s):
    privileged: StrictBool | None = None
    capabilities: Capabilities | None = None
    run_as_user: StrictInt | None = None
    run_as_non_root: StrictBool | None = None
    allow_privilege_escalation: StrictBool | None = None
    proc_mount: StrictStr | None = None
    seccomp_profile: SeccompProfile | None = None
    windows_options: WindowsOptions | None = None


class ContainerPort(K8s):
    container_port: StrictInt = Field(ge=1, le=65535)
    host_port: StrictInt | None = Field(default=None, ge=0, le=65535)


class EnvVar(K8s):
    name: StrictStr = Field(min_length=1)
    value: StrictStr | None = None


class Container(K8s):
    name: Annotated[StrictStr, AfterValidator(_dns_label)]
    image: StrictStr = Field(min_length=1)
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    security_context: SecurityContext | None = None
    ports: list[ContainerPort] = Field(default_factory=list)
    env: list[EnvVar] = Field(default_factory=list)


class Toleration(Closed):
    key: StrictStr = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: StrictStr = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute", ""] = ""
    toleration_seconds: StrictInt | None = None


class NodeSelectorRequirement(Closed):
    key: StrictStr = Field(min_length=1)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[StrictStr] = Field(default_factory=list)


class NodeSelectorTerm(Closed):
    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list)


class NodeSelector(Closed):
    node_selector_terms: list[NodeSelectorTerm] = Field(min_length=1)


class NodeAffinity(K8s):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None


class Affinity(K8s):
    node_affinity: NodeAffinity | None = None


class HostPathVolume(K8s):
    path: StrictStr


class Volume(K8s):
    name: StrictStr = Field(min_length=1)
    host_path: HostPathVolume | None = None


class Sysctl(K8s):
    name: StrictStr
    value: StrictStr


class PodSecurityContext(K8s):
    run_as_user: StrictInt | None = None
    run_as_non_root: StrictBool | None = None
    seccomp_profile: SeccompProfile | None = None
    sysctls: list[Sysctl] = Field(default_factory=list)
    windows_options: WindowsOptions | None = None


class PodSpec(K8s):
    containers: list[Container] = Field(min_length=1)
    init_containers: list[Container] = Field(default_factory=list)
    node_selector: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: list[Toleration] = Field(default_factory=list)
    node_name: StrictStr | None = None
    scheduler_name: StrictStr | None = None
    host_network: StrictBool = False
    host_pid: StrictBool = Field(default=False, alias="hostPID")
    host_ipc: StrictBool = Field(default=False, alias="hostIPC")
    volumes: list[Volume] = Field(default_factory=list)
    overhead: Resources = Field(default_factory=dict)
    security_context: PodSecurityContext | None = None
    priority_class_name: StrictStr | None = None


class TemplateMeta(K8s):
    labels: Labels = Field(default_factory=dict)
    annotations: dict[StrictStr, StrictStr] = Field(default_factory=dict)


class Template(K8s):
    metadata: TemplateMeta = Field(default_factory=TemplateMeta)
    spec: PodSpec


# a level name; which ones exist is the operator's topology config (jobs.translate checks)
Level = Annotated[StrictStr, Field(min_length=1, max_length=63)]


class PreferredLevel(Closed):
    level: Level
    weight: StrictInt | StrictFloat = Field(default=1.0, ge=0)


class SliceRequest(Closed):
    """Every consecutive group of `size` replicas inside one domain of `level` (Kueue's
    podset slices)."""

    level: Level
    size: StrictInt = Field(ge=2)


class TopologyRequest(Closed):
    required_level: Level | None = None
    slices: list[SliceRequest] = Field(default_factory=list, max_length=MAX_LEVELS)
    preferred_levels: list[PreferredLevel] = Field(default_factory=list, max_length=MAX_LEVELS)


class RoleTopology(Closed):
    """A role's own topology: all its pods inside one domain of `required_level`, or of
    `preferred_level` when one domain holds them; `slices` as the workers' (by role rank)."""

    required_level: Level | None = None
    preferred_level: Level | None = None
    slices: list[SliceRequest] = Field(default_factory=list, max_length=MAX_LEVELS)


class Shape(Closed):
    dp: StrictInt = Field(default=1, ge=1)
    tp: StrictInt = Field(default=1, ge=1)
    pp: StrictInt = Field(default=1, ge=1)


class RepairPolicy(StrEnum):
    """What happens to a running gang whose node is lost."""

    LOST_PODS = "LostPods"  # keep the healthy pods, re-place only the lost ones near them
    WHOLE_GANG = "WholeGang"  # delete every pod and place the gang again


class RoleSpec(Closed):
    """Another pod set of the job (a launcher, a parameter server): its own template and
    resources, placed with the workers, all or nothing; pods `<job>-<role>-<i>`."""

    name: Annotated[StrictStr, AfterValidator(_dns_label)] = Field(max_length=20)
    replicas: StrictInt = Field(ge=1, le=1000)
    gpus_per_replica: StrictInt = Field(default=0, ge=0, le=64)
    cpu_per_replica: Quantity | None = None
    memory_per_replica: Quantity | None = None
    gradients: StrictBool = False  # its pods join the workers' gradient ring
    topology: RoleTopology = Field(default_factory=RoleTopology)
    template: Template


class TrainingJobSpec(Closed):
    replicas: StrictInt = Field(ge=1)
    gpus_per_replica: StrictInt = Field(default=8, ge=0, le=64)
    cpu_per_replica: Quantity | None = None
    memory_per_replica: Quantity | None = None
    # one of the operator's pools (config `pools`; jobs.translate checks)
    pool: Annotated[StrictStr, AfterValidator(_dns_label)] = Pool.TRAINING.value
    priority: StrictInt = 0
    # what the queue knows of the run: its expected length (EASY backfilling lets a gang use
    # hosts held for a blocked one only if it ends before them) and how often it checkpoints
    # (what a preemption loses); unknown when absent
    expected_runtime_seconds: StrictInt | None = Field(default=None, ge=1)
    checkpoint_interval_seconds: StrictInt | None = Field(default=None, ge=1)
    max_replicas_per_rack: StrictInt | None = Field(default=None, ge=1)
    topology: TopologyRequest = Field(default_factory=TopologyRequest)
    roles: list[RoleSpec] = Field(default_factory=list, max_length=8)
    parallelism: Shape | None = None
    repair: RepairPolicy = RepairPolicy.LOST_PODS
    # a failed pod restarts the whole gang (from the job's latest checkpoint) this many times,
    # then the job is Failed and every pod is removed
    backoff_limit: StrictInt = Field(default=3, ge=0, le=1000)
    suspend: StrictBool = False  # true: no pods (deleted if running); false again: queued
    # a finished job (and, by owner references, its pods) is deleted this long after it ends
    ttl_seconds_after_finished: StrictInt | None = Field(default=None, ge=0)
    template: Template


def parse_spec(job: Obj) -> TrainingJobSpec:
    try:
        return TrainingJobSpec.model_validate(job.get("spec"))
    except ValidationError as exc:
        raise InvalidSpecError(describe(exc, "spec")) from exc


def describe(exc: ValidationError, root: str) -> str:
    """The first error as `field.path: what is wrong` (and how many more there are)."""
    errors = exc.errors()
    first = errors[0]
    where = ".".join([root, *(str(p) for p in first["loc"])])
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first['msg']}{more}"
