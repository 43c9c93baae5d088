"""What a TrainingJob's template may ask for.

Fields the scheduler owns (nodeName, schedulerName, the pool's selector and toleration) are set
by rackwise; a template that sets them otherwise would bypass placement or pool isolation and
is rejected. Pod security follows Kubernetes' Pod Security Standards ("baseline" by default,
"restricted" or "privileged" by config), so the operator, which creates pods with its own
rights, never creates a pod its user could not have created under that standard."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from scheduler.controller.config import PodSecurity, SecurityLevel
from scheduler.controller.pods.constraints import check_pool_selector
from scheduler.controller.pods.podspec import Container, InvalidSpecError
from scheduler.controller.trainingjob.spec import TrainingJobSpec
from scheduler.model.constraints import Taint, TaintEffect, Toleration
from scheduler.pools import POOLS

Obj = dict[str, Any]

# Pod Security Standards, baseline: the capabilities a container may add
BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
    }
)


def check_owned_fields(
    spec: TrainingJobSpec,
    scheduler_name: str,
    pool_label: str,
    pool_taint: str,
    pools: Sequence[str] = POOLS,
) -> None:
    pod = spec.template.spec
    if pod.node_name:
        raise InvalidSpecError(
            "spec.template.spec.nodeName: rackwise chooses the node; remove nodeName"
        )
    if pod.scheduler_name not in (None, scheduler_name):
        raise InvalidSpecError(
            f"spec.template.spec.schedulerName: must be {scheduler_name!r} or unset, "
            f"not {pod.scheduler_name!r}"
        )
    check_pool_selector(pod.node_selector, pool_label, spec.pool, "spec.template.spec", "spec.pool")
    for i, raw in enumerate(pod.tolerations):
        toleration = Toleration(
            key=raw.key, operator=raw.operator, value=raw.value, effect=raw.effect or None
        )
        for other in pools:
            taint = Taint(key=pool_taint, value=other, effect=TaintEffect.NO_SCHEDULE)
            if other != spec.pool and toleration.tolerates(taint):
                raise InvalidSpecError(
                    f"spec.template.spec.tolerations.{i}: tolerates pool {other!r}'s taint; "
                    f"a {spec.pool} job may not run there"
                )


def check_security(spec: TrainingJobSpec, namespace: str, policy: PodSecurity) -> None:
    if policy.level is SecurityLevel.PRIVILEGED or namespace in policy.exempt_namespaces:
        return
    problems = list(_baseline(spec))
    if policy.level is SecurityLevel.RESTRICTED:
        problems += list(_restricted(spec))
    if problems:
        raise InvalidSpecError(
            f"{problems[0]} is not allowed by the {policy.level.value} pod security standard"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
        )


def _containers(spec: TrainingJobSpec) -> Iterator[tuple[str, Container]]:
    pod = spec.template.spec
    for kind, group in (("containers", pod.containers), ("initContainers", pod.init_containers)):
        for i, container in enumerate(group):
            yield f"spec.template.spec.{kind}.{i}", container


def _baseline(spec: TrainingJobSpec) -> Iterator[str]:
    pod = spec.template.spec
    where = "spec.template.spec"
    for field, on in (
        ("hostNetwork", pod.host_network),
        ("hostPID", pod.host_pid),
        ("hostIPC", pod.host_ipc),
    ):
        if on:
            yield f"{where}.{field}: true"
    for i, volume in enumerate(pod.volumes):
        if volume.host_path is not None:
            yield f"{where}.volumes.{i}.hostPath"
    context = pod.security_context
    if context is not None:
        if context.seccomp_profile and context.seccomp_profile.type == "Unconfined":
            yield f"{where}.securityContext.seccompProfile: Unconfined"
        for sysctl in context.sysctls:
            if sysctl.name not in SAFE_SYSCTLS:
                yield f"{where}.securityContext.sysctls: {sysctl.name}"
        if context.windows_options and context.windows_options.host_process:
            yield f"{where}.securityContext.windowsOptions.hostProcess"
    for path, container in _containers(spec):
        yield from _container_baseline(path, container)


def _container_baseline(path: str, container: Container) -> Iterator[str]:
    for j, port in enumerate(container.ports):
        if port.host_port:
            yield f"{path}.ports.{j}.hostPort"
    context = container.security_context
    if context is None:
        return
    if context.privileged:
        yield f"{path}.securityContext.privileged: true"
    added = set(context.capabilities.add if context.capabilities else []) - BASELINE_CAPABILITIES
    if added:
        yield f"{path}.securityContext.capabilities.add: {', '.join(sorted(added))}"
    if context.proc_mount not in (None, "Default"):
        yield f"{path}.securityContext.procMount: {context.proc_mount}"
    if context.seccomp_profile and context.seccomp_profile.type == "Unconfined":
        yield f"{path}.securityContext.seccompProfile: Unconfined"
    if context.windows_options and context.windows_options.host_process:
        yield f"{path}.securityContext.windowsOptions.hostProcess"


def _restricted(spec: TrainingJobSpec) -> Iterator[str]:
    pod = spec.template.spec.security_context
    pod_non_root = bool(pod and pod.run_as_non_root)
    pod_seccomp = bool(pod and pod.seccomp_profile)
    if pod and pod.run_as_user == 0:
        yield "spec.template.spec.securityContext.runAsUser: 0"
    for path, container in _containers(spec):
        context = container.security_context
        if context is None or context.allow_privilege_escalation is not False:
            yield f"{path}.securityContext.allowPrivilegeEscalation: not false"
        if not (pod_non_root or (context and context.run_as_non_root)):
            yield f"{path}.securityContext.runAsNonRoot: not true"
        if context and context.run_as_user == 0:
            yield f"{path}.securityContext.runAsUser: 0"
        if not (pod_seccomp or (context and context.seccomp_profile)):
            yield f"{path}.securityContext.seccompProfile: unset"
        dropped = context.capabilities.drop if context and context.capabilities else []
        if "ALL" not in dropped:
            yield f"{path}.securityContext.capabilities.drop: ALL missing"


SYSTEM_PRIORITY = "system-"  # Kubernetes reserves the prefix for its own critical classes


def check_priority_class(pod_spec: Obj, namespace: str, allowed: frozenset[str]) -> None:
    """A tenant's pods may not claim a system priority class (system-cluster-critical,
    system-node-critical): they would outrank the cluster's own components, and rackwise
    creates the pods with its own rights. Allowed only in the namespaces the config names."""
    name = pod_spec.get("priorityClassName")
    if isinstance(name, str) and name.startswith(SYSTEM_PRIORITY) and namespace not in allowed:
        raise InvalidSpecError(
            f"spec.template.spec.priorityClassName: {name} is a system priority class, not "
            f"for namespace {namespace} (the operator's systemPriorityNamespaces)"
        )
