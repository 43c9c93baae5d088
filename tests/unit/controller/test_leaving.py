"""Which pods hold hosts while they go (binding/leaving.py): each rule, one case."""

from __future__ import annotations

from typing import Any

from scheduler.controller.binding.leaving import leaving
from scheduler.controller.cluster.state import ClusterState, StateBuilder
from scheduler.controller.config import OperatorConfig
from scheduler.controller.podgroup.members import departing
from scheduler.controller.runtime.objects import Node, Pod
from scheduler.devtools.fake import node_manifest
from scheduler.topology import generate

CONFIG = OperatorConfig()
SPEC = generate(blocks=1, racks=2, hosts=2, gpus=8)


def pod(
    name: str, node: str | None, gpus: int = 8, scheduler: str = "rackwise", **meta: Any
) -> Pod:
    phase = meta.pop("phase", "Running")
    limits = {"nvidia.com/gpu": str(gpus), "cpu": "1"}
    container = {"name": "c", "image": "x", "resources": {"limits": limits}}
    spec: dict[str, Any] = {"containers": [container], "schedulerName": scheduler}
    spec |= {"nodeName": node} if node else {}
    metadata = {"name": name, "namespace": "default", "uid": f"pod-{name}", **meta}
    return Pod.of({"metadata": metadata, "spec": spec, "status": {"phase": phase}})


def state() -> ClusterState:
    built = StateBuilder(CONFIG).build([Node.of(node_manifest(h, CONFIG)) for h in SPEC.hosts], [])
    assert built is not None
    return built


def test_a_deleted_jobs_bound_pods_leave_as_one_gang_with_its_pod_sets():
    pods = [pod("w0", "h0-0"), pod("w1", "h1-0"), pod("launcher", "h0-0", gpus=0)]
    [gang] = leaving({"job-a": pods}, set(), set(), state(), 7.0, CONFIG.gpu_resource)
    assert gang.key == "job-a@training"
    assert gang.end_s == 7.0
    assert gang.gang.pods == 2
    assert gang.gang.gpus_per_pod == 8
    assert [(r.pods, r.gpus_per_pod) for r in gang.gang.roles] == [(1, 0)]
    assert sorted(p.host for p in gang.placement.pods) == ["h0-0", "h0-0", "h1-0"]
    assert gang.gang.all_gpus == 16


def test_only_pods_that_still_hold_a_host_count():
    pods = [
        pod("unbound", None),
        pod("done", "h0-1", phase="Succeeded"),
        pod("elsewhere", "not-a-node"),
    ]
    assert leaving({"job-a": pods}, set(), set(), state(), 0.0, CONFIG.gpu_resource) == []


def test_a_live_jobs_pods_leave_only_while_being_deleted_and_a_running_one_never():
    deleting = pod("d", "h0-0", deletionTimestamp="2026-12-01T00:00:00Z")
    kept = pod("k", "h0-1")
    owned = {"live": [deleting, kept], "running": [pod("r", "h1-0", deletionTimestamp="x")]}
    found = leaving(owned, {"live", "running"}, {"running"}, state(), 0.0, CONFIG.gpu_resource)
    assert [(g.key, [p.host for p in g.placement.pods]) for g in found] == [
        ("live@training", ["h0-0"])
    ]


def test_a_gang_on_two_pools_leaves_from_each():
    """A borrowed gang's pods on a lender's hosts are released in the lender's pool."""
    spec = generate(
        blocks=1, racks=2, hosts=2, gpus=8, pools={"training": 0.5, "online-inference": 0.5}
    )
    nodes = [Node.of(node_manifest(h, CONFIG)) for h in spec.hosts]
    built = StateBuilder(CONFIG).build(nodes, [])
    assert built is not None
    pool = built.fabric.host_pool
    [train] = [h for h in pool if pool[h] == "training"][:1]
    [lent] = [h for h in pool if pool[h] == "online-inference"][:1]
    pods = [pod("w0", train), pod("w1", lent)]
    found = leaving({"job-a": pods}, set(), set(), built, 0.0, CONFIG.gpu_resource)
    assert {(g.gang.pool, g.placement.pods[0].host) for g in found} == {
        ("training", train),
        ("online-inference", lent),
    }


def member(name: str, group: str, scheduler: str = "rackwise", **meta: Any) -> Pod:
    """A pod group's member bound to h0-0."""
    labels = {"scheduling.x-k8s.io/pod-group": group}
    return pod(name, "h0-0", scheduler=scheduler, labels=labels, **meta)


def test_a_pod_groups_members_leave_only_while_being_deleted_and_unfinished():
    going = "2026-12-01T00:00:00Z"
    pods = [
        member("kept", "g"),
        member("going", "g", deletionTimestamp=going),
        member("done", "g", deletionTimestamp=going, phase="Succeeded"),
        member("other", "g", scheduler="default-scheduler", deletionTimestamp=going),
    ]
    found = departing(pods, CONFIG)
    assert {k: [p.meta.name for p in v] for k, v in found.items()} == {
        "podgroup:default/g": ["going"]
    }
    [gang] = leaving(found, set(found), set(), state(), 0.0, CONFIG.gpu_resource)
    assert gang.key == "podgroup:default/g@training"
