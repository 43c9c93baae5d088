"""Workload semantics on the real API server: a failed pod restarts the whole gang until the
backoff limit, then the job is Failed with no pod left; suspend holds a job and resumes it;
a finished job goes after its TTL (its pods with it, by the real garbage collector); the pods
carry what torchrun and Kubeflow Trainer read; inference pools get a normal Service."""

from __future__ import annotations

import json
import re
import urllib.request
from typing import Any

from tests.integration.conftest import OPERATOR_PORT, Env, training_job

Obj = dict[str, Any]


def set_phase(env: Env, pod: Obj, phase: str) -> None:
    env.finish(pod, phase)


def uids(env: Env, name: str) -> set[str]:
    return {p["metadata"]["uid"] for p in env.pods(name)}


def status(env: Env, name: str) -> Obj:
    return env.job(name).get("status") or {}


def test_a_failed_pod_restarts_the_gang_then_the_job_fails_with_no_pod_left(env, fabric):
    fabric(blocks=1, racks=1, hosts=2, gpus=8)
    env.apply(training_job("flaky", 2, backoffLimit=1))
    env.wait_placed("flaky")
    first = uids(env, "flaky")
    set_phase(env, env.pods("flaky")[1], "Failed")
    env.wait("one restart", lambda: status(env, "flaky").get("restarts") == 1)
    env.wait(
        "the gang placed again with new pods",
        lambda: len(uids(env, "flaky")) == 2 and not uids(env, "flaky") & first,
        timeout=60,
    )
    env.wait_placed("flaky")
    set_phase(env, env.pods("flaky")[0], "Failed")
    env.wait("Failed", lambda: status(env, "flaky").get("phase") == "Failed")
    env.wait("no pod left", lambda: not env.pods("flaky"))
    assert env.condition("flaky")["reason"] == "BackoffLimitExceeded"
    assert status(env, "flaky")["completionTime"]


def test_suspend_deletes_the_pods_and_resume_places_the_gang_again(env, fabric):
    fabric(blocks=1, racks=1, hosts=2, gpus=8)
    env.apply(training_job("held", 2))
    env.wait_placed("held")
    env.kubectl("patch", "tj", "held", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    env.wait("Suspended", lambda: status(env, "held").get("phase") == "Suspended")
    env.wait("no pods", lambda: not env.pods("held"))
    env.kubectl("patch", "tj", "held", "--type=merge", "-p", '{"spec":{"suspend":false}}')
    env.wait_placed("held")


def test_a_finished_job_is_deleted_after_its_ttl_and_its_pods_with_it(env, fabric):
    fabric(blocks=1, racks=1, hosts=1, gpus=8)
    env.apply(training_job("brief", 1, ttlSecondsAfterFinished=0))
    env.wait_placed("brief")
    for pod in env.pods("brief"):
        set_phase(env, pod, "Succeeded")
    env.wait("the job deleted", lambda: not env.kubectl("get", "tj", "-o", "name").stdout.strip())
    env.wait("its pods gone", lambda: not env.pods("brief"))


def test_pods_get_what_torchrun_reads_and_restart_never(env, fabric):
    fabric(blocks=1, racks=1, hosts=2, gpus=8)
    env.apply(training_job("torch", 2, gpusPerReplica=4))
    env.wait_placed("torch")
    pods = sorted(env.pods("torch"), key=lambda p: p["metadata"]["name"])
    for rank, pod in enumerate(pods):
        assert pod["spec"]["restartPolicy"] == "Never"
        values = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        master = "torch-0.torch.default.svc"
        expected = {
            "RANK": str(rank),
            "NODE_RANK": str(rank),
            "PET_NODE_RANK": str(rank),
            "WORLD_SIZE": "2",
            "PET_NNODES": "2",
            "PET_NPROC_PER_NODE": "4",
            "LOCAL_WORLD_SIZE": "4",
            "MASTER_ADDR": master,
            "PET_MASTER_ADDR": master,
            "MASTER_PORT": "29500",
            "PET_MASTER_PORT": "29500",
        }
        assert {k: values.get(k) for k in expected} == expected


def test_inference_gets_a_normal_service_over_its_ports(env, fabric):
    fabric(blocks=1, racks=2, hosts=2, gpus=8, pools={"training": 0.5, "online-inference": 0.5})
    job = training_job("serve", 1, gpusPerReplica=1, pool="online-inference")
    job["spec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "http", "containerPort": 8000}
    ]
    env.apply(job)
    env.wait_placed("serve")
    service = json.loads(env.kubectl("get", "svc", "serve", "-o", "json").stdout)
    assert service["spec"]["clusterIP"] != "None"
    assert service["spec"]["ports"][0]["port"] == 8000


def scrape() -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{OPERATOR_PORT}/metrics", timeout=5) as r:
        return str(r.read().decode())


def test_metrics_carry_pool_and_namespace_and_the_process(env, fabric):
    fabric(blocks=1, racks=1, hosts=2, gpus=8)
    env.apply(training_job("measured", 1))
    env.wait_placed("measured")
    env.apply(training_job("too-big", 2))  # 2 hosts, one of them busy: it waits
    env.wait("too-big waits", lambda: env.condition("too-big").get("reason") == "Unplaceable")
    text = scrape()
    labels = 'namespace="default",pool="training"'
    assert f"rackwise_time_to_place_seconds_count{{{labels}}}" in text
    assert re.search(rf"rackwise_placement_attempts_total\{{{labels},result=\"placed\"\}}", text)
    assert re.search(r'rackwise_queue_depth\{pool="training"\} [1-9]', text)
    assert 'rackwise_queue_depth{pool="online-inference"} 0.0' in text
    assert "rackwise_cycle_seconds_count" in text
    assert "process_resident_memory_bytes" in text


def test_kubectl_explain_prints_sentences(env):
    out = env.kubectl("explain", "trainingjobs.spec.topology").stdout
    assert "Where the pods may go in the fabric" in out
    assert "Every pod inside one domain of this level" in out
