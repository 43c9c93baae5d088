"""The launcher's budget and all-or-nothing rule, and leader election's safety, driven without an
API server (the same code runs against the real one in tests/integration)."""

from __future__ import annotations

import copy
import random
from concurrent.futures import Future
from typing import Any

from scheduler.controller.config import LeaderElection, OperatorConfig
from scheduler.controller.runtime.gateway import ApiError
from scheduler.controller.runtime.leader import Elector
from scheduler.controller.runtime.objects import TrainingJob
from scheduler.controller.trainingjob.launch import Launch, Launcher
from scheduler.controller.trainingjob.translate import translate


def view(name: str, pods: int):
    job = {
        "metadata": {"name": name, "namespace": "ns", "uid": name},
        "spec": {
            "replicas": pods,
            "gpusPerReplica": 1,
            "template": {"spec": {"containers": [{"name": "m", "image": "x"}]}},
        },
    }
    return translate(TrainingJob.of(job), OperatorConfig())


def launch(name: str, pods: int) -> Launch:
    return Launch(view(name, pods), tuple(range(pods)))


class Calls:
    def __init__(self, fail: str | None = None, hold: bool = False) -> None:
        self.log: list[str] = []
        self.fail = fail
        self.hold = hold  # calls stay in flight (a slow API server)

    def create(self, namespace: str, body: dict) -> None:
        if body["metadata"]["name"] == self.fail:
            raise ApiError(422, "no")
        self.log.append(body["metadata"]["name"])

    def submit(self, fn):
        """Run at once, or hold the call in flight."""
        future: Future = Future()
        if not self.hold:
            future.set_result(fn())
        return future


class Stepper:
    """A launcher stepped as the reconciler steps it: what finished is collected first."""

    def __init__(self, calls: Calls, budget: int) -> None:
        self.launcher = Launcher(
            create=calls.create,
            build=lambda launch, rank: {"metadata": {"name": launch.pod_name(rank)}},
            submit=calls.submit,
            budget=budget,
        )

    def step(self, launches: list[Launch]) -> None:
        for launch in launches:
            launch.collect()
        self.launcher.step(launches)


def launcher(calls: Calls, budget: int) -> Stepper:
    return Stepper(calls, budget)


def test_a_huge_gang_cannot_hold_back_a_small_one():
    calls = Calls()
    big, small = launch("big", 50), launch("small", 3)
    step = launcher(calls, budget=10).step
    step([big, small])
    small.collect()
    assert small.finished  # its 3 creations went first within the budget
    assert len(calls.log) == 10
    for _ in range(20):
        step([big])
    big.collect()
    assert big.finished
    assert sorted(calls.log) == sorted({*calls.log})  # no pod is made twice


def test_calls_in_flight_count_against_the_budget():
    calls = Calls(hold=True)
    gang = launch("g", 30)
    step = launcher(calls, budget=10).step
    for _ in range(3):
        step([gang])
    assert len(gang.inflight) == 10  # nothing more is sent while 10 are in flight
    assert not gang.finished


def test_only_the_missing_ranks_are_made():
    calls = Calls()
    repair = Launch(view("g", 5), (1, 3))
    launcher(calls, budget=10).step([repair])
    repair.collect()
    assert repair.finished
    assert calls.log == ["g-1", "g-3"]


def test_a_failure_is_recorded_with_the_pod_and_the_servers_message():
    calls = Calls(fail="g-1")
    gang = launch("g", 3)
    step = launcher(calls, budget=10).step
    step([gang])
    gang.collect()
    assert gang.error is not None
    pod, error = gang.error
    assert pod == "g-1"
    assert error.rejected
    assert gang.created == {0, 2}  # what was made, for the reconciler to delete
    step([gang])
    assert gang.inflight == {}  # nothing more is sent once a creation failed


class Store:
    """An in-memory Lease with resourceVersion conflicts, as the API server keeps it."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.lease)

    def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.lease is not None:
            raise ApiError(409, "exists")
        return self._store(body)

    def replace_lease(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        assert self.lease is not None
        if body["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, "conflict")
        return self._store(body)

    def _store(self, body: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.lease)


def test_two_electors_never_lead_at_once_and_a_dead_leader_is_replaced():
    now = [0.0]
    config = LeaderElection(lease_s=3, renew_deadline_s=2, retry_s=0.5)
    store = Store()
    a = Elector(store, config, "a", clock=lambda: now[0])
    b = Elector(store, config, "b", clock=lambda: now[0])
    rng = random.Random(7)
    alive = {"a": True, "b": True}
    leaders_seen = set()
    for _ in range(4000):
        now[0] += rng.uniform(0.05, 0.6)
        if rng.random() < 0.01:  # a replica dies or comes back
            who = rng.choice("ab")
            alive[who] = not alive[who]
        for elector in rng.sample([a, b], 2):
            if alive[elector.identity]:
                elector.step()
        assert not (a.leading() and b.leading())
        leaders_seen |= {e.identity for e in (a, b) if e.leading()}
    assert leaders_seen == {"a", "b"}
