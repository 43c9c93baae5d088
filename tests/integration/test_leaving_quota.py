"""Quota held until pods are gone, on the real API server: the pods of a suspended job, of a
reclaim victim and of a preemption victim keep their queue's quota while the API server refuses
their deletion, and a waiting job of the same queue is not admitted on it meanwhile. The refusal
is real: the namespace's RoleBinding is taken away (403 on every delete, for less than the
operator's 30 s access cache), then given back. Every second, the queue's bound pods are
sampled against its nominal quota plus borrowing limit. Each variant failed on the code before
(a refused delete was recorded as done and the quota released at once). Its own cluster and
operator; 64 GPUs: two racks of four 8-GPU hosts, all training."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from scheduler.controller.config import OperatorConfig
from scheduler.devtools.devcluster import serve_namespace
from scheduler.model import SchedulingPolicy
from scheduler.topology import generate
from tests.integration.conftest import Env, own_cluster
from tests.integration.test_teams import condition, in_team, placed
from tests.integration.test_tenancy import clean, queue, status

pytestmark = pytest.mark.apiserver

REFUSING, OTHER, SPARE = "ops-a", "ops-b", "spare"
SPEC = generate(blocks=1, racks=2, hosts=4, gpus=8)
CAP = 48  # ops: 32 nominal + 16 borrowing limit


@pytest.fixture(scope="module")
def leaving_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    config = OperatorConfig(resync_s=1.0, scheduling=SchedulingPolicy(preemption_scope="cluster"))
    with own_cluster(
        tmp_path_factory.mktemp("leaving"), (REFUSING, OTHER, SPARE), SPEC, config
    ) as env:
        yield env


@pytest.fixture
def env(leaving_env: Env) -> Iterator[Env]:
    ops = queue("ops", 32, [REFUSING, OTHER], cohort="lab", reclaimWithinSeconds=0)
    ops["spec"]["quotas"][0]["borrowingLimit"] = {"gpus": 16}  # type: ignore[index]
    leaving_env.apply(ops)
    leaving_env.apply(queue(SPARE, 32, [SPARE], cohort="lab", reclaimWithinSeconds=0))
    yield leaving_env
    clean(leaving_env)


def fill(env: Env, **spec: object) -> None:
    """Three 2x8 jobs of ops in the refusing namespace (48 GPUs: ops' cap), and d, of ops too,
    waiting in the other."""
    for i in range(3):
        env.post(in_team(f"j{i}", REFUSING, 2, **spec), REFUSING)
        env.wait(f"j{i} placed", lambda i=i: placed(env, f"j{i}", REFUSING))
    env.post(in_team("d", OTHER, 2), OTHER)
    env.wait("d waits", lambda: condition(env, "d", OTHER, "Placed").get("status") == "False")


class Refusal:
    """The refusing namespace's RoleBinding taken away for the block, then given back; the
    queue's bound GPUs sampled every second meanwhile."""

    def __init__(self, env: Env) -> None:
        self.env, self.stop = env, threading.Event()
        self.samples: list[int] = []

    def __enter__(self) -> Refusal:
        self.env.kubectl("delete", "rolebinding", "rackwise-workloads-user", "-n", REFUSING)
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        serve_namespace(self.env.cluster, REFUSING)
        time.sleep(3.0)  # sampled on past the refusal, while the pods go
        self.stop.set()
        self.thread.join(timeout=30)

    def _sample(self) -> None:
        while not self.stop.is_set():
            self.samples.append(ops_bound(self.env))
            self.stop.wait(1.0)


def ops_bound(env: Env) -> int:
    return sum(
        int(p["spec"]["containers"][0]["resources"]["limits"].get("nvidia.com/gpu", 0))
        for p in env.admin.pods()
        if p["spec"].get("nodeName") and p["metadata"]["namespace"] in (REFUSING, OTHER)
    )


def test_a_suspended_jobs_pods_keep_its_quota_until_they_are_gone(env: Env):
    fill(env)
    with Refusal(env) as refusal:
        patch = '{"spec":{"suspend":true}}'
        env.kubectl("patch", "tj", "j0", "-n", REFUSING, "--type=merge", "-p", patch)
        time.sleep(8.0)  # eight cycles with its deletes refused
        assert max(refusal.samples) <= CAP, refusal.samples
        assert not env.bound("d", OTHER)
        assert status(env, "ops").get("leavingGangs") == 1
        assert status(env, "ops").get("usedGPUs") == CAP
    assert max(refusal.samples) <= CAP, refusal.samples
    env.wait("d placed once j0's pods are gone", lambda: placed(env, "d", OTHER), timeout=90)
    assert ops_bound(env) <= CAP


def test_a_reclaim_victims_pods_keep_its_quota_until_they_are_gone(env: Env):
    """spare wants its 32 back: one of ops' borrowing jobs is reclaimed, its delete refused."""
    fill(env)
    with Refusal(env) as refusal:
        env.post(in_team("owner", SPARE, 4), SPARE)
        env.wait(
            "a victim",
            lambda: any(condition(env, f"j{i}", REFUSING, "Placed") for i in range(3)),
        )
        time.sleep(6.0)
        assert not env.bound("d", OTHER)
    assert max(refusal.samples) <= CAP, refusal.samples
    env.wait("owner placed", lambda: placed(env, "owner", SPARE), timeout=90)
    assert ops_bound(env) <= CAP


def test_a_preemption_victims_pods_keep_its_quota_until_they_are_gone(env: Env):
    """ops owns all 64 GPUs (no cohort); spare's job of priority 200 and ops' three fill the
    fabric; ops' urgent job (priority 100) preempts one of ops' own, whose delete is refused:
    ops' bound pods stay within its 64 and urgent starts once the victim is gone."""
    env.apply(queue("ops", 64, [REFUSING, OTHER]))
    env.apply(queue(SPARE, 16, [SPARE]))
    env.post(in_team("keeper", SPARE, 2, priority=200), SPARE)
    env.wait("keeper placed", lambda: placed(env, "keeper", SPARE))
    for i in range(3):
        env.post(in_team(f"j{i}", REFUSING, 2), REFUSING)
        env.wait(f"j{i} placed", lambda i=i: placed(env, f"j{i}", REFUSING))
    with Refusal(env) as refusal:
        env.post(in_team("urgent", OTHER, 2, priority=100), OTHER)
        time.sleep(8.0)
        assert not env.bound("urgent", OTHER)
    assert max(refusal.samples) <= 64, refusal.samples
    env.wait("urgent placed", lambda: placed(env, "urgent", OTHER), timeout=90)
    assert placed(env, "keeper", SPARE)
