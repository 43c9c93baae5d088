"""Quota released when pods are gone, not when their deletion was asked for, over the in-memory
API: a suspended job whose deletes the API server refuses keeps its queue's quota (the Queue
counts it as leaving) and its deletes are tried again with backoff; a job waiting on that quota
starts once the pods are gone."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from scheduler.controller.config import OperatorConfig
from scheduler.controller.runtime.calls import Calls
from scheduler.controller.runtime.expect import Expectations
from scheduler.controller.runtime.gateway import ApiError
from scheduler.controller.runtime.objects import Pod
from scheduler.controller.runtime.observability import Metrics
from tests.unit.controller.test_queues import queue, run, status
from tests.unit.controller.test_reconciler import (
    Clock,
    Driven,
    MemoryApi,
    api,
    clock,
    reconciler,
    scheduled,
)

__all__ = ["api", "clock", "reconciler"]  # fixtures


class Refusing(MemoryApi):
    """Deletes refused while `refuse` is set (an API server that is down or forbids them)."""

    def __init__(self, config: OperatorConfig) -> None:
        super().__init__(config)
        self.refuse = False
        self.deletes = 0

    def delete_pod(self, namespace: str, pod: str) -> None:
        self.deletes += 1
        if self.refuse:
            raise ApiError(503, "the API server is unavailable")
        super().delete_pod(namespace, pod)


def test_a_suspended_jobs_quota_is_held_until_its_pods_are_gone():
    api, clock = Refusing(OperatorConfig()), Clock()
    reconciler = Driven(api, clock)
    queue(api, "ops", 16, namespaces=["default"])
    api.submit("first", 2)
    run(reconciler)
    api.submit("waiting", 2, at="2026-12-01T00:00:09Z")
    run(reconciler)
    assert api.reason("waiting") == "QuotaExceeded"
    api.refuse = True
    api.edit("first", suspend=True)
    for _ in range(4):
        clock.now += 1.0
        run(reconciler, 1)
    assert all(p["spec"].get("nodeName") for p in api.of("first").values())
    assert api.reason("waiting") == "QuotaExceeded"  # not admitted on the pods still bound
    assert status(api, "ops")["usedGPUs"] == 16
    assert status(api, "ops")["leavingGangs"] == 1
    gangs = reconciler.inner.metrics.registry.get_sample_value
    assert gangs("rackwise_queue_gangs", {"queue": "ops", "state": "leaving"}) == 1
    tried = api.deletes
    assert 2 <= tried < 2 * 4  # tried again, but backing off (1 s, 2 s, ...), not every cycle
    api.refuse = False
    clock.now += 60.0
    run(reconciler)
    assert not api.of("first")
    assert api.reason("waiting") == "Placed"
    assert status(api, "ops")["leavingGangs"] == 0


class PodApi:
    def __init__(self) -> None:
        self.refuse = True
        self.calls: list[str] = []

    def bind(self, namespace: str, pod: str, node: str, queue: str = "") -> None:
        raise AssertionError("not bound here")

    def delete_pod(self, namespace: str, pod: str) -> None:
        self.calls.append(pod)
        if self.refuse:
            raise ApiError(503, "the API server is unavailable")


def owned_pod(name: str) -> Pod:
    owner = {
        "apiVersion": "rackwise.io/v1alpha1",
        "kind": "TrainingJob",
        "uid": "job-1",
        "name": "j",
        "controller": True,
    }
    meta = {"name": name, "namespace": "default", "uid": f"uid-{name}", "ownerReferences": [owner]}
    return Pod.of({"metadata": meta, "spec": {"nodeName": "h0-0"}, "status": {}})


def test_a_refused_delete_is_never_recorded_as_done_and_is_tried_again_after_backoff():
    clock = Clock()
    api = PodApi()
    expect = Expectations(clock)
    calls = Calls(api, Metrics(), ThreadPoolExecutor(1), expect)
    pods = [owned_pod("j-0")]
    calls.delete(pods)
    assert not expect.waiting("job-1")  # judged again next cycle, not trusted to be gone
    calls.retry(pods)
    assert api.calls == ["j-0"]  # within its 1 s backoff: not again
    clock.now += 1.0
    calls.retry(pods)
    assert api.calls == ["j-0", "j-0"]
    clock.now += 1.0
    calls.retry(pods)  # 2 s now
    assert len(api.calls) == 2
    api.refuse = False
    clock.now += 1.0
    calls.retry(pods)
    assert expect.waiting("job-1")  # this one succeeded: expected gone
    calls.retry([])  # gone from the cache: forgotten
    assert calls.refused == {}


def test_suspending_a_finished_job_is_observed_and_changes_nothing_else(api, reconciler):
    api.submit("done", 1)
    api.job_objs["done"]["status"] = {"phase": "Succeeded", "observedGeneration": 1}
    api.edit("done", suspend=True)
    run(reconciler, 1)
    found = api.job_objs["done"]["status"]
    assert (found["phase"], found["observedGeneration"]) == ("Succeeded", 2)


def test_a_pod_groups_condition_says_its_own_numbers_as_they_change(api, clock, reconciler):
    """g waits by quota with 8 of 16 GPUs in use; a job of its queue starts beside it: a minute
    later its condition says 16 of 16, with no new event."""
    queue(api, "team", 16, namespaces=["default"])
    api.submit("first", 1)
    run(reconciler)
    for rank in range(2):
        api.add_member("g", rank, at="2026-12-01T00:00:05Z")
    api.podgroup_objs.append(
        {"metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}}
    )
    run(reconciler)
    assert "8 of 16 GPUs in use" in scheduled(api, "g")["message"]
    api.submit("second", 1, at="2026-12-01T00:00:09Z")
    run(reconciler)
    assert api.reason("second") == "Placed"
    clock.now += 61.0
    run(reconciler)
    found = scheduled(api, "g")
    assert found["reason"] == "QuotaExceeded"
    assert "16 of 16 GPUs in use" in found["message"]


def test_a_failed_pod_whose_delete_is_refused_counts_one_restart():
    api, clock = Refusing(OperatorConfig()), Clock()
    reconciler = Driven(api, clock)
    api.submit("job", 1, backoffLimit=5)
    run(reconciler)
    (pod,) = api.of("job").values()
    pod["status"]["phase"] = "Failed"
    api.refuse = True
    for _ in range(5):
        clock.now += 1.0
        run(reconciler, 1)
    assert api.job_objs["job"]["status"]["restarts"] == 1
