"""TrainingJob objects -> gang requests. What the CRD schema cannot check is checked here and
reported as a condition, never as a crash."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from scheduler.controller.state import MI, quantity
from scheduler.model import GangRequest, ParallelShape

Obj = dict[str, Any]


class InvalidSpecError(ValueError):
    pass


def key(job: Obj) -> str:
    meta = job["metadata"]
    return f"{meta['namespace']}/{meta['name']}"


@dataclass(frozen=True)
class JobView:
    obj: Obj
    gang: GangRequest

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def uid(self) -> str:
        return str(self.obj["metadata"]["uid"])


def to_gang(job: Obj) -> GangRequest:
    spec = job.get("spec") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers")
    if not containers:
        raise InvalidSpecError("spec.template.spec.containers must list at least one container")
    topology = spec.get("topology") or {}
    shape = spec.get("parallelism")
    try:
        return GangRequest(
            name=key(job),
            pods=int(spec["replicas"]),
            gpus_per_pod=int(spec.get("gpusPerReplica", 8)),
            cpu_milli_per_pod=quantity(spec.get("cpuPerReplica"), 1000),
            memory_mib_per_pod=quantity(spec.get("memoryPerReplica"), divide=MI),
            pool=spec.get("pool", "training"),
            required_level=topology.get("requiredLevel"),
            preferred_levels={
                p["level"]: float(p.get("weight", 1.0))
                for p in topology.get("preferredLevels") or []
            },
            shape=ParallelShape(**shape) if shape else None,
            priority=int(spec.get("priority", 0)),
            max_pods_per_rack=spec.get("maxReplicasPerRack"),
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise InvalidSpecError(f"{where}: {err['msg']}" if where else err["msg"]) from exc
    except (ValueError, ArithmeticError) as exc:
        raise InvalidSpecError(str(exc)) from exc
