"""Typed parsing of a pod template, as Kubernetes types (a TrainingJob's or a pod group member's).

The CRD keeps the template open (`x-kubernetes-preserve-unknown-fields`), so the API server
accepts anything there. Every field rackwise reads, or that decides where and how a pod runs, is
parsed here with Kubernetes' own types; a wrong type, a malformed quantity or an impossible
value is an InvalidSpecError naming the field. Fields rackwise does not read pass through to the
pod untouched, and the API server judges them when the pod is created."""

from __future__ import annotations

import re
from typing import Annotated, Literal

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

from scheduler.controller.runtime.quantity import QuantityError, parse

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


class PreferredSchedulingTerm(Closed):
    weight: StrictInt = Field(ge=1, le=100)
    preference: NodeSelectorTerm


class NodeAffinity(K8s):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = Field(
        default_factory=list
    )


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


def describe(exc: ValidationError, root: str) -> str:
    """The first error as `field.path: what is wrong` (and how many more there are)."""
    errors = exc.errors()
    first = errors[0]
    where = ".".join([root, *(str(p) for p in first["loc"])])
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first['msg']}{more}"
