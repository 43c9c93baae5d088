"""Team Queues in the operator, over the in-memory API: a job over its queue's quota waits with
QuotaExceeded and the Queue's numbers; a bad Queue says why and harms no other."""

from __future__ import annotations

from typing import Any

from scheduler.controller.config import OperatorConfig
from scheduler.controller.runtime.gateway import ApiError
from scheduler.devtools.fake import node_manifest
from scheduler.pools import Lending, PoolSpec
from tests.unit.controller.test_reconciler import (
    RACK,
    SPEC,
    Clock,
    Counting,
    Driven,
    MemoryApi,
    api,
    clock,
    reconciler,
    scheduled,
)

__all__ = ["api", "clock", "reconciler"]  # fixtures

Obj = dict[str, Any]
ONLINE = "online-inference"


def queue(api: MemoryApi, name: str, gpus: int, **spec: Any) -> None:
    quotas = spec.pop("quotas", [{"pool": "training", "nominal": {"gpus": gpus}}])
    api.queue_objs[name] = {
        "apiVersion": "rackwise.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": name, "uid": f"q-{name}"},
        "spec": {"quotas": quotas, **spec},
    }


def status(api: MemoryApi, name: str) -> Obj:
    return api.queue_objs[name].get("status") or {}


def run(reconciler: Driven, cycles: int = 3) -> None:
    for _ in range(cycles):
        reconciler.cycle()


def test_a_job_over_its_queues_quota_waits_and_the_queue_counts_it(api, reconciler):
    queue(api, "team-a", 16, namespaces=["default"])
    api.submit("first", 2)
    api.submit("second", 1, at="2026-12-01T00:00:05Z")
    run(reconciler)
    assert api.reason("first") == "Placed"
    assert api.reason("second") == "QuotaExceeded"
    found = status(api, "team-a")
    numbers = {k: found[k] for k in ("nominalGPUs", "usedGPUs", "borrowedGPUs")}
    assert numbers == {"nominalGPUs": 16, "usedGPUs": 16, "borrowedGPUs": 0}
    assert (found["pendingGangs"], found["admittedGangs"]) == (1, 1)
    ready = found["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "Valid")


def test_a_jobs_queue_label_names_its_queue_only_if_that_queue_admits_its_namespace(
    api, reconciler
):
    """A label is no way out of a quota: naming another team's queue leaves the job waiting
    with the refusal said, and charges that queue nothing."""
    queue(api, "small", 8, namespaces=["default"])
    queue(api, "big", 64, namespaces=["team-b"])
    api.submit("escapes", 2)
    labelled(api, "escapes", "big")
    api.submit("own", 1, at="2026-12-01T00:00:05Z")
    labelled(api, "own", "small")
    run(reconciler)
    assert api.reason("escapes") == "QuotaExceeded"
    assert "queue big does not admit namespace 'default'" in message(api, "escapes")
    assert api.reason("own") == "Placed"
    assert status(api, "big")["usedGPUs"] == 0
    assert status(api, "small")["usedGPUs"] == 8


def message(api: MemoryApi, job: str) -> str:
    conditions = (api.job_objs[job].get("status") or {}).get("conditions") or []
    return str(next(c["message"] for c in conditions if c["type"] == "Placed"))


def in_namespace(api: MemoryApi, job: str, namespace: str) -> None:
    api.job_objs[job]["metadata"]["namespace"] = namespace


def test_a_bad_queue_says_why_and_the_others_keep_their_quotas(api, reconciler):
    queue(api, "good", 16, namespaces=["default"])
    queue(api, "bad", 0, quotas=[{"pool": "no-such-pool", "nominal": {"gpus": 8}}])
    queue(api, "worse", 0, quotas=[{"pool": "training", "nominal": {"gpus": "many"}}])
    api.submit("job", 2)
    run(reconciler)
    assert api.reason("job") == "Placed"
    for name, words in (("bad", "unknown pool 'no-such-pool'"), ("worse", "whole number")):
        ready = status(api, name)["conditions"][0]
        assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
        assert words in ready["message"]


def test_no_queue_means_no_quota(api, reconciler):
    api.submit("free", 4)
    run(reconciler)
    assert api.reason("free") == "Placed"


def test_once_queues_exist_a_job_of_no_queue_waits_unless_a_default_is_set(api, reconciler):
    queue(api, "other", 64, namespaces=["elsewhere"])
    api.submit("orphan", 1)
    run(reconciler)
    assert api.reason("orphan") == "QuotaExceeded"


def test_a_running_pod_group_spends_its_queues_quota(api, reconciler):
    queue(api, "team", 16, namespaces=["default"])
    for rank in range(2):
        api.add_member("g", rank, at="2026-12-01T00:00:01Z")
    api.podgroup_objs.append(
        {"metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}}
    )
    run(reconciler)
    assert all(p["spec"].get("nodeName") for p in api.members("g"))
    api.submit("late", 1, at="2026-12-01T00:00:09Z")
    run(reconciler)
    assert api.reason("late") == "QuotaExceeded"
    found = status(api, "team")
    assert (found["usedGPUs"], found["admittedGangs"], found["pendingGangs"]) == (16, 1, 1)


def test_the_queue_marked_default_takes_jobs_of_no_queue_and_only_one_may_be(api, reconciler):
    queue(api, "catch-all", 16, default=True)
    queue(api, "second", 16, default=True)
    api.submit("orphan", 1)
    run(reconciler)
    assert api.reason("orphan") == "Placed"
    assert status(api, "catch-all")["usedGPUs"] == 8
    ready = status(api, "second")["conditions"][0]
    assert (ready["status"], ready["message"]) == (
        "False",
        "queue catch-all is the default already",
    )


def test_queues_that_cannot_be_listed_leave_the_last_ones_in_force(api, reconciler):
    queue(api, "team-a", 8, namespaces=["default"])
    run(reconciler, 1)

    def refused() -> list[object]:
        raise ApiError(403, "queues are forbidden")

    api.queues = refused  # type: ignore[method-assign]
    api.submit("big", 2)
    run(reconciler)
    assert api.reason("big") == "NeverFits"  # 16 GPUs: more than team-a could ever hold
    assert "queue team-a can never hold more than 8 GPUs" in message(api, "big")


def sample(reconciler: Driven, name: str, **labels: str) -> float | None:
    return reconciler.inner.metrics.registry.get_sample_value(name, labels)


def queue_events(api: Counting, reason: str) -> list[Obj]:
    return [
        e for e in api.events if e["involvedObject"]["kind"] == "Queue" and e["reason"] == reason
    ]


class Patching(Counting):
    def __init__(self, config: OperatorConfig) -> None:
        super().__init__(config)
        self.event_patches: list[Obj] = []

    def patch_event(self, namespace: str, name: str, patch: Obj) -> None:
        self.event_patches.append(patch)


def test_an_invalid_queue_gets_one_warning_event_not_one_per_cycle():
    api = Patching(OperatorConfig())
    reconciler = Driven(api, Clock())
    queue(api, "bad", 0, quotas=[{"pool": "no-such-pool", "nominal": {"gpus": 8}}])
    run(reconciler, 4)
    found = queue_events(api, "InvalidSpec")
    assert len(found) == 1
    assert found[0]["type"] == "Warning"
    assert found[0]["involvedObject"]["name"] == "bad"
    assert "unknown pool 'no-such-pool'" in found[0]["message"]
    assert api.event_patches == []  # nor the same one counted again every cycle


def test_a_queues_longest_wait_is_a_metric_and_none_waiting_is_zero(api, reconciler):
    queue(api, "team-a", 8, namespaces=["default"])
    queue(api, "idle", 8)
    api.submit("first", 1)
    api.submit("second", 1, at="2026-12-01T00:00:05Z")
    run(reconciler)
    assert api.reason("second") == "QuotaExceeded"
    waited = sample(reconciler, "rackwise_queue_wait_seconds", queue="team-a")
    assert waited is not None
    assert waited > 0  # since 2026-12-01, on the wall clock
    assert sample(reconciler, "rackwise_queue_wait_seconds", queue="idle") == 0


def labelled(api: MemoryApi, job: str, queue_name: str) -> None:
    api.job_objs[job]["metadata"]["labels"] = {"rackwise.io/queue": queue_name}


def test_a_reclaim_of_a_queues_quota_is_an_event_on_it_counted_and_named_on_the_victim():
    """team-a borrows team-b's idle half of the cluster; team-b's job takes it back (no
    checkpoint and no time given: at once)."""
    api = Counting(OperatorConfig())
    reconciler = Driven(api, Clock())
    for name in ("team-a", "team-b"):
        queue(api, name, 16, cohort="lab", reclaimWithinSeconds=0, namespaces=[name])
    api.submit("borrower", 4)
    in_namespace(api, "borrower", "team-a")
    run(reconciler)
    assert api.reason("borrower") == "Placed"
    api.submit("owner", 2, at="2026-12-01T00:00:05Z")
    in_namespace(api, "owner", "team-b")
    run(reconciler)
    assert api.reason("borrower") == "Reclaimed"
    conditions = api.job_objs["borrower"]["status"]["conditions"]
    message = next(c["message"] for c in conditions if c["type"] == "Reclaimed")
    assert message.startswith("queue team-b took back the quota it borrowed, for team-b/owner")
    found = queue_events(api, "Reclaimed")
    assert [e["involvedObject"]["name"] for e in found] == ["team-b"]
    assert found[0]["message"].startswith("team-a/borrower: queue team-b took back")
    assert (
        sample(reconciler, "rackwise_queue_reclaims_total", queue="team-b", result="checkpoint")
        == 1
    )
    assert api.reason("owner") == "Placed"


def test_a_pod_group_over_its_queues_quota_does_not_borrow_and_a_job_does(api, reconciler):
    """rackwise never evicts a pod group's pods, so a group may not borrow what its cohort
    could not take back; a TrainingJob of its size borrows the same idle GPUs."""
    queue(api, "team-a", 8, cohort="lab", namespaces=["default"])
    queue(api, "team-b", 24, cohort="lab")
    for rank in range(2):
        api.add_member("g", rank, at="2026-12-01T00:00:01Z")
    api.podgroup_objs.append(
        {"metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}}
    )
    run(reconciler)
    waiting = scheduled(api, "g")
    assert (waiting["status"], waiting["reason"]) == ("False", "QuotaExceeded")
    assert "never evicted (a pod group) does not borrow" in waiting["message"]
    assert not any(p["spec"].get("nodeName") for p in api.members("g"))
    api.submit("job", 2, at="2026-12-01T00:00:09Z")
    run(reconciler)
    assert api.reason("job") == "Placed"
    assert status(api, "team-a")["borrowedGPUs"] == 8


LENDS = OperatorConfig(
    pool_list=(
        PoolSpec(name="training", objective="pack", borrow=True),
        PoolSpec(name=ONLINE, objective="spread", lend=Lending(idle_after_s=0, reserve_hosts=0)),
    )
)


def test_a_job_on_lent_nodes_borrows_the_lender_pools_quota_through_its_cohort(clock):
    """Rack r1's nodes are online inference's, lent to training; team-a owns training's 16 GPUs
    and none of online inference's, which serving owns. A 24-GPU job runs partly on lent nodes,
    and team-a's Queue counts what it uses there under online inference, as borrowed from
    serving; with serving lending nothing, the job waits for it."""
    for lends, placed in ((16, True), (0, False)):
        api = MemoryApi(LENDS)
        for h in SPEC.hosts:
            if RACK[h.name] == "r1":
                api.node_objs[h.name] = node_manifest(h.model_copy(update={"pool": ONLINE}), LENDS)
        quota = [{"pool": ONLINE, "nominal": {"gpus": 16}, "lendingLimit": {"gpus": lends}}]
        queue(api, "team-a", 16, namespaces=["default"], cohort="c")
        queue(api, "serving", 0, quotas=quota, cohort="c")
        api.submit("big", 3)
        run(Driven(api, clock, LENDS))
        if not placed:
            assert api.reason("big") == "WaitingToBorrow"
            continue
        assert api.reason("big") == "Placed"
        found = status(api, "team-a")
        used = {p["pool"]: p["used"]["gpus"] for p in found["pools"]}
        assert used == {"training": 8, ONLINE: 16}  # a whole lent rack and one of its own
        assert (found["usedGPUs"], found["borrowedGPUs"]) == (24, 16)
