"""Teams on the real API server: two teams in two namespaces share 32 GPUs through a cohort.
Team b borrows team a's idle quota; team a submits, b's borrowers are reclaimed (they declare no
checkpoint before the deadline: evicted at once they would lose work, so they go at it) and a's
gang is placed; `kubectl get queues` shows the numbers before and after. A TrainingJob created
suspended is never placed, and is once resumed, as an admission controller (Kueue) would flip
it. Its own cluster and operator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scheduler.controller.config import OperatorConfig
from scheduler.topology import generate
from tests.integration.conftest import Env, own_cluster, training_job

pytestmark = pytest.mark.apiserver

TEAMS = ("team-a", "team-b")
SPEC = generate(blocks=1, racks=2, hosts=2, gpus=8)  # 32 GPUs, all training
QUEUES = """
apiVersion: rackwise.io/v1alpha1
kind: Queue
metadata: {name: team-a}
spec:
  cohort: research
  namespaces: [team-a]
  reclaimWithinSeconds: 20
  quotas: [{pool: training, nominal: {gpus: 16}}]
---
apiVersion: rackwise.io/v1alpha1
kind: Queue
metadata: {name: team-b}
spec:
  cohort: research
  namespaces: [team-b]
  quotas: [{pool: training, nominal: {gpus: 16}}]
"""


@pytest.fixture(scope="module")
def teams_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    config = OperatorConfig(resync_s=1.0)
    with own_cluster(tmp_path_factory.mktemp("teams"), TEAMS, SPEC, config) as env:
        yield env


def in_team(name: str, team: str, replicas: int, **spec: object) -> dict[str, object]:
    job = training_job(name, replicas, **spec)
    job["metadata"] = {"name": name, "namespace": team}
    return job


def condition(env: Env, name: str, team: str, kind: str) -> dict[str, str]:
    conditions = (env.job(name, team).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), {})


def placed(env: Env, name: str, team: str) -> bool:
    return condition(env, name, team, "Placed").get("status") == "True" and bool(
        env.bound(name, team)
    )


def queues(env: Env) -> dict[str, list[str]]:
    """`kubectl get queues` as its printer columns show it."""
    lines = env.kubectl("get", "queues", "--no-headers").stdout.strip().splitlines()
    return {line.split()[0]: line.split()[1:7] for line in lines}


def test_a_borrower_is_reclaimed_for_the_owner_and_the_queues_say_so(teams_env: Env):
    env = teams_env
    env.kubectl("apply", "-f", "-", stdin=QUEUES)
    for i in range(4):  # 32 GPUs: team b's 16, and 16 of team a's, idle
        env.post(in_team(f"b{i}", "team-b", 1, checkpointIntervalSeconds=3600), "team-b")
        env.wait(f"b{i} placed", lambda i=i: placed(env, f"b{i}", "team-b"))
    env.wait("b's numbers", lambda: queues(env).get("team-b", [])[1:4] == ["16", "32", "16"])
    before = queues(env)
    assert before["team-a"][:5] == ["research", "16", "0", "0", "0"], before
    borrowed = [i for i in range(4) if condition(env, f"b{i}", "team-b", "Borrowed")]
    assert len(borrowed) == 2, borrowed  # the two started last are beyond b's quota
    env.post(in_team("a0", "team-a", 2), "team-a")
    env.wait("a0 placed", lambda: placed(env, "a0", "team-a"), timeout=60)
    reclaimed = [
        i
        for i in range(4)
        if condition(env, f"b{i}", "team-b", "Reclaimed").get("reason") == "Reclaimed"
    ]
    assert sorted(reclaimed) == sorted(borrowed)
    env.wait("a's numbers", lambda: queues(env).get("team-a", [])[1:3] == ["16", "16"])
    after = queues(env)
    assert after["team-b"][1:4] == ["16", "16", "0"], after  # nominal, in use, borrowed
    waiting = {condition(env, f"b{i}", "team-b", "Placed").get("reason") for i in reclaimed}
    assert waiting == {"WaitingToBorrow"}, waiting


def test_a_suspended_job_is_not_placed_until_resumed(teams_env: Env):
    env = teams_env
    env.kubectl("delete", "tj", "a0", "-n", "team-a")  # team a back within its quota
    env.wait("a0's pods gone", lambda: not env.pods("a0", "team-a"))
    env.post(in_team("held", "team-a", 1, suspend=True), "team-a")
    env.wait(
        "Suspended",
        lambda: (env.job("held", "team-a").get("status") or {}).get("phase") == "Suspended",
    )
    assert not env.bound("held", "team-a")
    env.kubectl(
        "patch", "tj", "held", "-n", "team-a", "--type=merge", "-p", '{"spec":{"suspend":false}}'
    )
    env.wait("held placed", lambda: placed(env, "held", "team-a"), timeout=60)
