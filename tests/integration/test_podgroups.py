"""Pod groups of any workload, on the real API server with the real Job and StatefulSet
controllers and the default scheduler beside rackwise: rackwise binds the members of a group
once minMember have arrived, all together, never before; the default scheduler's pods are
charged; a malformed group is reported on its own while the others are placed."""

from __future__ import annotations

import json
from typing import Any

from tests.integration.conftest import Env, training_job

Obj = dict[str, Any]
GROUP = "scheduling.x-k8s.io/pod-group"
POOL_TOLERATION = {"key": "rackwise.io/pool", "operator": "Exists", "effect": "NoSchedule"}


def podgroup(name: str, min_member: int, timeout_s: int | None = None) -> Obj:
    spec: Obj = {"minMember": min_member}
    if timeout_s is not None:
        spec["scheduleTimeoutSeconds"] = timeout_s
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def template(group: str, gpus: int = 8, annotations: Obj | None = None) -> Obj:
    return {
        "metadata": {"labels": {GROUP: group}, "annotations": annotations or {}},
        "spec": {
            "schedulerName": "rackwise",
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
        },
    }


def batch_job(name: str, pods: int, **kwargs: Any) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"parallelism": pods, "completions": pods, "template": template(name, **kwargs)},
    }


def group_pods(env: Env, group: str) -> list[Obj]:
    return [
        p
        for p in env.admin.pods()
        if (p["metadata"].get("labels") or {}).get(GROUP) == group
        and not p["metadata"].get("deletionTimestamp")
    ]


def bound(env: Env, group: str, count: int) -> bool:
    pods = group_pods(env, group)
    return len(pods) == count and all(p["spec"].get("nodeName") for p in pods)


def default_scheduled(env: Env, name: str) -> str:
    """A pod for the default scheduler (8 GPUs, tolerating the pools); the node it gets."""
    env.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "tolerations": [POOL_TOLERATION],
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {"limits": {"nvidia.com/gpu": "8"}},
                    }
                ],
            },
        }
    )

    def node() -> str:
        pod = next((p for p in env.admin.pods() if p["metadata"]["name"] == name), None)
        return str((pod or {}).get("spec", {}).get("nodeName") or "")

    # two schedulers on one node race; rackwise counts what is bound when it decides
    env.wait(f"kube-scheduler binds {name}", lambda: bool(node()), timeout=60)
    return node()


def reasons(env: Env, name: str) -> set[str]:
    return {e["reason"] for e in env.events(name)}


def scheduled(env: Env, name: str) -> tuple[str, str] | None:
    """The PodGroup's Scheduled condition: (status, reason)."""
    group = env.admin.custom.get_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", "default", "podgroups", name
    )
    conditions = (group.get("status") or {}).get("conditions") or []
    found = next((c for c in conditions if c["type"] == "Scheduled"), None)
    return None if found is None else (found["status"], found["reason"])


def test_a_batch_job_created_by_the_job_controller_is_gang_placed_in_one_rack(env, fabric):
    fabric(blocks=1, racks=2, hosts=4, gpus=8)
    env.apply(podgroup("train", 4))
    env.apply(batch_job("train", 4))
    env.wait("the Job's 4 pods bound", lambda: bound(env, "train", 4), timeout=60)
    pods = group_pods(env, "train")
    assert all(p["metadata"]["ownerReferences"][0]["kind"] == "Job" for p in pods)
    racks = {env.node_rack()[p["spec"]["nodeName"]] for p in pods}
    assert len(racks) == 1  # 4 x 8 GPUs fit one rack of 4 hosts: rackwise keeps them there
    env.wait("a Scheduled event on the PodGroup", lambda: "Scheduled" in reasons(env, "train"))
    env.wait("its condition", lambda: scheduled(env, "train") == ("True", "Scheduled"))


def test_a_group_is_not_placed_before_min_member_pods_exist(env, fabric):
    fabric(blocks=1, racks=1, hosts=4, gpus=8)
    env.apply(podgroup("short", 3, timeout_s=1))
    env.apply(batch_job("short", 2))
    env.wait("2 pods created", lambda: len(group_pods(env, "short")) == 2, timeout=60)
    env.wait("GroupIncomplete", lambda: "GroupIncomplete" in reasons(env, "short"), timeout=30)
    env.wait("its condition", lambda: scheduled(env, "short") == ("False", "GroupIncomplete"))
    assert not any(p["spec"].get("nodeName") for p in group_pods(env, "short"))
    # kubectl shows why it waits (the CRD's printer columns)
    header, row = env.kubectl("get", "pg", "short").stdout.splitlines()[:2]
    assert header.split()[:4] == ["NAME", "MINMEMBER", "SCHEDULED", "REASON"]
    assert row.split()[:4] == ["short", "3", "False", "GroupIncomplete"]
    # the third member arrives (a second Job in the same group): all three are placed together
    more = batch_job("short-more", 1)
    more["spec"]["template"]["metadata"]["labels"][GROUP] = "short"
    env.apply(more)
    env.wait("all 3 bound", lambda: bound(env, "short", 3), timeout=60)


def test_statefulset_pods_are_a_group_too(env, fabric):
    fabric(blocks=1, racks=2, hosts=2, gpus=8)
    env.apply(podgroup("db", 2))
    env.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {
                "replicas": 2,
                "podManagementPolicy": "Parallel",  # OrderedReady would wait for pod 0 alone
                "serviceName": "db",
                "selector": {"matchLabels": {GROUP: "db"}},
                "template": template("db")
                | {"spec": template("db")["spec"] | {"restartPolicy": "Always"}},
            },
        }
    )
    env.wait("both StatefulSet pods bound", lambda: bound(env, "db", 2), timeout=60)
    hosts = {p["spec"]["nodeName"] for p in group_pods(env, "db")}
    assert len({env.node_rack()[h] for h in hosts}) == 1


def test_default_scheduler_pods_are_charged_and_rackwise_places_around_them(env, fabric):
    fabric(blocks=1, racks=1, hosts=2, gpus=8)
    taken = default_scheduled(env, "plain")
    env.apply(podgroup("two", 2))
    env.apply(batch_job("two", 2))
    env.apply(podgroup("one", 1))
    env.apply(batch_job("one", 1))
    env.wait("the 1-pod group placed on the free host", lambda: bound(env, "one", 1), timeout=60)
    [one] = group_pods(env, "one")
    assert one["spec"]["nodeName"] != taken
    assert not any(p["spec"].get("nodeName") for p in group_pods(env, "two"))  # no room: waits


def test_a_malformed_group_is_reported_and_the_others_are_placed(env, fabric):
    fabric(blocks=1, racks=2, hosts=2, gpus=8)
    env.apply(podgroup("bad", 1))
    env.apply(batch_job("bad", 1, annotations={"rackwise.io/required-level": "galaxy"}))
    env.apply(podgroup("good", 2))
    env.apply(batch_job("good", 2))
    env.wait("the good group bound", lambda: bound(env, "good", 2), timeout=60)
    env.wait("InvalidSpec on the bad group", lambda: "InvalidSpec" in reasons(env, "bad"))
    message = next(e["message"] for e in env.events("bad") if e["reason"] == "InvalidSpec")
    assert "unknown level 'galaxy'" in message
    assert not any(p["spec"].get("nodeName") for p in group_pods(env, "bad"))


def test_a_member_whose_node_selector_contradicts_its_pool_is_never_bound(env, fabric):
    """Its selector asks for online-inference nodes while its pool label says training: the
    group is InvalidSpec naming the field, as a TrainingJob template would be."""
    fabric(blocks=1, racks=2, hosts=2, gpus=8, pools={"training": 1, "online-inference": 1})
    job = batch_job("crossed", 1)
    job["spec"]["template"]["spec"]["nodeSelector"] = {"rackwise.io/pool": "online-inference"}
    env.apply(podgroup("crossed", 1))
    env.apply(job)
    env.wait("InvalidSpec", lambda: "InvalidSpec" in reasons(env, "crossed"), timeout=60)
    message = next(e["message"] for e in env.events("crossed") if e["reason"] == "InvalidSpec")
    assert "spec.nodeSelector.rackwise.io/pool: 'online-inference' contradicts" in message
    assert not any(p["spec"].get("nodeName") for p in group_pods(env, "crossed"))


def test_kueue_topology_annotations_name_a_node_label(env, fabric):
    fabric(blocks=1, racks=2, hosts=2, gpus=8)
    rack_label = json.loads(env.kubectl("get", "nodes", "-o", "json").stdout)["items"][0]
    assert "rackwise.io/rack" in rack_label["metadata"]["labels"]
    notes = {"kueue.x-k8s.io/podset-required-topology": "rackwise.io/rack"}
    env.apply(podgroup("wide", 3))
    env.apply(batch_job("wide", 3, annotations=notes))  # 3 x 8 GPUs; a rack holds 2: ever
    env.wait("NeverFits", lambda: "NeverFits" in reasons(env, "wide"), timeout=60)
    assert not any(p["spec"].get("nodeName") for p in group_pods(env, "wide"))


def test_a_trainingjob_a_batch_job_and_default_scheduler_pods_side_by_side(env, fabric):
    fabric(blocks=1, racks=2, hosts=2, gpus=8)
    default_scheduled(env, "plain-2")
    env.apply(training_job("tj-side", 1))
    env.apply(podgroup("job-side", 2))
    env.apply(batch_job("job-side", 2))
    env.wait_placed("tj-side")
    env.wait("the Job's group bound", lambda: bound(env, "job-side", 2), timeout=60)
    pods = env.admin.pods()
    hosts = [p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")]
    assert len(hosts) == 4
    assert len(set(hosts)) == 4  # 8 GPUs each on 4 hosts of 8: nothing shares a host
    job_hosts = {p["spec"]["nodeName"] for p in group_pods(env, "job-side")}
    assert len({env.node_rack()[h] for h in job_hosts}) == 1


def test_a_leader_and_its_workers_are_one_gang_the_leader_placed_near_them(env, fabric):
    """A LeaderWorkerSet-like group: 1 CPU-only leader and 2 8-GPU workers. The workers are
    the gang that is packed; the leader is a role placed nearest them, all or nothing."""
    fabric(blocks=1, racks=2, hosts=2, gpus=8)
    env.apply(podgroup("lws", 3))
    for i, gpus in enumerate([0, 8, 8]):
        spec = template("lws", gpus=gpus)
        if not gpus:
            spec["metadata"]["labels"]["rackwise.io/role"] = "leader"
            spec["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
        env.apply(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"lws-{i}", "namespace": "default", **spec["metadata"]},
                "spec": spec["spec"],
            }
        )
    env.wait("all three bound", lambda: bound(env, "lws", 3), timeout=60)
    where = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in group_pods(env, "lws")}
    racks = env.node_rack()
    assert racks[where["lws-1"]] == racks[where["lws-2"]]  # the workers packed in one rack
    assert where["lws-0"] in {where["lws-1"], where["lws-2"]}  # the leader on a worker's host


def test_a_member_bound_by_a_stopped_operator_that_finished_still_counts(env, fabric):
    """What a kill right after binding leaves: one member of a group of two bound (here by
    the admin, as the stopped operator did) and finished before the next operator looks. Its
    sibling is placed; it does not wait for a second member that will never come."""
    fabric(blocks=1, racks=1, hosts=2, gpus=8)
    for rank in range(2):
        meta = {"name": f"pair-{rank}", "labels": {GROUP: "pair"}}
        env.apply({"apiVersion": "v1", "kind": "Pod", **template("pair"), "metadata": meta})
    env.wait(
        "no PodGroup yet",
        lambda: "NoPodGroup" in reasons(env, "pair-0") | reasons(env, "pair-1"),
        timeout=60,
    )
    node = env.admin.nodes()[0]["metadata"]["name"]
    env.admin.bind("default", "pair-0", node)
    env.admin.patch_pod_status("default", "pair-0", {"phase": "Succeeded"})
    env.apply(podgroup("pair", 2))

    def sibling_bound() -> bool:
        pods = {p["metadata"]["name"]: p for p in group_pods(env, "pair")}
        return bool(pods["pair-1"]["spec"].get("nodeName"))

    env.wait("its sibling bound", sibling_bound, timeout=60)


def exclusive(group: str, key: str = "rackwise.io/rack") -> Obj:
    """LeaderWorkerSet's exclusive placement as it writes it into pods: together in one domain
    of the key (affinity with its own group), alone there (anti-affinity with any other)."""
    mine = {"matchLabels": {"lws/group-key": group}}
    others = {
        "matchExpressions": [
            {"key": "lws/group-key", "operator": "Exists"},
            {"key": "lws/group-key", "operator": "NotIn", "values": [group]},
        ]
    }
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    return {
        "podAffinity": {required: [{"labelSelector": mine, "topologyKey": key}]},
        "podAntiAffinity": {required: [{"labelSelector": others, "topologyKey": key}]},
    }


def test_exclusive_racks_written_as_pod_affinity_hold_on_the_real_api_server(env, fabric):
    """Two groups of two 4-GPU pods, each exclusive in a rack: one rack each (compactness
    alone would put both on the first rack's hosts); a third waits, naming the term."""
    fabric(blocks=1, racks=2, hosts=2, gpus=8)
    for name in ("ex1", "ex2", "ex3"):
        job = batch_job(name, 2, gpus=4)
        spec = job["spec"]["template"]
        spec["metadata"]["labels"]["lws/group-key"] = name
        spec["spec"]["affinity"] = exclusive(name)
        env.apply(podgroup(name, 2))
        env.apply(job)
        if name != "ex3":
            env.wait(f"{name} bound", lambda name=name: bound(env, name, 2), timeout=60)
    rack = env.node_rack()
    taken = [{rack[p["spec"]["nodeName"]] for p in group_pods(env, n)} for n in ("ex1", "ex2")]
    assert all(len(t) == 1 for t in taken)
    assert taken[0] != taken[1]
    env.wait("ex3 waits", lambda: scheduled(env, "ex3") == ("False", "Unplaceable"), timeout=60)
    assert not any(p["spec"].get("nodeName") for p in group_pods(env, "ex3"))
    [pod, *_] = group_pods(env, "ex3")
    said = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "podAntiAffinity" in said["message"]
