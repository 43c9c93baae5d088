"""Priorities on the real API server: preemption within a namespace, and the EASY reservation
that keeps a large gang from starving behind small ones."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler.devtools.devcluster import serve_namespace
from tests.integration.conftest import Env, training_job

pytestmark = pytest.mark.apiserver


def test_a_higher_priority_gang_preempts_and_the_victim_returns(env: Env, fabric):
    fabric(blocks=1, racks=2, hosts=2, gpus=8)
    env.post(training_job("low", 4))
    env.wait_placed("low")
    env.post(training_job("high", 2, priority=10))
    env.wait("low preempted", lambda: env.condition("low", "Preempted").get("status") == "True")
    message = env.condition("low", "Preempted")["message"]
    assert message.startswith("preempted by default/high (priority 10)")
    assert any(e["reason"] == "Preempted" for e in env.events("low"))
    placed = env.wait_placed("high")
    hosts = {p["spec"]["nodeName"] for p in env.pods("high")}
    racks = {env.node_rack()[h] for h in hosts}
    assert len(racks) == 1, placed["status"]
    # low needs all four hosts: it waits for high, then comes back
    assert not env.bound("low")
    env.kubectl("delete", "tj", "high", "--wait=false")
    env.wait_placed("low")
    assert env.condition("low", "Preempted") == {}


def test_equal_priority_and_other_namespaces_are_never_preempted(env: Env, fabric):
    fabric(blocks=1, racks=1, hosts=2, gpus=8)
    if env.kubectl("create", "namespace", "team-b", check=False).returncode == 0:
        serve_namespace(env.cluster, "team-b")
    env.post(training_job("mine", 2, priority=5))
    env.wait_placed("mine")
    env.post(training_job("peer", 1, priority=5))
    other = training_job("other", 1, priority=100)
    other["metadata"]["namespace"] = "team-b"
    env.post(other, namespace="team-b")
    env.wait("peer waits", lambda: env.condition("peer").get("reason") == "Unplaceable")
    env.wait("other waits", lambda: reason(env, "other", "team-b") == "Unplaceable")
    assert env.condition("mine")["status"] == "True"
    assert len(env.pods("mine")) == 2


def test_a_blocked_large_gang_holds_its_hosts_against_later_small_ones(env: Env, fabric):
    fabric(blocks=1, racks=1, hosts=2, gpus=8)
    env.post(training_job("first", 1))
    env.wait_placed("first")
    env.post(training_job("big", 2))
    env.wait("big waits", lambda: env.condition("big").get("reason") == "Unplaceable")
    env.post(training_job("small", 1))
    env.wait("small held", lambda: env.condition("small").get("reason") == "WaitingForReservation")
    assert env.condition("small")["message"].startswith("hosts are held for default/big")
    assert not env.bound("small")
    env.kubectl("delete", "tj", "first", "--wait=false")
    env.wait_placed("big")


def reason(env: Env, name: str, namespace: str) -> str | None:
    conditions = (env.job(name, namespace).get("status") or {}).get("conditions") or []
    return next((c.get("reason") for c in conditions if c["type"] == "Placed"), None)


def role(name: str, replicas: int, gpus: int, **fields: Any) -> dict[str, Any]:
    """A TrainingJob role of `replicas` busybox pods with `gpus` each."""
    container = {"containers": [{"name": name, "image": "busybox"}]}
    return {
        "name": name,
        "replicas": replicas,
        "gpusPerReplica": gpus,
        "template": {"spec": container},
        **fields,
    }


def test_a_job_with_a_launcher_role_is_placed_as_one_gang(env: Env, fabric):
    fabric(blocks=1, racks=2, hosts=2, gpus=8)
    job = training_job("mpi", 2)
    job["spec"]["roles"] = [role("launcher", 1, 0, cpuPerReplica="1")]
    env.post(job)
    env.wait_placed("mpi")
    pods = {p["metadata"]["name"]: p for p in env.pods("mpi")}
    assert sorted(pods) == ["mpi-0", "mpi-1", "mpi-launcher-0"]
    launcher = pods["mpi-launcher-0"]
    env_vars = {e["name"]: e["value"] for e in launcher["spec"]["containers"][0]["env"]}
    assert env_vars["ROLE"] == "launcher"
    assert env_vars["RANK"] == "0"
    assert launcher["metadata"]["labels"]["rackwise.io/rank"] == "2"
    workers = {pods[n]["spec"]["nodeName"] for n in ("mpi-0", "mpi-1")}
    rack = env.node_rack()
    assert rack[launcher["spec"]["nodeName"]] in {rack[w] for w in workers}  # near the workers
    assert "nvidia.com/gpu" not in (launcher["spec"]["containers"][0].get("resources") or {}).get(
        "limits", {}
    )


def test_a_role_that_cannot_fit_holds_the_whole_job_back(env: Env, fabric):
    fabric(blocks=1, racks=1, hosts=2, gpus=8)
    job = training_job("tight", 2)
    job["spec"]["roles"] = [role("ps", 1, 8)]
    env.post(job)
    env.wait("tight waits", lambda: env.condition("tight").get("reason") == "Unplaceable")
    assert env.condition("tight")["message"].startswith("role ps: needs 1 pods x 8 GPUs")
    assert not env.bound("tight")


def test_a_roles_own_topology_reaches_the_placement(env: Env, fabric):
    """The API server keeps `roles[].topology` (the schema declares it) and the operator
    honours it: two 8-GPU parameter servers required in one rack, beside a filler that broke
    one of the three racks."""
    fabric(blocks=1, racks=3, hosts=2, gpus=8)
    env.post(training_job("filler", 1))
    env.wait_placed("filler")
    job = training_job("ps", 2)
    job["spec"]["roles"] = [role("ps", 2, 8, topology={"requiredLevel": "rack"})]
    env.post(job)
    env.wait_placed("ps")
    stored = env.job("ps")["spec"]["roles"][0]
    assert stored["topology"] == {"requiredLevel": "rack"}
    rack = env.node_rack()
    servers = [p for p in env.pods("ps") if p["metadata"]["name"].startswith("ps-ps-")]
    assert len({rack[p["spec"]["nodeName"]] for p in servers}) == 1


def test_a_ring_role_is_kept_by_the_api_server_and_counted_in_the_placements_traffic(
    env: Env, fabric
):
    """`roles[].gradients` survives the schema; the reported cost counts the member's ring
    edges (it lands beside the workers' rack: the first rack holds the workers only)."""
    fabric(blocks=1, racks=2, hosts=2, gpus=8)
    placed: dict[str, Any] = {}
    for name, gradients in (("ring", True), ("plain", False)):
        job = training_job(name, 2)
        job["spec"]["roles"] = [role("narrow", 1, 8, gradients=gradients)]
        env.post(job)
        env.wait_placed(name)
        assert env.job(name)["spec"]["roles"][0]["gradients"] is gradients
        placed[name] = env.job(name)["status"]["placement"]
        env.kubectl("delete", "tj", name, "--wait=true")
        env.wait(f"{name} gone", lambda name=name: not env.pods(name))
    assert placed["ring"]["cost"] > placed["plain"]["cost"]


def test_a_preemptor_takes_one_victim_and_its_freed_host_is_held_for_it(env: Env, fabric):
    """The case a hostile tenant found: a pool full of priority-0 jobs, a 1-host job of the top
    priority in `default`, and a waiting job and a pod group of `tenant-a`. Exactly one job is
    preempted (one host is all the preemptor needs), the preemptor gets that host, and nothing
    of `tenant-a` is placed on it first, nor anywhere while the pool is full."""
    from tests.integration.test_podgroups import batch_job, podgroup

    fabric(blocks=1, racks=2, hosts=4, gpus=8)
    if env.kubectl("create", "namespace", "tenant-a", check=False).returncode == 0:
        serve_namespace(env.cluster, "tenant-a")
    lows = [f"low-{i}" for i in range(8)]
    for name in lows:  # eight 1-GPU pods each, on one host: a victim's pods take a while to go
        env.post(training_job(name, 8, gpus=1))
    for name in lows:
        env.wait_placed(name)
    waiting = training_job("theirs", 1)
    waiting["metadata"]["namespace"] = "tenant-a"
    env.post(waiting, namespace="tenant-a")
    group, job = podgroup("their-group", 1), batch_job("their-group", 1)
    for obj in (group, job):
        obj["metadata"]["namespace"] = "tenant-a"
        env.apply(obj)
    env.wait("tenant-a waits", lambda: reason(env, "theirs", "tenant-a") == "Unplaceable")
    env.post(training_job("urgent", 1, priority=1_000_000_000))
    env.wait_placed("urgent")
    [host] = {p["spec"]["nodeName"] for p in env.pods("urgent")}
    env.wait("a victim", lambda: len(preempted(env, lows)) == 1)
    [victim] = preempted(env, lows)
    # the victim queued again and looked at by a later cycle: still one victim, tenant-a waits
    env.wait("the victim requeued", lambda: reason(env, victim, "default") != "Preempted")
    assert not env.bound(victim)
    assert len(preempted(env, lows)) == 1
    assert not env.bound("theirs", "tenant-a")
    others = [
        p
        for p in env.admin.pods()
        if p["metadata"]["namespace"] == "tenant-a" and p["spec"].get("nodeName")
    ]
    assert not others, [p["metadata"]["name"] for p in others]
    assert host not in {p["spec"].get("nodeName") for n in lows for p in env.pods(n)}


HOLD = "rackwise.io/test-hold"


def test_victims_whose_pods_take_time_to_go_are_not_followed_by_more(env: Env, fabric):
    """The race behind the hostile tenant's case, made certain: the victims' pods carry a
    finalizer, so they stay (terminating) after the operator deletes them, as pods do while a
    kubelet stops them. For several cycles nothing more is preempted and nothing of tenant-a
    takes the host; once the pods go, the preemptor starts there. (Before the hold was kept
    until the preemptor started, each cycle preempted one more job.)"""
    from tests.integration.test_hostile import metric

    fabric(blocks=1, racks=1, hosts=4, gpus=8)
    if env.kubectl("create", "namespace", "tenant-a", check=False).returncode == 0:
        serve_namespace(env.cluster, "tenant-a")
    lows = [f"slow-{i}" for i in range(4)]
    for name in lows:
        env.post(training_job(name, 1))
    for name in lows:
        env.wait_placed(name)
        for pod in env.pods(name):
            patch = json.dumps({"metadata": {"finalizers": [HOLD]}})
            env.kubectl("patch", "pod", pod["metadata"]["name"], "--type=merge", "-p", patch)
    theirs = training_job("theirs", 1)
    theirs["metadata"]["namespace"] = "tenant-a"
    env.post(theirs, namespace="tenant-a")
    env.post(training_job("urgent", 1, priority=1_000_000_000))
    try:
        env.wait("a victim", lambda: len(preempted(env, lows)) >= 1)
        victim = preempted(env, lows)[0]
        cycles = metric("rackwise_last_cycle_timestamp")
        for i in range(1, 4):  # three more seconds of the operator's cycles (resync 1 s)
            env.wait(f"cycle {i}", lambda i=i: metric("rackwise_last_cycle_timestamp") > cycles + i)
        assert preempted(env, lows) == [victim]
        assert not env.bound("urgent")
        assert not env.bound("theirs", "tenant-a")
        # the hosts it waits for are spoken for where autoscalers and kube-scheduler look
        held = {p["spec"]["nodeName"] for p in env.pods(victim)}
        env.wait("urgent nominated", lambda: set(nominations(env, "urgent")) == held)
    finally:  # the pods go (and the next test's reset can delete them)
        for pod in env.admin.pods():
            if HOLD in (pod["metadata"].get("finalizers") or []):
                patch = '{"metadata":{"finalizers":null}}'
                name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
                env.kubectl("patch", "pod", name, "-n", namespace, "--type=merge", "-p", patch)
    env.wait_placed("urgent")
    assert preempted(env, lows) == [victim]
    assert not env.bound("theirs", "tenant-a")
    env.wait("nomination cleared", lambda: nominations(env, "urgent") == [None])


def nominations(env: Env, job: str) -> list[str | None]:
    return [(p.get("status") or {}).get("nominatedNodeName") for p in env.pods(job)]


def preempted(env: Env, names: list[str]) -> list[str]:
    return [n for n in names if env.condition(n, "Preempted").get("status") == "True"]
