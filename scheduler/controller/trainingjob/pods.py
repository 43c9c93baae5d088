"""The gang's pods and rendezvous Service, built from the job's template. The pods are made unbound,
before the gang is placed (trainingjob/launch.py); nothing in them depends on where they go."""

from __future__ import annotations

import copy
from typing import Any

from scheduler.controller.cluster.state import JOB_LABEL
from scheduler.controller.config import OperatorConfig
from scheduler.controller.runtime.gateway import API_VERSION
from scheduler.controller.runtime.objects import Pod, TrainingJob
from scheduler.controller.trainingjob.translate import JobView
from scheduler.model.gang import WORKERS, GangRequest, Objective, objective_of

Obj = dict[str, Any]
RANK_LABEL = "rackwise.io/rank"  # the global rank: workers first, then each role's pods
ROLE_LABEL = "rackwise.io/role"
GANG_ANNOTATION = "rackwise.io/gang-uid"
# the job's metadata.generation the pod was made from: a spec edited while the gang waits is
# made again, so no pod is bound with requests other than those its gang was placed for
GENERATION_ANNOTATION = "rackwise.io/generation"
MASTER_PORT = 29500


def owner(job: JobView) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "TrainingJob",
        "name": job.name,
        "uid": job.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def service(job: JobView) -> Obj:
    """Training: a headless Service so that MASTER_ADDR (rank 0's hostname) resolves.
    Inference pools: a normal Service over the pods' declared ports, for clients."""
    spec: Obj = {"selector": {JOB_LABEL: job.name}}
    if objective_of(job.gang) is Objective.PACK:
        spec |= {"clusterIP": "None", "ports": [{"name": "rendezvous", "port": MASTER_PORT}]}
    else:
        spec["ports"] = _declared_ports(job) or [{"name": "http", "port": 80}]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": job.name,
            "namespace": job.namespace,
            "labels": {JOB_LABEL: job.name},
            "ownerReferences": [owner(job)],
        },
        "spec": spec,
    }


def _declared_ports(job: JobView) -> list[Obj]:
    declared = {
        p["containerPort"]: p.get("name") or f"port-{p['containerPort']}"
        for c in job.pod_spec["containers"]
        for p in c.get("ports") or []
        if isinstance(p.get("containerPort"), int)
    }
    return [{"name": name, "port": port} for port, name in sorted(declared.items())]


def pod_name(job: JobView, rank: int) -> str:
    """`<job>-<rank>` for a worker, `<job>-<role>-<i>` for a role's pod: also each pod's
    hostname, so MASTER_ADDR is `<job>-0.<job>`."""
    role, index = job.role_of(rank)
    return f"{job.name}-{rank}" if not role else f"{job.name}-{role}-{index}"


def pod(job: JobView, rank: int, config: OperatorConfig) -> Obj:
    role, index = job.role_of(rank)
    spec = copy.deepcopy(job.role_specs[role] if role else job.pod_spec)
    meta, _ = job.obj.template(_role_index(job, role) if role else None)
    policy = config.pools
    pool = job.gang.pool
    name = pod_name(job, rank)
    env = _env(job, index, role)
    for container in spec["containers"]:
        container["env"] = [*(container.get("env") or []), *env]
    spec["hostname"] = name
    spec["subdomain"] = job.name
    lenders = config.lenders_to(pool)
    if lenders:  # it may be bound where a lender's hosts are lent to its pool
        _pool_affinity(spec, policy.label_key, (pool, *lenders))
    else:
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **policy.node_selector(pool)}
    added = [policy.toleration(p) for p in (pool, *lenders)]
    spec["tolerations"] = [*(spec.get("tolerations") or []), *added]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": job.namespace,
            "labels": {
                **(meta.get("labels") or {}),
                JOB_LABEL: job.name,
                RANK_LABEL: str(rank),
                ROLE_LABEL: role or WORKERS,
            },
            "annotations": {
                **(meta.get("annotations") or {}),
                GANG_ANNOTATION: job.uid,
                GENERATION_ANNOTATION: generation(job.obj),
            },
            "ownerReferences": [owner(job)],
        },
        "spec": spec,
    }


def _env(job: JobView, index: int, role: str) -> list[Obj]:
    """What torchrun and Kubeflow Trainer read: a pod is one node of `gpus` processes; RANK and
    WORLD_SIZE count pods (as a PyTorchJob sets them), the PET_ names are torchrun's flags."""
    master = f"{job.name}-0.{job.name}.{job.namespace}.svc"
    restarts = job.obj.status.restarts or 0
    values = {
        "RANK": index,
        "WORLD_SIZE": job.gang.pods,
        "MASTER_ADDR": master,
        "MASTER_PORT": MASTER_PORT,
        "RACKWISE_RESTARTS": restarts,  # whole-gang restarts so far: resume from a checkpoint
    }
    if role:  # a role's pods know their role; RANK is their rank within it
        values["ROLE"] = role
    else:
        stage = pipeline_stage(job.gang, index)
        if stage is not None:
            values["RACKWISE_PIPELINE_STAGE"] = stage
        nproc = max(job.gang.gpus_per_pod, 1)
        values |= {
            "NODE_RANK": index,
            "LOCAL_WORLD_SIZE": nproc,
            "PET_NNODES": job.gang.pods,
            "PET_NPROC_PER_NODE": nproc,
            "PET_NODE_RANK": index,
            "PET_MASTER_ADDR": master,
            "PET_MASTER_PORT": MASTER_PORT,
        }
    return [{"name": k, "value": str(v)} for k, v in values.items()]


def pipeline_stage(gang: GangRequest, index: int) -> int | None:
    """The pipeline stage worker `index` runs, ranks ordered TP, EP, PP, DP from the fastest
    (topology/traffic.py; placement/stages.py chooses which host each rank gets); None where
    the gang has no pipeline or a pod holds GPUs of several stages."""
    shape = gang.shape
    if shape is None or shape.pp == 1 or not gang.gpus_per_pod:
        return None
    block = shape.tp * shape.ep
    if block % gang.gpus_per_pod:
        return None
    return (index // (block // gang.gpus_per_pod)) % shape.pp


def generation(job: TrainingJob) -> str:
    """The job's metadata.generation as pods record it ("" when it has none)."""
    return str(job.meta.generation or "")


def made_from(pod: Pod) -> str:
    """The generation of its job a pod was made from."""
    return pod.meta.annotations.get(GENERATION_ANNOTATION, "")


def _role_index(job: JobView, role: str) -> int:
    return next(i for i, r in enumerate(job.gang.roles) if r.name == role)


def _pool_affinity(spec: Obj, label: str, pools: tuple[str, ...]) -> None:
    """Every required node-affinity term also asks for one of `pools` (one term when none)."""
    node = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = node.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.setdefault("nodeSelectorTerms", []) or [{}]
    wanted = {"key": label, "operator": "In", "values": list(pools)}
    required["nodeSelectorTerms"] = [
        {**t, "matchExpressions": [*(t.get("matchExpressions") or []), wanted]} for t in terms
    ]
