"""Queues held against their tenants and against an admin's slip, over the in-memory API: a
namespace stays with the Queue created first, an invalid or deleted Queue keeps the gangs it
admitted charged (held, across a restart too) and evicts no one, amounts are bounded, and a
tenant's template may not claim a system priority class."""

from __future__ import annotations

from typing import Any

from scheduler.controller.config import OperatorConfig
from scheduler.controller.cycle.teams import FINALIZER
from scheduler.controller.runtime.admitted import ADMITTED
from tests.unit.controller.test_queues import (
    in_namespace,
    message,
    queue,
    queue_events,
    run,
    status,
)
from tests.unit.controller.test_reconciler import (
    Clock,
    Counting,
    Driven,
    MemoryApi,
    api,
    clock,
    reconciler,
)

__all__ = ["api", "clock", "reconciler"]  # fixtures

Obj = dict[str, Any]


def created(api: MemoryApi, name: str, at: str) -> None:
    api.queue_objs[name]["metadata"]["creationTimestamp"] = at


def ready(api: MemoryApi, name: str) -> Obj:
    return dict(status(api, name)["conditions"][0])


def test_a_namespace_stays_with_the_queue_that_listed_it_first(api, reconciler):
    """`aaa-dup` sorts first by name but came later: it is the one refused."""
    queue(api, "research", 16, namespaces=["default"])
    created(api, "research", "2026-12-01T00:00:00Z")
    queue(api, "aaa-dup", 0, namespaces=["default"])
    created(api, "aaa-dup", "2026-12-02T00:00:00Z")
    api.submit("job", 2)
    run(reconciler)
    assert api.reason("job") == "Placed"
    assert status(api, "research")["usedGPUs"] == 16
    found = ready(api, "aaa-dup")
    assert (found["status"], found["reason"]) == ("False", "InvalidSpec")
    assert "namespace 'default' belongs to queue research already" in found["message"]


def test_an_invalid_edit_evicts_no_one_and_the_queue_holds_what_it_admitted(api, reconciler):
    queue(api, "research", 16, namespaces=["default"], cohort="lab")
    queue(api, "ops", 16, namespaces=["ops"], cohort="lab", reclaimWithinSeconds=0)
    api.submit("running", 2)
    run(reconciler)
    assert api.reason("running") == "Placed"
    bound = [p for p in api.of("running").values() if p["spec"].get("nodeName")]
    assert all(p["metadata"]["annotations"][ADMITTED] == "research" for p in bound)
    api.queue_objs["research"]["spec"]["quotas"] = [
        {"pool": "training", "nominal": {"gpus": 16, "tpus": 1}}
    ]
    api.submit("after", 1, at="2026-12-01T00:00:09Z")
    run(reconciler)
    assert api.reason("running") == "Placed"  # not re-charged, not reclaimed
    assert api.reason("after") == "QuotaExceeded"
    assert "queue research holds" in message(api, "after")
    found = ready(api, "research")
    assert (found["status"], found["reason"]) == ("False", "InvalidSpec")
    assert "unknown resource 'tpus'" in found["message"]
    assert "stays in force, held" in found["message"]
    assert status(api, "research")["usedGPUs"] == 16
    again = Driven(api, Clock())  # a new operator: the spec in force is read from the status
    run(again)
    assert api.reason("running") == "Placed"
    assert "stays in force, held" in ready(api, "research")["message"]


def test_a_deleted_queue_stays_held_by_its_finalizer_until_its_gangs_end(api, reconciler):
    queue(api, "research", 16, namespaces=["default"])
    api.submit("running", 2)
    run(reconciler)
    meta = api.queue_objs["research"]["metadata"]
    assert meta["finalizers"] == [FINALIZER]
    meta["deletionTimestamp"] = "2026-12-02T00:00:00Z"  # kubectl delete: the API server waits
    api.submit("after", 1, at="2026-12-01T00:00:09Z")
    run(reconciler)
    assert api.reason("running") == "Placed"
    assert "queue research holds" in message(api, "after")
    assert ready(api, "research")["reason"] == "Terminating"
    del api.job_objs["running"]
    for pod in list(api.of("running")):
        api.pod_objs.pop(("default", pod))
    run(reconciler)
    assert "research" not in api.queue_objs


def test_an_invalid_queue_that_was_never_valid_shows_no_numbers(api, reconciler):
    queue(api, "huge", 0, quotas=[{"pool": "training", "nominal": {"gpus": 10**20}}])
    queue(api, "cpu", 0, quotas=[{"pool": "training", "nominal": {"gpus": 1, "cpu": "1e20"}}])
    run(reconciler)
    assert "more than 10,000,000 GPUs" in ready(api, "huge")["message"]
    assert "'1e20' is out of range (0 .. 2^50)" in ready(api, "cpu")["message"]
    assert set(status(api, "huge")) == {"conditions"}


def test_a_tenants_template_may_not_claim_a_system_priority_class(api, reconciler):
    api.submit(
        "vip",
        1,
        template={
            "spec": {
                "priorityClassName": "system-cluster-critical",
                "containers": [{"name": "main", "image": "busybox"}],
            }
        },
    )
    run(reconciler)
    assert api.reason("vip") == "InvalidSpec"
    assert "system-cluster-critical is a system priority class" in message(api, "vip")


def test_one_reclaim_event_names_every_victim():
    """team-a's four 1-pod jobs: the last two borrow team-b's idle half; team-b's 2-pod job takes
    both back in one cycle, and the Queue's one event names both."""
    api = Counting(OperatorConfig())
    reconciler = Driven(api, Clock())
    for name in ("team-a", "team-b"):
        queue(api, name, 16, cohort="lab", reclaimWithinSeconds=0, namespaces=[name])
    for i in range(4):
        api.submit(f"b{i}", 1, at=f"2026-12-01T00:00:0{i}Z")
        in_namespace(api, f"b{i}", "team-a")
        run(reconciler, 1)
    api.submit("owner", 2, at="2026-12-01T00:00:09Z")
    in_namespace(api, "owner", "team-b")
    run(reconciler)
    assert [api.reason(f"b{i}") for i in range(4)] == ["Placed", "Placed", "Reclaimed", "Reclaimed"]
    found = queue_events(api, "Reclaimed")
    assert len(found) == 1
    assert found[0]["message"].startswith("2 gangs: ")
    assert "team-a/b2: " in found[0]["message"]
    assert "team-a/b3: " in found[0]["message"]
