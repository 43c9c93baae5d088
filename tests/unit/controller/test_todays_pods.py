"""Fields of today's pods the 1.20 API server of the integration tests does not know: scheduling
gates (GA in 1.30) and resource claims (DRA, GA in 1.34). The objects are written as the
Kubernetes API reference of 1.34-1.36 defines them (`spec.schedulingGates[].name`,
`spec.resourceClaims[].name` with `resourceClaimName` or `resourceClaimTemplateName`), and the
in-memory API server refuses to bind a gated pod, as a real one does."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.controller.config import OperatorConfig
from scheduler.controller.pods.podwhy import PendingPods
from scheduler.controller.runtime.gateway import ApiError
from scheduler.controller.runtime.objects import Pod
from tests.unit.controller.test_reconciler import Clock, Driven, MemoryApi, pod_scheduled, scheduled

Obj = dict[str, Any]
KUEUE_GATE = "kueue.x-k8s.io/admission"
CLAIM = {"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}


class GatedApi(MemoryApi):
    """Binding a pod with scheduling gates is refused (the API server's rule since 1.27)."""

    def bind(self, namespace: str, pod: str, node: str, queue: str = "") -> None:
        if self.pod_objs[(namespace, pod)]["spec"].get("schedulingGates"):
            raise ApiError(422, f"pod {pod} has scheduling gates")
        super().bind(namespace, pod, node, queue)

    def group(self, name: str, members: int, least: int, at: str = "2026-12-01T00:00:01Z") -> None:
        for rank in range(members):
            self.add_member(name, rank, at=at)
        self.podgroup_objs.append(
            {"metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": least}}
        )

    def member(self, group: str, rank: int) -> Obj:
        return self.pod_objs[("default", f"{group}-{rank}")]


def gate(pod: Obj, *names: str) -> None:
    pod["spec"]["schedulingGates"] = [{"name": n} for n in names]


@pytest.fixture
def api() -> GatedApi:
    return GatedApi(OperatorConfig())


@pytest.fixture
def reconciler(api: GatedApi) -> Driven:
    return Driven(api, Clock())


def bound(api: GatedApi, group: str) -> list[str | None]:
    """Where each member (named `<group>-<rank>`, of either PodGroup kind) is bound."""
    members = [p for (_, n), p in api.pod_objs.items() if n.rsplit("-", 1)[0] == group]
    return [p["spec"].get("nodeName") for p in sorted(members, key=_name)]


def _name(pod: Obj) -> str:
    return str(pod["metadata"]["name"])


def test_a_gated_member_is_not_counted_and_its_group_says_which_gate_holds_it(api, reconciler):
    api.group("g", 2, least=2)
    gate(api.member("g", 1), KUEUE_GATE)
    reconciler.cycle()
    assert bound(api, "g") == [None, None]
    said = scheduled(api, "g")
    assert (said["status"], said["reason"]) == ("False", "WaitingForGates")
    assert f"{KUEUE_GATE} on 1 pod" in said["message"]
    assert pod_scheduled(api.member("g", 0))[1] == "WaitingForGates"
    assert pod_scheduled(api.member("g", 1)) is None  # the API server's SchedulingGated stays
    api.member("g", 1)["spec"]["schedulingGates"] = []  # admitted: the gate removed
    reconciler.cycle()
    assert all(bound(api, "g"))
    assert scheduled(api, "g")["reason"] == "Scheduled"


def test_enough_ungated_members_are_placed_and_a_gated_one_joins_them_when_released(
    api, reconciler
):
    """minMember 2 of 3: the two free members are a gang; the gated one is never bound while
    gated (a bind would be refused), then goes near the others once its gate is gone."""
    api.group("g", 3, least=2)
    gate(api.member("g", 2), "example.com/quota")
    reconciler.cycle()
    first, second, third = bound(api, "g")
    assert first
    assert second
    assert third is None
    reconciler.cycle()
    assert bound(api, "g")[2] is None
    api.member("g", 2)["spec"]["schedulingGates"] = []
    reconciler.cycle()
    assert all(bound(api, "g"))


def test_a_group_all_of_whose_members_are_gated_says_so(api, reconciler):
    api.group("g", 2, least=2)
    for rank in range(2):
        gate(api.member("g", rank), KUEUE_GATE, "example.com/quota")
    reconciler.cycle()
    said = scheduled(api, "g")
    assert said["reason"] == "WaitingForGates"
    assert "example.com/quota on 2 pods" in said["message"]
    assert f"{KUEUE_GATE} on 2 pods" in said["message"]


def test_a_member_with_a_resource_claim_holds_its_group_and_the_others_go_on(api, reconciler):
    api.group("claims", 2, least=2)
    api.member("claims", 1)["spec"]["resourceClaims"] = [CLAIM]
    api.group("plain", 1, least=1, at="2026-12-01T00:00:02Z")
    reconciler.cycle()
    assert bound(api, "claims") == [None, None]
    said = scheduled(api, "claims")
    assert (said["reason"], said["status"]) == ("ResourceClaimsUnsupported", "False")
    assert "claims-1" in said["message"]
    assert "gpus (resourceClaimTemplateName: eight-gpus)" in said["message"]
    assert all(bound(api, "plain"))


def test_a_training_job_whose_template_claims_resources_makes_no_pod(api, reconciler):
    template = {"spec": {"containers": [{"name": "main", "image": "x"}], "resourceClaims": [CLAIM]}}
    api.submit("claims", 1, template=template)
    api.submit("plain", 1, at="2026-12-01T00:00:05Z")
    for _ in range(2):
        reconciler.cycle()
    assert api.of("claims") == {}
    assert api.reason("claims") == "ResourceClaimsUnsupported"
    message = api.job_objs["claims"]["status"]["conditions"][0]["message"]
    assert "template" in message
    assert "eight-gpus" in message
    assert all(api.nodes_of("plain").values())


def test_a_training_jobs_pod_gated_by_a_webhook_waits_until_the_gate_is_removed(api, reconciler):
    """An admission webhook may gate the pods rackwise makes: the job waits, binding none."""
    api.submit("job", 2)
    reconciler.cycle()  # its pods are made
    pods = api.of("job")
    gate(pods["job-1"], KUEUE_GATE)
    reconciler.cycle()
    assert not any(api.nodes_of("job").values())
    assert api.reason("job") == "WaitingForGates"
    pods["job-1"]["spec"]["schedulingGates"] = []
    reconciler.cycle()
    assert all(api.nodes_of("job").values())


def test_a_gated_pods_scheduling_gated_condition_is_never_overwritten():
    """Whatever its gang says, a gated pod keeps what the API server says of it."""

    api = GatedApi(OperatorConfig())
    api.add_member("g", 0, at="2026-12-01T00:00:01Z")
    api.add_member("g", 1, at="2026-12-01T00:00:01Z")
    gate(api.member("g", 1), KUEUE_GATE)
    inner = Driven(api, Clock()).inner
    why = PendingPods(api.patch_pod_status, inner.recorder, inner.calls, Clock())
    why.tell([Pod.of(p) for p in api.members("g")], "Unplaceable", "no room")
    assert pod_scheduled(api.member("g", 0))[1] == "Unschedulable"
    assert pod_scheduled(api.member("g", 1)) is None


class Events(GatedApi):
    def __init__(self, config: OperatorConfig) -> None:
        super().__init__(config)
        self.events: list[Obj] = []

    def create_event(self, namespace: str, body: Obj) -> str:
        self.events.append(body)
        return super().create_event(namespace, body)


def test_a_node_whose_gpus_only_dra_offers_is_reported_once_and_the_rest_schedule():
    """GPU feature discovery labels the node as having 8 GPUs, but with DRA no
    `nvidia.com/gpu` is allocatable: rackwise counts none there and says why, once."""
    api = Events(OperatorConfig())
    node = api.node_objs["h0-0"]
    del node["status"]["allocatable"]["nvidia.com/gpu"]
    node["metadata"]["labels"] |= {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "8"}
    reconciler = Driven(api, Clock())
    api.submit("job", 3)
    for _ in range(3):
        reconciler.cycle()
    said = [e for e in api.events if e["reason"] == "GPUsOnlyThroughDRA"]
    assert [e["involvedObject"]["name"] for e in said] == ["h0-0"]
    assert "only through DRA" in said[0]["message"]
    assert sorted(api.nodes_of("job").values()) == ["h0-1", "h1-0", "h1-1"]


class SlowDeletes(GatedApi):
    """Deleted pods stay, terminating, until `gone` (a kubelet stopping them)."""

    def delete_pod(self, namespace: str, pod: str) -> None:
        obj = self.pod_objs.get((namespace, pod))
        if obj is not None:
            obj["metadata"]["deletionTimestamp"] = "2026-12-01T00:01:00Z"

    def gone(self) -> None:
        for where, obj in list(self.pod_objs.items()):
            if obj["metadata"].get("deletionTimestamp"):
                del self.pod_objs[where]


def nominated(api: MemoryApi, job: str) -> dict[str, str | None]:
    return {n: (p.get("status") or {}).get("nominatedNodeName") for n, p in api.of(job).items()}


def test_a_preemptors_pods_name_the_nodes_they_wait_for_until_they_are_bound():
    api = SlowDeletes(OperatorConfig())
    reconciler = Driven(api, Clock())
    api.submit("low", 4)
    for _ in range(2):
        reconciler.cycle()
    where = api.nodes_of("low")
    api.submit("high", 1, at="2026-12-01T00:00:05Z", priority=10)
    for _ in range(3):
        reconciler.cycle()
    victims = [n for n, p in api.of("low").items() if p["metadata"].get("deletionTimestamp")]
    assert victims
    assert not any(api.nodes_of("high").values())
    [node] = nominated(api, "high").values()
    assert node in {where[v] for v in victims}
    api.gone()
    for _ in range(2):
        reconciler.cycle()
    assert api.nodes_of("high") == {"high-0": node}
    assert nominated(api, "high") == {"high-0": None}


def test_the_first_blocked_gang_names_the_nodes_its_reservation_keeps():
    """EASY backfill keeps hosts for the pool's first blocked gang; its pods say so."""
    api = SlowDeletes(OperatorConfig())
    reconciler = Driven(api, Clock())
    api.submit("first", 3)
    for _ in range(2):
        reconciler.cycle()
    api.submit("big", 2, at="2026-12-01T00:00:05Z")
    for _ in range(2):
        reconciler.cycle()
    assert api.reason("big") == "Unplaceable"
    said = nominated(api, "big")
    assert all(said.values())
    assert set(said.values()) <= set(api.node_objs)


# the Workload API's PodGroup (scheduling.k8s.io/v1alpha2, 1.36): pods name it in
# spec.schedulingGroup.podGroupName; a gang policy's minCount; one topology constraint's key
def workload_group(api: GatedApi, name: str, pods: int, **spec: Any) -> None:
    body = {"metadata": {"name": name, "namespace": "default"}, "spec": spec}
    api.workload_podgroup_objs.append(body)
    for rank in range(pods):
        api.add_member(name, rank, at="2026-12-01T00:00:01Z")
        member = api.member(name, rank)
        del member["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"]
        member["spec"]["schedulingGroup"] = {"podGroupName": name}


def workload_condition(api: GatedApi, name: str) -> Obj:
    group = next(g for g in api.workload_podgroup_objs if g["metadata"]["name"] == name)
    return next(c for c in group["status"]["conditions"] if c["type"] == "PodGroupScheduled")


GANG = {"schedulingPolicy": {"gang": {"minCount": 2}}}
IN_A_RACK = {"schedulingConstraints": {"topology": [{"key": "rackwise.io/rack"}]}}


def test_a_workload_api_pod_group_is_a_gang_and_says_so_in_its_own_condition(api, reconciler):
    workload_group(api, "w", 1, **GANG)
    reconciler.cycle()
    said = workload_condition(api, "w")
    assert (said["status"], said["reason"]) == ("False", "GroupIncomplete")
    api.add_member("w", 1, at="2026-12-01T00:00:02Z")
    del api.member("w", 1)["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"]
    api.member("w", 1)["spec"]["schedulingGroup"] = {"podGroupName": "w"}
    reconciler.cycle()
    assert all(bound(api, "w"))
    assert workload_condition(api, "w")["status"] == "True"


def test_its_topology_key_is_a_required_level():
    """Three 8-GPU pods in one rack of two hosts: never, so none is bound (without the
    constraint they would span both racks)."""
    api = GatedApi(OperatorConfig())
    reconciler = Driven(api, Clock())
    workload_group(api, "w", 3, schedulingPolicy={"gang": {"minCount": 3}}, **IN_A_RACK)
    reconciler.cycle()
    assert bound(api, "w") == [None, None, None]
    assert workload_condition(api, "w")["reason"] == "NeverFits"


def test_an_unknown_topology_key_is_reported_naming_the_kind_and_field(api, reconciler):
    workload_group(api, "w", 2, **GANG, schedulingConstraints={"topology": [{"key": "x/y"}]})
    reconciler.cycle()
    said = workload_condition(api, "w")
    assert said["reason"] == "InvalidSpec"
    assert said["message"].startswith(
        "PodGroup (scheduling.k8s.io/v1alpha2) w: spec.schedulingConstraints.topology[0].key"
    )


def test_the_two_podgroup_kinds_of_one_name_are_two_gangs(api, reconciler):
    """A scheduler-plugins PodGroup `g` (label) and a Workload API PodGroup `g` (field) in one
    namespace: two gangs, each told in its own object."""
    api.group("g", 2, least=2)
    api.workload_podgroup_objs.append(
        {"metadata": {"name": "g", "namespace": "default"}, "spec": GANG}
    )
    for rank in (5, 6):
        api.add_member("g", rank, at="2026-12-01T00:00:03Z")
        del api.member("g", rank)["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"]
        api.member("g", rank)["spec"]["schedulingGroup"] = {"podGroupName": "g"}
    reconciler.cycle()
    assert {"podgroup:default/g", "workload-podgroup:default/g"} <= set(
        reconciler.inner.groups.reasons
    )
    assert all(bound(api, "g"))
    assert scheduled(api, "g")["reason"] == "Scheduled"
    assert workload_condition(api, "g")["reason"] == "Scheduled"


def test_a_basic_policy_places_each_member_on_its_own(api, reconciler):
    """Room for one 8-GPU pod: the basic group's first member starts, the other waits (a
    gang of both would wait whole)."""
    api.submit("fill", 3)
    for _ in range(2):
        reconciler.cycle()
    workload_group(api, "b", 2, schedulingPolicy={"basic": {}})
    reconciler.cycle()
    assert sorted(bool(n) for n in bound(api, "b")) == [False, True]


def test_pods_of_a_missing_workload_pod_group_name_its_kind(api, reconciler):
    workload_group(api, "w", 1, **GANG)
    api.workload_podgroup_objs.clear()
    reconciler.cycle()
    pod = api.member("w", 0)
    assert "PodGroup (scheduling.k8s.io/v1alpha2) w" in pod_scheduled(pod)[2]
