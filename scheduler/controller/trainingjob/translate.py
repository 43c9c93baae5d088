"""TrainingJob objects -> gang requests and the pod spec every replica shares.

Each job is translated on its own; whatever is wrong with it becomes an InvalidSpecError naming
the field, which the reconciler reports on that job alone."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from scheduler.controller.cluster.resources import Charge, charge
from scheduler.controller.config import OperatorConfig
from scheduler.controller.pods.constraints import constraints, known_pool
from scheduler.controller.pods.podspec import DNS_LABEL, InvalidSpecError, describe
from scheduler.controller.runtime.objects import TrainingJob
from scheduler.controller.runtime.quantity import parse
from scheduler.controller.trainingjob.podpolicy import (
    check_owned_fields,
    check_priority_class,
    check_security,
)
from scheduler.controller.trainingjob.spec import (
    SliceMode,
    SliceRequest,
    TrainingJobSpec,
    parse_spec,
)
from scheduler.model import GangRequest, ParallelShape, Slice
from scheduler.model.gang import Role
from scheduler.model.training import Model

Obj = dict[str, Any]

__all__ = ["InvalidSpecError", "JobView", "key", "translate"]


def key(job: TrainingJob) -> str:
    return job.key


@dataclass(frozen=True)
class JobView:
    obj: TrainingJob
    gang: GangRequest
    spec: TrainingJobSpec
    pod_spec: Obj  # the rendered spec every worker starts from
    role_specs: dict[str, Obj] = field(default_factory=dict)  # role -> its rendered spec

    @property
    def total_pods(self) -> int:
        """Workers and every role's pods."""
        return self.gang.pods + sum(r.pods for r in self.gang.roles)

    def role_of(self, rank: int) -> tuple[str, int]:
        """(role, rank within it) of a global rank; ("", rank) for a worker."""
        if rank < self.gang.pods:
            return "", rank
        first = self.gang.pods
        for role in self.gang.roles:
            if rank < first + role.pods:
                return role.name, rank - first
            first += role.pods
        raise ValueError(f"rank {rank} is beyond the gang's {self.total_pods} pods")

    @property
    def namespace(self) -> str:
        return self.obj.meta.namespace

    @property
    def name(self) -> str:
        return self.obj.meta.name

    @property
    def uid(self) -> str:
        return self.obj.meta.uid


def translate(job: TrainingJob, config: OperatorConfig) -> JobView:
    spec = parse_spec(job)
    _check_names(job, spec)
    if spec.replicas > config.max_gang_pods:
        raise InvalidSpecError(
            f"spec.replicas: {spec.replicas} exceeds the operator's limit of "
            f"{config.max_gang_pods} pods per gang (maxGangPods)"
        )
    policy = config.pools
    _pool(spec, config)
    check_owned_fields(
        spec, config.scheduler_name, policy.label_key, policy.taint_key, config.pool_names
    )
    check_security(spec, job.meta.namespace, config.pod_security)
    pod_spec = render(job.template()[1], spec, config)
    check_priority_class(pod_spec, job.meta.namespace, config.system_priority_namespaces)
    per_pod = _charge(pod_spec, spec, config)
    roles = [_role(job, spec, i, config) for i in range(len(spec.roles))]
    gang = _gang(job, spec, per_pod, config, tuple(r for r, _ in roles))
    return JobView(job, gang, spec, pod_spec, {r.name: s for r, s in roles})


def _role(
    job: TrainingJob, spec: TrainingJobSpec, i: int, config: OperatorConfig
) -> tuple[Role, Obj]:
    """A role checked and rendered as the workers are; errors name `spec.roles.<i>`."""
    role = spec.roles[i]
    alone = spec.model_copy(
        update={
            "template": role.template,
            "replicas": role.replicas,
            "gpus_per_replica": role.gpus_per_replica,
            "cpu_per_replica": role.cpu_per_replica,
            "memory_per_replica": role.memory_per_replica,
            "roles": [],
        }
    )
    try:
        policy = config.pools
        check_owned_fields(
            alone, config.scheduler_name, policy.label_key, policy.taint_key, config.pool_names
        )
        check_security(alone, job.meta.namespace, config.pod_security)
        pod_spec = render(job.template(i)[1], alone, config)
        check_priority_class(pod_spec, job.meta.namespace, config.system_priority_namespaces)
        per_pod = _charge(pod_spec, alone, config)
    except InvalidSpecError as exc:
        text = str(exc)
        raise InvalidSpecError(f"spec.roles.{i}.{text.removeprefix('spec.')}") from exc
    topology = role.topology
    named = [("requiredLevel", topology.required_level)]
    named += [("preferredLevel", topology.preferred_level)]
    named += [(f"slices.{j}.level", s.level) for j, s in enumerate(topology.slices)]
    _known_levels(named, f"spec.roles.{i}.topology", config)
    loose = [j for j, s in enumerate(topology.slices) if s.mode is not SliceMode.REQUIRED]
    if loose:
        raise InvalidSpecError(
            f"spec.roles.{i}.topology.slices.{loose[0]}.mode: a role's slices are required; "
            "preferred slices are the workers' (spec.topology.slices)"
        )
    try:
        built = Role(
            name=role.name,
            pods=role.replicas,
            **per_pod.per_pod(),
            constraints=constraints(role.template.spec, spec.pool, config),
            required_level=_level(topology.required_level, config),
            preferred_level=_level(topology.preferred_level, config),
            slices=tuple(
                Slice(level=config.canonical(s.level), size=s.size) for s in topology.slices
            ),
            gradients=role.gradients,
        )
    except ValidationError as exc:
        raise InvalidSpecError(describe(exc, f"spec.roles.{i}")) from exc
    return built, pod_spec


def _pool(spec: TrainingJobSpec, config: OperatorConfig) -> None:
    known_pool(spec.pool, "spec.pool", config)


def _check_names(job: TrainingJob, spec: TrainingJobSpec) -> None:
    """The Service is named after the job and each pod's hostname is `<job>-<rank>`: both must
    be DNS labels, so a name the API server would refuse is reported before any pod exists."""
    name = job.meta.name
    if not DNS_LABEL.match(name) or not name[0].isalpha():
        raise InvalidSpecError(
            f"metadata.name: {name[:80]!r} must start with a letter and hold only a-z, 0-9 "
            "and '-' (it names the gang's Service)"
        )
    names = [f"{name}-{spec.replicas - 1}"]
    names += [f"{name}-{r.name}-{r.replicas - 1}" for r in spec.roles]
    longest = max(names, key=len)
    if len(longest) > 63:
        raise InvalidSpecError(
            f"metadata.name: pod hostnames such as {longest[:40]}... would exceed 63 characters; "
            f"use a name of at most {62 - len(str(spec.replicas - 1))}"
        )


def render(template_spec: Obj, spec: TrainingJobSpec, config: OperatorConfig) -> Obj:
    """The template's pod spec with the gang's resources on its first container and the fields
    the scheduler owns set. Unknown fields pass through as the user wrote them."""
    pod = copy.deepcopy(template_spec)
    first = pod["containers"][0]
    resources = first.setdefault("resources", {})
    limits = resources.setdefault("limits", {})
    requests = resources.setdefault("requests", {})
    gpu = config.gpu_resource
    for where, given in (("limits", limits.get(gpu)), ("requests", requests.get(gpu))):
        if given is not None and parse(given) != spec.gpus_per_replica:
            raise InvalidSpecError(
                f"spec.template.spec.containers.0.resources.{where}.{gpu}: {given} disagrees "
                f"with spec.gpusPerReplica={spec.gpus_per_replica}"
            )
    if spec.gpus_per_replica:
        limits[gpu] = str(spec.gpus_per_replica)
    for value, name in ((spec.cpu_per_replica, "cpu"), (spec.memory_per_replica, "memory")):
        if value is None:
            continue
        given = requests.get(name)
        if given is not None and parse(given) != parse(value):
            raise InvalidSpecError(
                f"spec.template.spec.containers.0.resources.requests.{name}: {given} disagrees "
                f"with spec.{name}PerReplica={value}"
            )
        requests[name] = str(value)
    pod["schedulerName"] = config.scheduler_name
    # the gang restarts as a whole (backoffLimit): a pod must not restart on its own
    pod.setdefault("restartPolicy", "Never")
    named = config.priority_classes.get(spec.priority)
    if named and not pod.get("priorityClassName"):
        pod["priorityClassName"] = named
    return pod


def _charge(pod_spec: Obj, spec: TrainingJobSpec, config: OperatorConfig) -> Charge:
    """What one pod holds on its node, sidecars and init containers included: the charge the
    snapshot takes, so capacity is never counted from gpusPerReplica alone."""
    per_pod = charge(pod_spec, config.gpu_resource)
    if per_pod.gpus != spec.gpus_per_replica:
        raise InvalidSpecError(
            f"spec.template.spec: each pod would request {per_pod.gpus} {config.gpu_resource} "
            f"(all containers, init containers and overhead) but spec.gpusPerReplica is "
            f"{spec.gpus_per_replica}; only the first container gets the job's GPUs"
        )
    return per_pod


def _levels(spec: TrainingJobSpec, config: OperatorConfig) -> None:
    """The levels a job names must be the operator's (its topology config)."""
    topology = spec.topology
    named = [("requiredLevel", topology.required_level)]
    named += [
        (f"preferredLevels.{i}.level", p.level) for i, p in enumerate(topology.preferred_levels)
    ]
    named += [(f"slices.{i}.level", s.level) for i, s in enumerate(topology.slices)]
    _known_levels(named, "spec.topology", config)


def _known_levels(named: list[tuple[str, str | None]], where: str, config: OperatorConfig) -> None:
    """InvalidSpecError naming `where`.<field> for the first level the operator does not have."""
    names = config.level_names
    for path, level in named:
        if level is not None and level not in names:
            raise InvalidSpecError(
                f"{where}.{path}: unknown level {level!r}; levels are {', '.join(names)}"
            )


def _gang(
    job: TrainingJob,
    spec: TrainingJobSpec,
    per_pod: Charge,
    config: OperatorConfig,
    roles: tuple[Role, ...] = (),
) -> GangRequest:
    _levels(spec, config)
    topology = spec.topology
    try:
        return GangRequest(
            name=key(job),
            pods=spec.replicas,
            **per_pod.per_pod(),
            pool=spec.pool,
            objective=config.objective(spec.pool),
            required_level=_level(topology.required_level, config),
            preferred_levels={
                config.canonical(p.level): float(p.weight) for p in topology.preferred_levels
            },
            slices=_slices(topology.slices, SliceMode.REQUIRED, config),
            preferred_slices=_slices(topology.slices, SliceMode.PREFERRED, config),
            roles=roles,
            shape=ParallelShape(**spec.parallelism.model_dump()) if spec.parallelism else None,
            model=Model(**spec.model.model_dump()) if spec.model else None,
            priority=spec.priority,
            max_pods_per_rack=spec.max_replicas_per_rack,
            constraints=constraints(spec.template.spec, spec.pool, config),
        )
    except ValidationError as exc:
        raise InvalidSpecError(describe(exc, "spec")) from exc


def _slices(
    asked: list[SliceRequest], mode: SliceMode, config: OperatorConfig
) -> tuple[Slice, ...]:
    """The slices asked for in one mode, by the operator's level names."""
    return tuple(
        Slice(level=config.canonical(s.level), size=s.size) for s in asked if s.mode is mode
    )


def _level(name: str | None, config: OperatorConfig) -> str | None:
    return None if name is None else config.canonical(name)


def total_gpus(spec: TrainingJobSpec | None) -> int:
    return spec.replicas * spec.gpus_per_replica if spec else 0
