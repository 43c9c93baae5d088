"""The gang's pods and rendezvous Service, built from the job's template."""

from __future__ import annotations

import copy
from typing import Any

from scheduler.controller.config import OperatorConfig
from scheduler.controller.jobs import JobView
from scheduler.controller.state import JOB_LABEL, NODE_ANNOTATION
from scheduler.model import Placement
from scheduler.pools import PoolPolicy

Obj = dict[str, Any]
RANK_LABEL = "rackwise.io/rank"
MASTER_PORT = 29500


def owner(job: JobView) -> Obj:
    return {
        "apiVersion": "rackwise.io/v1alpha1",
        "kind": "TrainingJob",
        "name": job.name,
        "uid": job.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def service(job: JobView) -> Obj:
    """Headless Service so that MASTER_ADDR (rank 0's hostname) resolves."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": job.name,
            "namespace": job.namespace,
            "labels": {JOB_LABEL: job.name},
            "ownerReferences": [owner(job)],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {JOB_LABEL: job.name},
            "ports": [{"name": "rendezvous", "port": MASTER_PORT}],
        },
    }


def gang_pods(job: JobView, placement: Placement, config: OperatorConfig) -> list[Obj]:
    return [pod(job, rank, host, config) for rank, host in _ranks(placement)]


def _ranks(placement: Placement) -> list[tuple[int, str]]:
    return sorted((p.rank, p.host) for p in placement.pods)


def pod(job: JobView, rank: int, host: str, config: OperatorConfig) -> Obj:
    template = copy.deepcopy(job.obj["spec"].get("template") or {})
    meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    gang = job.gang
    policy = PoolPolicy(label_key=config.labels.pool, taint_key=config.pool_taint_key)
    name = f"{job.name}-{rank}"
    env = [
        {"name": "RANK", "value": str(rank)},
        {"name": "WORLD_SIZE", "value": str(gang.pods)},
        {"name": "MASTER_ADDR", "value": f"{job.name}-0.{job.name}.{job.namespace}.svc"},
        {"name": "MASTER_PORT", "value": str(MASTER_PORT)},
    ]
    for i, container in enumerate(spec.get("containers") or []):
        container["env"] = [*(container.get("env") or []), *env]
        if i == 0:
            _resources(container, gang.gpus_per_pod, job.obj["spec"], config)
    spec["schedulerName"] = config.scheduler_name
    spec["hostname"] = name
    spec["subdomain"] = job.name
    spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **policy.node_selector(gang.pool)}
    spec["tolerations"] = [*(spec.get("tolerations") or []), policy.toleration(gang.pool)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": job.namespace,
            "labels": {**(meta.get("labels") or {}), JOB_LABEL: job.name, RANK_LABEL: str(rank)},
            # the intended node: capacity stays reserved while binding, and a restarted operator
            # finishes (or rolls back) a gang it finds half bound
            "annotations": {
                **(meta.get("annotations") or {}),
                NODE_ANNOTATION: host,
                "rackwise.io/gang-uid": job.uid,
            },
            "ownerReferences": [owner(job)],
        },
        "spec": spec,
    }


def _resources(container: Obj, gpus: int, spec: Obj, config: OperatorConfig) -> None:
    resources = container.setdefault("resources", {})
    limits = resources.setdefault("limits", {})
    requests = resources.setdefault("requests", {})
    if gpus:
        limits[config.gpu_resource] = str(gpus)
    for field, name in (("cpuPerReplica", "cpu"), ("memoryPerReplica", "memory")):
        if spec.get(field) is not None:
            requests[name] = str(spec[field])
