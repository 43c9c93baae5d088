"""The operator against a real API server, driven with the real kubectl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from scheduler.devtools.cluster import OPERATOR_USER
from tests.integration.conftest import Env, training_job

pytestmark = pytest.mark.apiserver
REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "manifests" / "samples"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"replicas": 0}, "spec.replicas: Invalid value: 0"),
        ({"priority": "high"}, "spec.priority"),
        (
            {"topology": {"slices": [{"level": "rack", "size": 1}]}},
            "spec.topology.slices.size: Invalid value: 1",
        ),
        ({"gpusPerReplica": "eight"}, "spec.gpusPerReplica"),
        ({"template": None}, "spec.template: Required value"),
    ],
)
def test_schema_rejects_bad_objects(env: Env, change, message):
    job = training_job("bad", 1)
    job["spec"].update(change)
    job["spec"] = {k: v for k, v in job["spec"].items() if v is not None}
    # --validate=false: the API server itself, not kubectl, must reject the object
    done = env.kubectl("apply", "--validate=false", "-f", "-", stdin=json.dumps(job), check=False)
    assert done.returncode != 0
    assert message in done.stderr
    assert "bad" not in env.kubectl("get", "tj", "-o", "name").stdout


def test_samples_are_all_placed(env: Env, fabric):
    fabric(
        blocks=2,
        racks=6,
        hosts=2,
        gpus=8,
        pools={"training": 0.5, "batch-inference": 0.17, "online-inference": 0.33},
    )
    env.apply(SAMPLES)
    pools, racks = env.node_pool(), env.node_rack()
    for sample in sorted(SAMPLES.glob("*.yaml")):
        body = yaml.safe_load(sample.read_text())
        name, pool = body["metadata"]["name"], body["spec"]["pool"]
        job = env.wait_placed(name)
        pods = env.pods(name)
        assert {pools[p["spec"]["nodeName"]] for p in pods} == {pool}
        assert sorted(p["metadata"]["labels"]["rackwise.io/rank"] for p in pods) == [
            str(r) for r in range(body["spec"]["replicas"])
        ]
        env.wait(f"{name} running", lambda n=name: env.job(n)["status"]["phase"] == "Running")
        summary = job["status"]["placement"]
        assert summary["domains"]["rack"] == len({racks[p["spec"]["nodeName"]] for p in pods})
    serving = env.pods("chat-serving")
    assert len({racks[p["spec"]["nodeName"]] for p in serving}) == 4  # one replica per rack
    printed = env.kubectl("get", "tj").stdout
    assert "llm-pretrain" in printed
    assert "True" in printed


def test_pools_stay_isolated_when_training_is_full(env: Env, fabric):
    fabric(blocks=1, racks=4, hosts=2, gpus=8, pools={"training": 1, "online-inference": 1})
    env.apply(training_job("fill", 4))
    env.wait_placed("fill")
    env.apply(training_job("more", 1))
    env.wait("more unplaceable", lambda: env.condition("more").get("reason") == "Unplaceable")
    assert "pool training" in env.condition("more")["message"]
    assert env.bound("more") == []
    # kubectl shows why it waits (the CRD's printer columns)
    header, row = env.kubectl("get", "tj", "more").stdout.splitlines()[:2]
    assert header.split()[-2:] == ["REASON", "AGE"]
    assert row.split()[-2] == "Unplaceable"
    pools = env.node_pool()
    assert {pools[p["spec"]["nodeName"]] for p in env.pods("fill")} == {"training"}
    events = env.kubectl("get", "events", "-o", "json").stdout
    assert "Unplaceable" in events


def test_pending_gang_is_placed_when_capacity_frees(env: Env, fabric):
    fabric(blocks=1, racks=2, hosts=2, gpus=8)
    env.apply(training_job("first", 3))
    env.wait_placed("first")
    env.apply(training_job("second", 2))
    env.wait("second pending", lambda: env.condition("second").get("reason") == "Unplaceable")
    env.wait("second's pods say why", lambda: pod_says(env, "second") == {"Unschedulable"})
    described = env.kubectl("describe", "pod", "second-0").stdout
    assert "FailedScheduling" in described
    assert "PodScheduled" in described
    env.kubectl("delete", "tj", "first")
    env.wait_placed("second")
    env.wait("first's pods deleted", lambda: env.pods("first") == [])
    scheduled = [c for p in env.pods("second") for c in p["status"]["conditions"]]
    assert {c["status"] for c in scheduled if c["type"] == "PodScheduled"} == {"True"}


def pod_says(env: Env, job: str) -> set[str]:
    """The reasons of the job's pods' PodScheduled=False conditions."""
    return {
        c["reason"]
        for p in env.pods(job)
        for c in (p.get("status") or {}).get("conditions") or []
        if c["type"] == "PodScheduled" and c["status"] == "False"
    }


def test_a_job_larger_than_the_fabric_never_fits_and_says_so(env: Env, fabric):
    fabric(blocks=1, racks=2, hosts=2, gpus=8)
    env.apply(training_job("huge", 5))
    env.wait("NeverFits", lambda: env.condition("huge").get("reason") == "NeverFits")
    assert env.condition("huge")["message"].startswith("even with every host free")
    env.wait("its pods say so", lambda: pod_says(env, "huge") == {"NeverFits"})
    env.apply(training_job("fits", 4))
    env.wait_placed("fits")  # it does not wait behind the job that never fits
    columns = env.kubectl("get", "tj", "huge").stdout
    assert "NeverFits" in columns


def test_gang_is_never_partly_bound(env: Env, fabric):
    """A pod name taken by someone else makes one creation fail: the whole gang rolls back."""
    fabric(blocks=1, racks=2, hosts=2, gpus=8)
    squatter = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "victim-2", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    env.apply(squatter)
    env.apply(training_job("victim", 4, gpus=4))
    env.wait("bind failure reported", lambda: env.condition("victim").get("reason") == "BindFailed")
    for _ in range(10):  # whenever we look, no pod of the gang is bound
        assert not [p for p in env.pods("victim") if p["spec"].get("nodeName")]
    env.kubectl("delete", "pod", "victim-2", "--grace-period=0", "--force")
    env.wait_placed("victim")


def test_invalid_spec_is_a_condition_and_the_operator_keeps_going(env: Env, fabric):
    fabric(blocks=1, racks=1, hosts=2, gpus=8)
    env.apply(training_job("shape", 2, parallelism={"dp": 3, "tp": 8, "pp": 1}))
    env.wait("invalid reported", lambda: env.condition("shape").get("reason") == "InvalidSpec")
    assert "must equal pods*gpus_per_pod=16" in env.condition("shape")["message"]
    env.apply(training_job("fine", 2))
    env.wait_placed("fine")


def test_lost_node_replaces_the_gang(env: Env, fabric):
    from scheduler.devtools.fake import set_ready

    fabric(blocks=1, racks=2, hosts=2, gpus=8)
    env.apply(training_job("phoenix", 2))
    env.wait_placed("phoenix")
    lost = env.pods("phoenix")[0]["spec"]["nodeName"]
    set_ready(env.admin, lost, False)
    env.wait(
        "re-placed away from the lost node",
        lambda: (
            len(env.pods("phoenix")) == 2
            and all(p["spec"].get("nodeName") not in (None, lost) for p in env.pods("phoenix"))
        ),
    )


def test_restarted_operator_completes_a_half_bound_gang(env: Env, fabric):
    """Pods as an operator stopped mid-binding leaves them: all made, one bound (here by the
    test, on a node the operator would not have chosen first). The bound pod keeps its node
    and its uid, and the other is bound beside it: the gang is completed, not placed again."""
    spec = fabric(blocks=1, racks=2, hosts=2, gpus=8)
    for host in spec.hosts:  # nothing may be placed while the debris is laid out
        env.kubectl("cordon", host.name)
    env.apply(training_job("halfway", 2))
    env.wait("halfway pending", lambda: env.condition("halfway").get("reason") == "Unplaceable")
    env.wait("its pods made, unbound", lambda: len(env.pods("halfway")) == 2)
    assert env.bound("halfway") == []
    env.admin.bind("default", "halfway-0", "h1-1")
    uid = next(p for p in env.pods("halfway") if p["metadata"]["name"] == "halfway-0")
    for host in sorted(spec.hosts, key=lambda h: h.name != "h1-0"):  # its rack's first
        env.kubectl("uncordon", host.name)
    env.wait_placed("halfway")
    pods = {p["metadata"]["name"]: p for p in env.pods("halfway")}
    assert pods["halfway-0"]["metadata"]["uid"] == uid["metadata"]["uid"]
    assert {n: p["spec"]["nodeName"] for n, p in pods.items()} == {
        "halfway-0": "h1-1",
        "halfway-1": "h1-0",
    }


def test_operator_has_exactly_the_manifest_rbac(env: Env):
    for role in yaml.safe_load_all((REPO / "manifests/base/rbac/clusterrole.yaml").read_text()):
        name = role["metadata"]["name"]
        live = yaml.safe_load(env.kubectl("get", "clusterrole", name, "-o", "yaml").stdout)
        assert live["rules"] == role["rules"]

    def can(verb: str, resource: str, sub: str = "") -> bool:
        extra = [sub if sub.startswith("-") else f"--subresource={sub}"] if sub else []
        done = env.kubectl(
            "auth", "can-i", verb, resource, *extra, f"--as={OPERATOR_USER}", check=False
        )
        return done.stdout.strip() == "yes"

    assert can("create", "pods", "binding")
    assert can("patch", "trainingjobs.rackwise.io", "status")
    assert not can("patch", "trainingjobs.rackwise.io")
    assert can("patch", "pods", "status")  # a pending pod's PodScheduled condition
    assert not can("patch", "pods")
    assert not can("patch", "pods", "-n=kube-system")
    assert not can("patch", "nodes", "status")
    assert not can("delete", "nodes")
    assert not can("create", "trainingjobs.rackwise.io")
    assert not can("get", "secrets")
    assert not can("create", "pods", "-n=kube-system")
    assert not can("delete", "pods", "-n=kube-system")
    assert not can("get", "configmaps")
