"""Stand-ins for what a test or dev cluster lacks: Node objects from a topology (no kubelet
registers them) and a kubelet that marks bound pods Running."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from scheduler.controller.config import OperatorConfig
from scheduler.controller.runtime.gateway import AdminGateway
from scheduler.controller.runtime.status import now
from scheduler.model import HostSpec, TopologySpec

Obj = dict[str, Any]


def node_manifest(host: HostSpec, config: OperatorConfig) -> Obj:
    keys = {lv.name: lv.label for lv in config.levels}
    labels = {keys[level]: name for level, name in host.domains.items()}
    labels[config.labels.pool] = host.pool
    policy = config.pools
    capacity = {
        config.gpu_resource: str(host.gpus),
        "cpu": f"{host.cpu_milli}m",
        "memory": f"{host.memory_mib}Mi",
        "pods": "110",
        **{name: str(units) for name, units in host.extended.items()},
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": host.name, "labels": labels},
        "spec": {"taints": [policy.taint(host.pool)]},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "lastHeartbeatTime": now(),
                    "lastTransitionTime": now(),
                }
            ],
        },
    }


NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


def create_nodes(gateway: AdminGateway, spec: TopologySpec, config: OperatorConfig) -> None:
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda h: _create_ready(gateway, node_manifest(h, config)), spec.hosts))


def _create_ready(gateway: AdminGateway, body: Obj) -> None:
    """Create the node, then do what the node lifecycle controller does for a Ready node: lift
    the not-ready taint the API server's admission puts on every new node."""
    gateway.create_node(body)
    gateway.patch_node(body["metadata"]["name"], {"spec": {"taints": body["spec"]["taints"]}})


def set_ready(gateway: AdminGateway, node: str, ready: bool) -> None:
    """The kubelet's Ready condition, and the not-ready taint the lifecycle controller keeps in
    step with it."""
    current = next(n for n in gateway.nodes() if n["metadata"]["name"] == node)
    taints = [t for t in current["spec"].get("taints") or [] if t["key"] != NOT_READY["key"]]
    gateway.patch_node(node, {"spec": {"taints": taints if ready else [*taints, NOT_READY]}})
    condition = {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": "Test",
        "lastHeartbeatTime": now(),
        "lastTransitionTime": now(),
    }
    gateway.patch_node_status(node, {"conditions": [condition]})


def run_kubelet(gateway: AdminGateway, stop: threading.Event, period: float = 0.5) -> None:
    """Every bound pod still Pending becomes Running: enough for `kubectl get tj` to show the
    lifecycle on a cluster with no real kubelet."""
    while not stop.is_set():
        try:
            for pod in gateway.pods():
                if pod["spec"].get("nodeName") and pod.get("status", {}).get("phase") == "Pending":
                    gateway.patch_pod_status(
                        pod["metadata"]["namespace"],
                        pod["metadata"]["name"],
                        {
                            "phase": "Running",
                            "startTime": now(),
                            "conditions": [{"type": "Ready", "status": "True"}],
                        },
                    )
        except Exception:
            pass
        stop.wait(period)
