"""What a pod asks of its node, as Kubernetes counts it: the effective requests (the larger of
the init containers' and the sum of the regular ones and sidecars, plus overhead; pod-level
resources where set; the allocated resources of a container resized in place), and the
resource claims (DRA) it names. QuantityError when a quantity cannot be read."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from scheduler.controller.runtime.quantity import parse

Obj = dict[str, Any]
CLAIM_SOURCES = ("resourceClaimName", "resourceClaimTemplateName")  # a pod's claim names one


def part(obj: Obj, name: str) -> Obj:
    """A mapping field of an object, {} where it is missing or not a mapping."""
    found = obj.get(name)
    return found if isinstance(found, dict) else {}


def requests(spec: Obj, status: Obj | None = None) -> dict[str, Decimal]:
    """Resource name -> a pod's effective request (base units), as the kube-scheduler computes
    it (resource helpers' PodRequests, Kubernetes 1.29-1.36): the app containers' sum, to which
    each sidecar (an init container with `restartPolicy: Always`) adds for the pod's life; the
    larger of that and the init phase's peak, where each init container runs beside the
    sidecars started before it; pod-level `spec.resources.requests` (CPU, memory, hugepages)
    in place of the containers' for what it names; plus the overhead. A container's limit
    stands in for a request it does not state (the API server's defaulting). After an in-place
    resize (GA in 1.35) an app container or sidecar whose status reports its resources is
    charged the larger of its spec, what it runs with and what the kubelet allocated (`resized`).
    QuantityError when a quantity cannot be read."""
    status = status or {}
    running = _statuses(status)
    infeasible = _resize_infeasible(status)
    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        _add(total, _resized(container, running, infeasible))
    sidecars: dict[str, Decimal] = {}
    peak: dict[str, Decimal] = {}
    for container in spec.get("initContainers") or []:
        if container.get("restartPolicy") == "Always":
            wanted = _resized(container, running, infeasible)
            _add(total, wanted)
            _add(sidecars, wanted)
            phase = dict(sidecars)
        else:
            phase = _add(dict(sidecars), _container(container))
        for name, value in phase.items():
            peak[name] = max(peak.get(name, Decimal(0)), value)
    for name, value in peak.items():
        total[name] = max(total.get(name, Decimal(0)), value)
    total.update(_pod_level(spec))
    _add(total, {name: parse(value) for name, value in (spec.get("overhead") or {}).items()})
    return total


def _statuses(status: Obj) -> dict[str, Obj]:
    """Container name -> its status, app and init containers (names are unique in a pod)."""
    found = [*(status.get("containerStatuses") or []), *(status.get("initContainerStatuses") or [])]
    return {str(c.get("name")): c for c in found if isinstance(c, dict)}


def _resized(container: Obj, running: dict[str, Obj], infeasible: bool) -> dict[str, Decimal]:
    """A container's request once it may have been resized in place: the larger, per resource,
    of its spec, its status `resources.requests` and its `allocatedResources`; the spec's CPU
    and memory (the resources that can be resized) are left out while the kubelet reports the
    resize infeasible (it will not happen)."""
    wanted = _container(container)
    seen = running.get(str(container.get("name")))
    if seen is None or not isinstance(seen.get("resources"), dict):
        return wanted
    parts = [part(seen["resources"], "requests"), part(seen, "allocatedResources")]
    resizable = ("cpu", "memory")
    out = {n: v for n, v in wanted.items() if n not in resizable or not infeasible}
    for given in parts:
        for name, value in given.items():
            out[name] = max(out.get(name, Decimal(0)), parse(value))
    return out


def _resize_infeasible(status: Obj) -> bool:
    """The kubelet says the resize cannot be done: condition PodResizePending, reason
    Infeasible (1.33+)."""
    found = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    return any(
        c.get("type") == "PodResizePending" and c.get("reason") == "Infeasible" for c in found
    )


def _add(total: dict[str, Decimal], more: Mapping[str, Decimal]) -> dict[str, Decimal]:
    for name, value in more.items():
        total[name] = total.get(name, Decimal(0)) + value
    return total


def names(items: object) -> tuple[str, ...]:
    """The `name` of each entry of a list of objects (a malformed entry still counts: `?`)."""
    if not isinstance(items, list):
        return ()
    return tuple(str(i.get("name") or "?") if isinstance(i, dict) else "?" for i in items)


def claims_of(spec: Obj) -> tuple[str, ...]:
    """A pod spec's resource claims (DRA, GA in 1.34), each as `name (resourceClaimName: x)`
    or `name (resourceClaimTemplateName: x)`, as the API reference names the source."""
    found = spec.get("resourceClaims")
    if not isinstance(found, list):
        return ()
    out = []
    for claim in found:
        claim = claim if isinstance(claim, dict) else {}
        source = [f"{k}: {claim[k]}" for k in CLAIM_SOURCES if claim.get(k)]
        out.append(f"{claim.get('name') or '?'} ({', '.join(source) or 'no source'})")
    return tuple(out)


def _pod_level(spec: Obj) -> dict[str, Decimal]:
    """Pod-level requests (beta in 1.34) for the resources they may name; a limit stands in for
    a request it does not state, as for a container."""
    found = _container(spec)
    return {n: v for n, v in found.items() if n in ("cpu", "memory") or n.startswith("hugepages-")}


def _container(container: Obj) -> dict[str, Decimal]:
    resources = part(container, "resources")
    wanted = {**part(resources, "limits"), **part(resources, "requests")}
    return {name: parse(value) for name, value in wanted.items()}
