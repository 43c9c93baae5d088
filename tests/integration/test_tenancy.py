"""Tenancy on the real API server, tried as a tenant who wants more than its share and as an
admin who makes a typo would: a label naming another team's queue, a namespace named like a
queue, an invalid edit and a deletion of a Queue with running gangs, a newer Queue claiming an
established one's namespace, a priority of 10^9 with a system priority class, amounts beyond
int64, and a burst with half the jobs deleted midway, sampled for quota and node overuse.
Each case failed on the code before queues admitted by namespace (7ea07f3). Its own cluster and
operator; 32 GPUs: two racks of two 8-GPU hosts, all training."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest

from scheduler.controller.config import OperatorConfig
from scheduler.topology import generate
from tests.integration.conftest import Env, own_cluster
from tests.integration.test_teams import condition, in_team, placed

pytestmark = pytest.mark.apiserver

NAMESPACES = ("team-a", "team-b", "team-c", "research")
SPEC = generate(blocks=1, racks=2, hosts=2, gpus=8)


@pytest.fixture(scope="module")
def tenancy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    config = OperatorConfig(resync_s=1.0)
    with own_cluster(tmp_path_factory.mktemp("tenancy"), NAMESPACES, SPEC, config) as env:
        yield env


@pytest.fixture
def env(tenancy: Env) -> Iterator[Env]:
    yield tenancy
    clean(tenancy)


def clean(env: Env) -> None:
    """Jobs first (their pods gone), then Queues, whose finalizer the operator lifts once the
    gangs they admitted are gone."""
    env.kubectl("delete", "tj", "--all", "-A", "--wait=false")
    env.wait("no pods", lambda: not env.admin.pods(), timeout=90)
    env.kubectl("delete", "queues", "--all", "--wait=false")
    env.wait("no queues", lambda: not names(env, "queues"), timeout=60)


def names(env: Env, kind: str) -> list[str]:
    return env.kubectl("get", kind, "-A", "-o", "name").stdout.split()


def queue(name: str, gpus: int, namespaces: list[str], **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "rackwise.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {
            "namespaces": namespaces,
            "quotas": [{"pool": "training", "nominal": {"gpus": gpus}}],
            **spec,
        },
    }


def status(env: Env, name: str) -> dict[str, object]:
    obj = json.loads(env.kubectl("get", "queue", name, "-o", "json").stdout)
    return dict(obj.get("status") or {})


def ready(env: Env, name: str) -> dict[str, str]:
    conditions = status(env, name).get("conditions") or []
    assert isinstance(conditions, list)
    return next((c for c in conditions if c["type"] == "Ready"), {})


def waits(env: Env, name: str, team: str, reason: str) -> bool:
    return condition(env, name, team, "Placed").get("reason") == reason


def test_a_label_naming_another_teams_queue_gets_no_quota(env: Env):
    env.apply(queue("research", 16, ["team-a"]))
    env.apply(queue("product", 16, ["team-b"]))
    escape = in_team("escape", "team-b", 2)
    escape["metadata"]["labels"] = {"rackwise.io/queue": "research"}
    env.post(escape, "team-b")
    env.post(in_team("own", "team-a", 2), "team-a")
    env.wait("own placed", lambda: placed(env, "own", "team-a"))
    env.wait("escape refused", lambda: waits(env, "escape", "team-b", "QuotaExceeded"))
    said = condition(env, "escape", "team-b", "Placed")["message"]
    assert "queue research does not admit namespace 'team-b'" in said
    assert not env.bound("escape", "team-b")
    env.wait("research's numbers", lambda: status(env, "research").get("usedGPUs") == 16)


def test_a_namespace_named_like_a_queue_gets_no_quota(env: Env):
    env.apply(queue("research", 16, ["team-a"]))
    env.post(in_team("lookalike", "research", 1), "research")
    env.wait("refused", lambda: waits(env, "lookalike", "research", "QuotaExceeded"))
    said = condition(env, "lookalike", "research", "Placed")["message"]
    assert "no queue lists namespace 'research'" in said
    assert not env.bound("lookalike", "research")


def test_an_invalid_edit_or_a_deletion_evicts_no_one(env: Env):
    """The issue's reproduction: b 1x8, a 2x8, c 1x8 fill the 32 GPUs, c2 waits; research's
    edit names a resource rackwise does not know. a keeps running, charged to research; c2
    keeps waiting. Deleting research then leaves it terminating, held, until a's job ends."""
    env.apply(queue("research", 16, ["team-a"], cohort="lab"))
    env.apply(queue("product", 8, ["team-b"], cohort="lab", default=True))
    env.apply(queue("ops", 16, ["team-c"], cohort="lab", reclaimWithinSeconds=0))
    for name, team, n in (("b", "team-b", 1), ("a", "team-a", 2), ("c", "team-c", 1)):
        env.post(in_team(name, team, n), team)
        env.wait(f"{name} placed", lambda name=name, team=team: placed(env, name, team))
    env.post(in_team("c2", "team-c", 1), "team-c")
    env.wait("c2 waits", lambda: condition(env, "c2", "team-c", "Placed").get("status") == "False")
    patch = '{"spec":{"quotas":[{"pool":"training","nominal":{"gpus":16,"tpus":1}}]}}'
    env.kubectl("patch", "queue", "research", "--type=merge", "-p", patch)
    env.wait("research held", lambda: "held" in ready(env, "research").get("message", ""))
    time.sleep(3 * 1.0)  # three resyncs: a reclaim would have begun by now (ops' deadline 0)
    assert placed(env, "a", "team-a")
    assert not env.bound("c2", "team-c")
    assert status(env, "research")["usedGPUs"] == 16  # still research's
    env.kubectl("delete", "queue", "research", "--wait=false")
    time.sleep(3 * 1.0)
    assert "queue.rackwise.io/research" in names(env, "queues")  # held by its finalizer
    assert placed(env, "a", "team-a")
    assert not env.bound("c2", "team-c")
    env.kubectl("delete", "tj", "a", "-n", "team-a")
    env.wait("research gone", lambda: "queue.rackwise.io/research" not in names(env, "queues"))


def test_a_newer_queue_does_not_take_an_established_queues_namespace(env: Env):
    env.apply(queue("research", 16, ["team-a"]))
    env.wait("research valid", lambda: ready(env, "research").get("status") == "True")
    time.sleep(1.1)  # creation timestamps have a one-second grain
    env.apply(queue("aaa-dup", 0, ["team-a"]))
    env.wait("aaa-dup refused", lambda: ready(env, "aaa-dup").get("reason") == "InvalidSpec")
    assert "belongs to queue research" in ready(env, "aaa-dup")["message"]
    assert ready(env, "research")["status"] == "True"
    env.post(in_team("job", "team-a", 2), "team-a")
    env.wait("job placed", lambda: placed(env, "job", "team-a"))


def test_priority_stays_inside_a_team(env: Env):
    """a holds half the fabric; c, then b (priority 10^9), each want all of it. When a's job
    ends, c's starts: b's priority orders b's own gangs only. b's system priority class is
    refused outright."""
    for team in ("team-a", "team-b", "team-c"):
        env.apply(queue(team.removeprefix("team-"), 32, [team]))
    env.post(in_team("a", "team-a", 2), "team-a")
    env.wait("a placed", lambda: placed(env, "a", "team-a"))
    env.post(in_team("c-big", "team-c", 4), "team-c")
    env.wait("c waits", lambda: condition(env, "c-big", "team-c", "Placed").get("status"))
    time.sleep(1.1)  # arrivals are creation times, of a one-second grain: b's must come later
    env.post(in_team("b-big", "team-b", 4, priority=1_000_000_000), "team-b")
    vip = in_team("b-vip", "team-b", 1)
    vip["spec"]["template"]["spec"]["priorityClassName"] = "system-cluster-critical"
    env.post(vip, "team-b")
    env.wait("vip refused", lambda: waits(env, "b-vip", "team-b", "InvalidSpec"))
    env.wait("b waits", lambda: condition(env, "b-big", "team-b", "Placed").get("status"))
    env.kubectl("delete", "tj", "a", "-n", "team-a")
    env.wait("c placed", lambda: placed(env, "c-big", "team-c"), timeout=60)
    assert not env.bound("b-big", "team-b")


def test_amounts_beyond_bounds_are_invalid_and_show_no_numbers(env: Env):
    env.apply(queue("huge", 10**20, ["team-a"]))
    env.wait("refused", lambda: ready(env, "huge").get("reason") == "InvalidSpec")
    assert "more than 10,000,000 GPUs" in ready(env, "huge")["message"]
    assert "-9223372036854775808" not in env.kubectl("get", "queues").stdout


def test_a_burst_with_half_deleted_midway_keeps_every_queue_and_node_within_bounds(env: Env):
    """18 jobs of 1-2 pods over three queues of one cohort (8 nominal each, borrowing limit 8),
    half deleted while the rest are placed; every half second: no queue's bound pods past
    nominal + borrowing limit, no node past its 8 GPUs."""
    for team in ("team-a", "team-b", "team-c"):
        limit = {"borrowingLimit": {"gpus": 8}}
        body = queue(team, 8, [team], cohort="lab")
        body["spec"]["quotas"][0].update(limit)  # type: ignore[index]
        env.apply(body)
    stop, seen = threading.Event(), []
    sampler = threading.Thread(target=sample, args=(env, stop, seen), daemon=True)
    sampler.start()
    try:
        for i in range(18):
            team = ("team-a", "team-b", "team-c")[i % 3]
            env.post(in_team(f"j{i}", team, 1 + i % 2, checkpointIntervalSeconds=60), team)
        time.sleep(3.0)
        for i in range(0, 18, 2):
            env.kubectl("delete", "tj", f"j{i}", "-n", ("team-a", "team-b", "team-c")[i % 3])
        time.sleep(8.0)
    finally:
        stop.set()
        sampler.join(timeout=30)
    assert len(seen) >= 10, seen
    assert all(max(s["queues"].values(), default=0) <= 16 for s in seen), seen
    assert all(max(s["nodes"].values(), default=0) <= 8 for s in seen), seen


def sample(env: Env, stop: threading.Event, seen: list[dict[str, dict[str, int]]]) -> None:
    while not stop.is_set():
        per_queue: dict[str, int] = {}
        per_node: dict[str, int] = {}
        for p in env.admin.pods():
            node = p["spec"].get("nodeName")
            if not node:
                continue
            gpus = int(p["spec"]["containers"][0]["resources"]["limits"].get("nvidia.com/gpu", 0))
            ns = p["metadata"]["namespace"]
            per_queue[ns] = per_queue.get(ns, 0) + gpus
            per_node[node] = per_node.get(node, 0) + gpus
        seen.append({"queues": per_queue, "nodes": per_node})
        stop.wait(0.5)
