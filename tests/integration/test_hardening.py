"""Hardening on the real API server: each test reproduces one problem found at 12c427d (the
issue's numbering) and checks the behaviour that replaced it."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from scheduler.devtools.fake import set_ready
from tests.integration.conftest import GRACE_S, Env, training_job
from tests.integration.test_hostile import metric

pytestmark = pytest.mark.apiserver
Obj = dict[str, Any]
CONTAINER = {"name": "main", "image": "busybox"}
GPU8 = {"resources": {"limits": {"nvidia.com/gpu": 8}}}


def with_template(name: str, replicas: int = 1, gpus: int = 8, **pod: Any) -> Obj:
    job = training_job(name, replicas, gpus)
    job["spec"]["template"]["spec"].update(pod)
    return job


def uids(env: Env, name: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in env.pods(name)}


def settle(env: Env, cycles: int = 3) -> None:
    """Let the operator run a few cycles: a canary job placed and deleted each time."""
    for i in range(cycles):
        env.post(training_job(f"canary-{i}", 1, gpus=0))
        env.wait("canary placed", lambda n=f"canary-{i}": env.condition(n).get("status") == "True")
        env.kubectl("delete", "tj", f"canary-{i}", "--wait=false")


# 1. one bad object stops all scheduling
BAD: list[tuple[str, Obj, str]] = [
    ("tpl-spec", {"template": {"spec": "x"}}, "spec.template.spec"),
    ("containers", {"template": {"spec": {"containers": "x"}}}, "spec.template.spec.containers"),
    (
        "resources",
        {"template": {"spec": {"containers": [{**CONTAINER, "resources": "x"}]}}},
        "spec.template.spec.containers.0.resources",
    ),
    (
        "labels",
        {"template": {"metadata": {"labels": ["a"]}, "spec": {"containers": [CONTAINER]}}},
        "spec.template.metadata.labels",
    ),
    (
        "selector",
        {"template": {"spec": {"containers": [CONTAINER], "nodeSelector": "x"}}},
        "spec.template.spec.nodeSelector",
    ),
    (
        "tolerations",
        {"template": {"spec": {"containers": [CONTAINER], "tolerations": {"a": 1}}}},
        "spec.template.spec.tolerations",
    ),
    ("cpu", {"cpuPerReplica": "1e400"}, "spec.cpuPerReplica"),
    # pool and level names are the operator's config: the schema cannot know them
    ("pool", {"pool": "gpu"}, "spec.pool: unknown pool 'gpu'"),
    ("level", {"topology": {"requiredLevel": "pod"}}, "spec.topology.requiredLevel: unknown level"),
    ("memory", {"memoryPerReplica": "1e30"}, "spec.memoryPerReplica"),
]


def test_bad_objects_get_a_condition_and_scheduling_goes_on(env: Env, fabric):
    fabric(blocks=1, racks=2, hosts=2, gpus=8)
    for name, change, _ in BAD:
        job = training_job(name, 1)
        job["spec"].update(change)
        env.post(job)
    env.post(training_job("good", 2))
    env.wait_placed("good")
    for name, _, field in BAD:
        env.wait(f"{name} invalid", lambda n=name: env.condition(n).get("reason") == "InvalidSpec")
        assert env.condition(name)["message"].startswith(field), env.condition(name)["message"]
        assert env.job(name)["status"]["phase"] == "Invalid"
    assert env.healthz() == 200


# 2. runaway launch
def test_gang_size_and_the_node_pod_limit_bound_a_launch(env: Env, fabric):
    fabric(blocks=1, racks=1, hosts=2, gpus=8)
    env.post(training_job("huge", 100_000, gpus=1))
    env.wait("huge invalid", lambda: env.condition("huge").get("reason") == "InvalidSpec")
    assert "maxGangPods" in env.condition("huge")["message"]
    for node in env.admin.nodes():
        allocatable = {**node["status"]["allocatable"], "pods": "5"}
        env.admin.patch_node_status(node["metadata"]["name"], {"allocatable": allocatable})
    env.post(training_job("too-many", 11, gpus=0))
    # 11 pods on 2 nodes of 5 pods each: never, however free
    env.wait("never fits", lambda: env.condition("too-many").get("reason") == "NeverFits")
    env.post(training_job("just-fits", 10, gpus=0))
    env.wait_placed("just-fits")
    per_node: dict[str, int] = {}
    for p in env.pods("just-fits"):
        per_node[p["spec"]["nodeName"]] = per_node.get(p["spec"]["nodeName"], 0) + 1
    assert sorted(per_node.values()) == [5, 5]
    assert env.pods("huge") == []
    assert env.bound("too-many") == []


# 3. oversubscription from templates
@pytest.mark.parametrize(
    ("name", "gpus", "containers", "field"),
    [
        (
            "limit-vs-spec",
            0,
            [{**CONTAINER, "resources": {"limits": {"nvidia.com/gpu": 8}}}],
            "containers.0.resources.limits.nvidia.com/gpu",
        ),
        (
            "sidecar",
            8,
            [
                CONTAINER,
                {"name": "side", "image": "b", "resources": {"limits": {"nvidia.com/gpu": 8}}},
            ],
            "would request 16",
        ),
    ],
)
def test_template_gpus_must_agree_with_the_spec(env: Env, fabric, name, gpus, containers, field):
    fabric(blocks=1, racks=1, hosts=2, gpus=8)
    env.post(with_template(name, 1, gpus, containers=containers))
    env.wait(f"{name} invalid", lambda: env.condition(name).get("reason") == "InvalidSpec")
    assert field in env.condition(name)["message"]
    assert env.pods(name) == []


def test_init_containers_sidecars_and_foreign_pods_are_charged(env: Env, fabric):
    fabric(blocks=1, racks=1, hosts=2, gpus=8)  # 2 hosts of 128 cores, 8 GPUs
    init = [{"name": "init", "image": "busybox", "resources": {"requests": {"cpu": "100"}}}]
    env.post(with_template("heavy-init", 2, 0, initContainers=init))
    env.wait_placed("heavy-init")
    assert len({p["spec"]["nodeName"] for p in env.pods("heavy-init")}) == 2  # 100 cores each
    env.post(with_template("more-init", 1, 0, initContainers=init))
    env.wait("no room left", lambda: env.condition("more-init").get("reason") == "Unplaceable")
    big = [{**CONTAINER, "resources": {"requests": {"cpu": "500"}}}]
    env.post(with_template("cpu-500", 1, 0, containers=big))
    env.wait("500 cores never fit", lambda: env.condition("cpu-500").get("reason") == "NeverFits")
    env.kubectl("delete", "tj", "heavy-init", "more-init", "cpu-500")
    foreign = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "someone-elses", "namespace": "default"},
        "spec": {
            "nodeName": "h0-0",
            "containers": [{**CONTAINER, "resources": {"limits": {"nvidia.com/gpu": 8}}}],
        },
    }
    env.apply(foreign)
    env.post(training_job("after-foreign", 1))
    env.wait_placed("after-foreign")
    assert env.pods("after-foreign")[0]["spec"]["nodeName"] == "h0-1"


# 4. the template bypasses placement
@pytest.mark.parametrize(
    ("name", "pod", "field"),
    [
        ("pinned", {"nodeName": "h0-0"}, "spec.template.spec.nodeName"),
        ("other-sched", {"schedulerName": "default-scheduler"}, "spec.template.spec.schedulerName"),
        ("wrong-pool", {"nodeSelector": {"rackwise.io/pool": "online-inference"}}, "nodeSelector"),
        (
            "any-taint",
            {"tolerations": [{"operator": "Exists"}]},
            "spec.template.spec.tolerations.0",
        ),
        ("host-net", {"hostNetwork": True}, "spec.template.spec.hostNetwork"),
        (
            "host-path",
            {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]},
            "spec.template.spec.volumes.0.hostPath",
        ),
        (
            "privileged",
            {"containers": [{**CONTAINER, "securityContext": {"privileged": True}}]},
            "containers.0.securityContext.privileged",
        ),
        (
            "sys-admin",
            {
                "containers": [
                    {**CONTAINER, "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}
                ]
            },
            "SYS_ADMIN",
        ),
    ],
)
def test_template_cannot_bypass_placement_or_pod_security(env: Env, fabric, name, pod, field):
    fabric(blocks=1, racks=1, hosts=2, gpus=8)
    env.post(with_template(name, 1, 8, **pod))
    env.wait(f"{name} invalid", lambda: env.condition(name).get("reason") == "InvalidSpec")
    assert field in env.condition(name)["message"]
    assert env.pods(name) == []


def test_template_selector_and_affinity_are_placement_constraints(env: Env, fabric):
    fabric(blocks=1, racks=2, hosts=2, gpus=8)
    env.kubectl("label", "node", "h1-1", "disk=nvme")
    env.kubectl("label", "node", "h0-1", "zone=b")
    env.post(with_template("selected", 1, 8, nodeSelector={"disk": "nvme"}))
    env.wait_placed("selected")
    assert env.pods("selected")[0]["spec"]["nodeName"] == "h1-1"
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }
    env.post(with_template("affine", 1, 8, affinity=affinity))
    env.wait_placed("affine")
    assert env.pods("affine")[0]["spec"]["nodeName"] == "h0-1"
    env.post(with_template("nowhere", 1, 8, nodeSelector={"disk": "tape"}))
    env.wait("no such node", lambda: env.condition("nowhere").get("reason") == "NeverFits")


# 5. unlabelled nodes are taken as training nodes
def test_unlabelled_nodes_are_left_out_with_an_event(env: Env, fabric):
    fabric(blocks=1, racks=1, hosts=1, gpus=8)
    bare = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "bare"},
        "status": {
            "allocatable": {"nvidia.com/gpu": "8", "cpu": "128", "memory": "1Ti", "pods": "110"},
            "capacity": {"nvidia.com/gpu": "8", "cpu": "128", "memory": "1Ti", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }
    env.admin.create_node(bare)
    env.admin.patch_node("bare", {"spec": {"taints": []}})
    env.post(training_job("two", 2))
    env.wait("two never fit", lambda: env.condition("two").get("reason") == "NeverFits")
    env.wait("node event", lambda: any(e["reason"] == "NodeIgnored" for e in env.events("bare")))
    [event] = [e for e in env.events("bare") if e["reason"] == "NodeIgnored"]
    assert "no pool label" in event["message"]
    settle(env)
    assert len([e for e in env.events("bare") if e["reason"] == "NodeIgnored"]) == 1
    assert env.bound("two") == []


# 6. rejected pods never say why
def test_a_pod_the_api_server_rejects_reports_its_message(env: Env, fabric):
    fabric(blocks=1, racks=1, hosts=2, gpus=8)
    env.post(with_template("no-class", 1, 8, priorityClassName="does-not-exist"))
    env.wait("rejected", lambda: env.condition("no-class").get("reason") == "PodRejected")
    assert "PriorityClass" in env.condition("no-class")["message"]
    time.sleep(8)
    assert len(env.events("no-class")) <= 2
    assert env.pods("no-class") == []


@pytest.mark.parametrize(
    ("name", "containers", "field"),
    [
        ("x" * 70, [CONTAINER], "metadata.name"),
        ("9lives", [CONTAINER], "metadata.name"),
        ("no-image", [{"name": "main"}], "spec.template.spec.containers.0.image"),
    ],
)
def test_names_and_images_are_checked_before_any_pod(env: Env, fabric, name, containers, field):
    fabric(blocks=1, racks=1, hosts=1, gpus=8)
    env.post(with_template(name, 1, 8, containers=containers))
    env.wait(f"{name} invalid", lambda: env.condition(name).get("reason") == "InvalidSpec")
    assert env.condition(name)["message"].startswith(field)


# 7. node flaps restart whole gangs
def test_short_not_ready_blip_and_cordon_keep_the_gang(env: Env, fabric):
    fabric(blocks=1, racks=2, hosts=2, gpus=8)
    env.apply(training_job("steady", 2))
    env.wait_placed("steady")
    before = uids(env, "steady")
    node = env.pods("steady")[0]["spec"]["nodeName"]
    set_ready(env.admin, node, False)
    time.sleep(GRACE_S / 5)
    set_ready(env.admin, node, True)
    env.kubectl("cordon", node)
    time.sleep(GRACE_S * 1.5)
    assert uids(env, "steady") == before
    env.apply(training_job("newcomer", 2))
    env.wait_placed("newcomer")
    assert node not in {p["spec"]["nodeName"] for p in env.pods("newcomer")}
    assert uids(env, "steady") == before


def test_finished_job_is_never_rerun(env: Env, fabric):
    fabric(blocks=1, racks=1, hosts=2, gpus=8)
    env.apply(training_job("done", 2))
    env.wait_placed("done")
    for p in env.pods("done"):
        env.finish(p, "Succeeded")
    env.wait("succeeded", lambda: env.job("done")["status"]["phase"] == "Succeeded")
    before = uids(env, "done")
    set_ready(env.admin, env.pods("done")[0]["spec"]["nodeName"], False)
    time.sleep(GRACE_S * 2)
    assert env.job("done")["status"]["phase"] == "Succeeded"
    assert uids(env, "done") == before


def test_node_loss_moves_only_the_lost_pods(env: Env, fabric):
    fabric(blocks=1, racks=2, hosts=3, gpus=8)
    env.apply(training_job("phoenix", 4))
    env.wait_placed("phoenix")
    before = uids(env, "phoenix")
    lost_pod = env.pods("phoenix")[0]
    lost = lost_pod["spec"]["nodeName"]
    set_ready(env.admin, lost, False)
    env.wait(
        "lost pod re-placed",
        lambda: (
            len(env.pods("phoenix")) == 4
            and all(p["spec"].get("nodeName") not in (None, lost) for p in env.pods("phoenix"))
        ),
        timeout=GRACE_S + 30,
    )
    after = uids(env, "phoenix")
    kept = {n for n in before if after.get(n) == before[n]}
    assert kept == set(before) - {lost_pod["metadata"]["name"]}  # 3 of 4 never moved
    env.wait_placed("phoenix")
    assert "lost pods re-placed" in env.condition("phoenix")["message"]


def test_whole_gang_repair_moves_every_pod(env: Env, fabric):
    fabric(blocks=1, racks=2, hosts=3, gpus=8)
    env.apply(training_job("mover", 2, repair="WholeGang"))
    env.wait_placed("mover")
    before = uids(env, "mover")
    set_ready(env.admin, env.pods("mover")[0]["spec"]["nodeName"], False)
    env.wait(
        "whole gang moved",
        lambda: (
            len(env.pods("mover")) == 2
            and not set(uids(env, "mover").values()) & set(before.values())
            and all(p["spec"].get("nodeName") for p in env.pods("mover"))
        ),
        timeout=GRACE_S + 30,
    )


# 8. foreign pods are deleted or sabotage gangs
def test_foreign_pods_are_never_touched_and_never_join_a_gang(env: Env, fabric):
    fabric(blocks=1, racks=1, hosts=2, gpus=8)
    env.apply(training_job("real", 1))
    env.wait_placed("real")
    before = uids(env, "real")
    job_uid = env.job("real")["metadata"]["uid"]

    def pod(name: str, namespace: str, labels: Obj, annotations: Obj) -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": labels,
                "annotations": annotations,
            },
            "spec": {"containers": [CONTAINER]},
        }

    strays = [
        pod("ghost-0", "default", {"rackwise.io/job": "ghost"}, {}),
        pod("ghost-1", "kube-system", {"rackwise.io/job": "ghost"}, {}),
        pod(
            "impostor",
            "default",
            {"rackwise.io/job": "real", "rackwise.io/rank": "1"},
            {"rackwise.io/gang-uid": job_uid, "rackwise.io/node": "h0-1"},
        ),
    ]
    for stray in strays:
        env.apply(stray)
    settle(env)
    live = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in env.admin.pods()}
    assert {("default", "ghost-0"), ("kube-system", "ghost-1"), ("default", "impostor")} <= live
    assert {k: v for k, v in uids(env, "real").items() if k != "impostor"} == before
    env.kubectl("delete", "pod", "ghost-1", "-n", "kube-system", "--grace-period=0", "--force")


# 10. event storm and stale status
def test_one_event_per_reason_and_no_rewrites(env: Env, fabric):
    fabric(blocks=1, racks=1, hosts=2, gpus=8)
    env.kubectl("cordon", "h0-1")  # waiter fits the fabric, not what is open now
    env.apply(training_job("waiter", 2))
    env.wait("waiting", lambda: env.condition("waiter").get("reason") == "Unplaceable")
    for i in range(3):  # free GPU counts change under it
        env.apply(training_job(f"churn-{i}", 1, gpus=4))
        env.wait_placed(f"churn-{i}")
        env.kubectl("delete", "tj", f"churn-{i}")
    unplaceable = [e for e in env.events("waiter") if e["reason"] == "Unplaceable"]
    assert len(unplaceable) == 1
    assert unplaceable[0]["firstTimestamp"]
    assert unplaceable[0]["lastTimestamp"]
    env.wait("churn gone", lambda: not any(env.pods(f"churn-{i}") for i in range(3)))
    time.sleep(2)  # the operator sees the last change
    version = env.job("waiter")["metadata"]["resourceVersion"]
    time.sleep(3)  # three more cycles with nothing new: no status write
    assert env.job("waiter")["metadata"]["resourceVersion"] == version


def test_rolled_back_job_keeps_no_stale_placement(env: Env, fabric):
    fabric(blocks=1, racks=1, hosts=2, gpus=8)
    env.apply(training_job("fragile", 2, repair="WholeGang"))
    env.wait_placed("fragile")
    assert env.job("fragile")["status"]["placement"]["hosts"]
    set_ready(env.admin, env.pods("fragile")[0]["spec"]["nodeName"], False)
    env.wait(
        "rolled back",
        lambda: env.condition("fragile").get("reason") == "Unplaceable",
        timeout=GRACE_S + 30,
    )
    assert "placement" not in env.job("fragile")["status"]


# 11. security: client timeouts
def test_a_silent_api_server_cannot_hang_a_call(tmp_path):
    import json
    import socket
    import threading

    from scheduler.controller.runtime.gateway import ApiError, Gateway

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections, never answers
    port = silent.getsockname()[1]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "x",
        "clusters": [{"name": "x", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "x", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(config))
    gateway = Gateway(path, timeout_s=1.0)
    outcome: list[object] = []

    def call() -> None:
        try:
            gateway.nodes()
        except ApiError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(timeout=60)
    silent.close()
    assert outcome, "the call hung"
    [error] = outcome
    assert isinstance(error, ApiError)
    assert error.status == 0


def test_without_the_cache_a_queue_made_wakes_the_loop(env: Env):
    """informerCache off: the plain watches, on the real API server as the operator's user,
    see a Queue made (before, Queues and PodGroups were not watched: a quota edit waited for
    the resync) and wake the loop for it; the Workload API's PodGroups, not served by 1.20,
    are asked for without failing the others."""
    import threading
    from collections.abc import Iterator

    from scheduler.controller.runtime.cache import QUEUES, WORKLOAD_PODGROUPS, wake_on_changes
    from scheduler.controller.runtime.gateway import Gateway
    from tests.waits import until

    gateway = Gateway(env.cluster.operator_kubeconfig)
    seen: list[tuple[str, str, str]] = []
    asked: list[str] = []
    wakes: list[int] = []

    class Recorded:
        def watch_raw(self, path: str, version: str, seconds: int) -> Iterator[tuple[str, Any]]:
            asked.append(path)
            for kind, obj in gateway.watch_raw(path, version, seconds):
                seen.append((path, kind, (obj.get("metadata") or {}).get("name", "")))
                yield kind, obj

        def list_raw(self, path: str, keep: Any) -> Any:
            return gateway.list_raw(path, keep)

    stop = threading.Event()
    threads = wake_on_changes(Recorded(), lambda: wakes.append(1), stop)
    try:
        until("the Workload API's PodGroups asked for", lambda: WORKLOAD_PODGROUPS in asked, 20)
        env.apply(
            {
                "apiVersion": "rackwise.io/v1alpha1",
                "kind": "Queue",
                "metadata": {"name": "woken"},
                "spec": {"quotas": [{"pool": "training", "nominal": {"gpus": 8}}]},
            }
        )
        until("the Queue seen", lambda: (QUEUES, "ADDED", "woken") in seen, 20)
        changes = [s for s in seen if s[1] != "BOOKMARK"]
        until("a wake for each change", lambda: len(wakes) >= len(changes), 20)
    finally:
        stop.set()
        env.kubectl("delete", "queue", "woken", "--ignore-not-found")
        for thread in threads:
            thread.join(timeout=1)


def test_objects_rackwise_will_not_touch_are_reported_where_a_user_looks(env: Env, fabric):
    """A TrainingJob in a namespace without the RoleBinding, and a pod group in kube-system:
    neither is scheduled; each gets an event in the operator's namespace naming it and why,
    and the gauge rackwise_ignored_objects counts them."""
    fabric(blocks=1, racks=1, hosts=2, gpus=8)
    env.kubectl("create", "namespace", "unserved", check=False)
    job = training_job("stray", 1)
    job["metadata"]["namespace"] = "unserved"
    env.post(job, namespace="unserved")
    member = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "sys-member",
            "namespace": "kube-system",
            "labels": {"scheduling.x-k8s.io/pod-group": "sys"},
        },
        "spec": {
            "schedulerName": "rackwise",
            "containers": [{"name": "c", "image": "busybox"}],
        },
    }
    env.apply(member)

    def reported() -> set[str]:
        out = env.kubectl("get", "events", "-n", "rackwise-system", "-o", "json").stdout
        return {e["message"] for e in json.loads(out)["items"]}

    env.wait(
        "both reported",
        lambda: (
            {"TrainingJob unserved/stray", "pod group kube-system/sys"}
            <= {m.split(" is not scheduled")[0] for m in reported()}
        ),
    )
    assert any("bind the ClusterRole rackwise-workloads there" in m for m in reported())
    assert metric('rackwise_ignored_objects{reason="NamespaceNotServed"}') == 1
    assert metric('rackwise_ignored_objects{reason="ProtectedNamespace"}') == 1
    assert not [p for p in env.admin.pods() if p["metadata"]["namespace"] == "unserved"]
    env.kubectl("delete", "pod", "sys-member", "-n", "kube-system", "--grace-period=0", "--force")
    env.kubectl("delete", "tj", "stray", "-n", "unserved", "--wait=false")


def test_a_runtime_class_overhead_set_by_the_api_server_is_charged(env: Env, fabric):
    """The API server's RuntimeClass admission writes the class's overhead into the pod
    (`spec.overhead`); rackwise charges it: 100 cores of overhead on the only host leave no
    room for a 50-core pod until that pod goes."""
    fabric(blocks=1, racks=1, hosts=1, gpus=8)  # one host of 128 cores
    env.apply(
        {
            "apiVersion": "node.k8s.io/v1beta1",
            "kind": "RuntimeClass",
            "metadata": {"name": "heavy"},
            "handler": "runc",
            "overhead": {"podFixed": {"cpu": "100"}},
        }
    )
    heavy = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "with-overhead", "namespace": "default"},
        "spec": {
            "nodeName": "h0-0",
            "runtimeClassName": "heavy",
            "containers": [{**CONTAINER, "resources": {"requests": {"cpu": "1"}}}],
        },
    }
    env.apply(heavy)
    made = json.loads(env.kubectl("get", "pod", "with-overhead", "-o", "json").stdout)
    assert made["spec"]["overhead"] == {"cpu": "100"}  # the server's doing, not the test's
    env.post(training_job("after-overhead", 1, 0, cpuPerReplica="50"))
    env.wait("no room", lambda: env.condition("after-overhead").get("reason") == "Unplaceable")
    env.kubectl("delete", "pod", "with-overhead", "--wait=false", "--grace-period=0", "--force")
    env.wait_placed("after-overhead")
    env.kubectl("delete", "runtimeclass", "heavy")
