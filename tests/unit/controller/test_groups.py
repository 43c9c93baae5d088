"""Pod groups read as gangs: the workers are the largest set of alike pods, every other set a
role; each set's topology comes from its own annotations (as Kueue reads them per pod set)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.controller.config import OperatorConfig
from scheduler.controller.podgroup.members import GROUP_LABEL, INDEX, ROLE_LABEL, Members, gang
from scheduler.controller.pods.podspec import InvalidSpecError
from scheduler.controller.runtime.objects import Pod

Obj = dict[str, Any]


def pod(name: str, gpus: int, notes: Obj, labels: Obj | None = None) -> Obj:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {"requests": {"cpu": "1"}}
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {GROUP_LABEL: "g", **(labels or {})},
            "annotations": notes,
        },
        "spec": {
            "schedulerName": "rackwise",
            "containers": [{"name": "main", "image": "x", "resources": resources}],
        },
    }


RACK = {"rackwise.io/required-level": "rack"}
PAIRS = {"rackwise.io/slice-level": "host", "rackwise.io/slice-size": "2"}


def read(raw: list[Obj]) -> Any:
    pods = [Pod.of(p) for p in raw]
    request, _ = gang(Members("default", "g", pods, None), pods, OperatorConfig())
    return request


def test_each_pod_set_takes_the_topology_its_own_annotations_ask_for():
    leaders = [pod(f"l{i}", 0, PAIRS, {ROLE_LABEL: "leader"}) for i in range(2)]
    workers = [pod(f"w{i}", 8, RACK) for i in range(4)]
    request = read([*leaders, *workers])
    assert (request.pods, request.required_level, request.slices) == (4, "rack", ())
    [leader] = request.roles
    assert (leader.name, leader.pods, leader.required_level) == ("leader", 2, None)
    assert [(s.level, s.size) for s in leader.slices] == [("host", 2)]
    assert not leader.in_group  # not in the workers' PodSet group: not held in their rack


GROUPED = {
    "kueue.x-k8s.io/podset-group-name": "lws",
    "kueue.x-k8s.io/podset-required-topology": "rackwise.io/rack",
}


def test_a_leader_in_the_workers_podset_group_shares_their_domain():
    """Kueue's PodSet group (LeaderWorkerSet): the leader and its workers in one rack."""
    leader = pod("leader", 0, GROUPED, {ROLE_LABEL: "leader"})
    workers = [pod(f"w{i}", 8, GROUPED) for i in range(4)]
    request = read([leader, *workers])
    assert request.required_level == "rack"
    [role] = request.roles
    assert (role.in_group, role.required_level) == (True, None)


def test_pod_sets_of_one_group_must_ask_one_topology():
    leader = pod("leader", 0, {**GROUPED, "kueue.x-k8s.io/podset-required-topology": "x"})
    workers = [pod(f"w{i}", 8, GROUPED) for i in range(2)]
    with pytest.raises(InvalidSpecError, match="no level is read from node label 'x'"):
        read([leader, *workers])
    host = {**GROUPED, "kueue.x-k8s.io/podset-required-topology": "kubernetes.io/hostname"}
    leader = pod("leader", 0, host, {ROLE_LABEL: "leader"})
    with pytest.raises(InvalidSpecError, match="ask different topologies"):
        read([leader, *workers])


def test_alike_pods_with_other_annotations_are_another_pod_set():
    pods = [pod("a", 8, RACK), pod("b", 8, RACK), pod("c", 8, {})]
    request = read(pods)
    assert (request.pods, request.required_level) == (2, "rack")
    [other] = request.roles
    assert (other.pods, other.required_level) == (1, None)


def test_a_role_with_a_preferred_level():
    pods = [pod("a", 8, {}), pod("b", 8, {}), pod("c", 0, {"rackwise.io/preferred-level": "rack"})]
    [role] = read(pods).roles
    assert role.preferred_level == "rack"


def test_pool_and_priority_are_the_groups():
    other = pod("b", 8, {}, {"rackwise.io/pool": "batch-inference"})
    with pytest.raises(InvalidSpecError, match="differs from a in its pool or priority"):
        read([pod("a", 8, {}), other])


def test_a_roles_bad_annotation_is_reported():
    pods = [pod("a", 8, {}), pod("b", 8, {}), pod("c", 0, {"rackwise.io/required-level": "galaxy"})]
    with pytest.raises(InvalidSpecError, match="unknown level 'galaxy'"):
        read(pods)


def test_a_pod_set_of_another_shape_joins_the_gradient_ring_when_annotated():
    ring = {"rackwise.io/gradients": "true"}
    pods = [pod("a", 8, {}), pod("b", 8, {}), pod("c", 4, ring)]
    [member] = read(pods).roles
    assert (member.pods, member.gpus_per_pod, member.gradients) == (1, 4, True)
    [silent] = read([pod("a", 8, {}), pod("b", 8, {}), pod("c", 4, {})]).roles
    assert not silent.gradients
    with pytest.raises(InvalidSpecError, match="gradients"):
        read([pod("a", 8, {}), pod("b", 8, {}), pod("c", 4, {"rackwise.io/gradients": "yes"})])


def test_ranks_follow_the_numbers_in_pod_names_when_there_is_no_completion_index():
    from scheduler.controller.podgroup.members import _rank_key

    names = ["w-worker-10", "w-worker-2", "w-worker-1", "lws-0-10", "lws-0-2", "lws-1-0"]
    pods = [Pod.of({"metadata": {"name": n}}) for n in names]
    ordered = [p.meta.name for p in sorted(pods, key=_rank_key)]
    assert ordered == ["lws-0-2", "lws-0-10", "lws-1-0", "w-worker-1", "w-worker-2", "w-worker-10"]
    indexed = Pod.of({"metadata": {"name": "w-worker-9", "annotations": {INDEX: "0"}}})
    assert sorted([*pods, indexed], key=_rank_key)[0] is indexed


def test_a_kueue_slice_of_one_pod_is_accepted():
    """`kueue.x-k8s.io/podset-slice-size: "1"` is valid in Kueue: no pydantic error escapes."""
    notes = {
        "kueue.x-k8s.io/podset-slice-required-topology": "rackwise.io/rack",
        "kueue.x-k8s.io/podset-slice-size": "1",
    }
    request = read([pod(f"w{i}", 8, notes) for i in range(3)])
    assert [(s.level, s.size) for s in request.slices] == [("rack", 1)]


def test_a_member_whose_node_selector_contradicts_its_pool_is_refused():
    """Its selector asks for online-inference nodes while its pool label says training: the
    group is InvalidSpec naming the field, never bound onto a training node."""
    asked = pod("w0", 8, {})
    asked["spec"]["nodeSelector"] = {"rackwise.io/pool": "online-inference"}
    with pytest.raises(InvalidSpecError, match=r"spec.nodeSelector.rackwise.io/pool: 'online"):
        read([asked, pod("w1", 8, {})])
    agrees = pod("w0", 8, {})
    agrees["spec"]["nodeSelector"] = {"rackwise.io/pool": "training", "disk": "ssd"}
    assert read([agrees]).pods == 1


def test_a_member_whose_required_affinity_excludes_its_pool_is_refused():
    term = {"key": "rackwise.io/pool", "operator": "NotIn", "values": ["training"]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [term]}]
            }
        }
    }
    excluded = pod("w0", 8, {})
    excluded["spec"]["affinity"] = affinity
    with pytest.raises(InvalidSpecError, match="no term admits a node of its pool 'training'"):
        read([excluded])
    other = {"key": "disk", "operator": "In", "values": ["ssd"]}
    fine = pod("w0", 8, {})
    fine["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [other]}]
            }
        }
    }
    assert read([fine]).pods == 1


def test_a_groups_parallel_shape_comes_from_its_workers_annotation():
    shaped = {"rackwise.io/parallelism": "tp=16, dp=2,ep=2"}
    request = read([pod(f"w{i}", 8, shaped) for i in range(4)])
    assert request.shape is not None
    assert (request.shape.tp, request.shape.dp, request.shape.pp, request.shape.ep) == (16, 2, 1, 2)
    assert request.tp_pods == 2  # a TP group of 16 spans two 8-GPU pods: ranked together
    assert read([pod(f"w{i}", 8, {}) for i in range(4)]).shape is None


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("tp=8,tp=4", r"'tp=4' is not axis=width"),
        ("xp=2", r"'xp=2' is not axis=width"),
        ("tp=0", r"'tp=0' is not axis=width"),
        ("tp", r"'tp' is not axis=width"),
        ("dp=4,ep=3", r"rackwise.io/parallelism: .*ep=3 must divide dp=4"),
        ("tp=8,dp=2", r"shape dp\*tp\*pp=16 must equal pods\*gpus_per_pod=32"),
    ],
)
def test_a_bad_parallel_shape_is_refused_with_the_annotations_words(value: str, why: str):
    with pytest.raises(InvalidSpecError, match=why):
        read([pod(f"w{i}", 8, {"rackwise.io/parallelism": value}) for i in range(4)])


KAI_LABEL = "rackwise.io/rack"


@pytest.mark.parametrize(
    ("placement", "field"),
    [
        ("segment-topology-required-placement", "slices"),
        ("segment-topology-preferred-placement", "preferred_slices"),
    ],
)
def test_kai_segments_are_read_required_or_preferred(placement, field):
    notes = {f"kai.scheduler/{placement}": KAI_LABEL, "kai.scheduler/segment-size": "2"}
    request = read([pod(f"w{i}", 8, notes) for i in range(4)])
    assert [(s.level, s.size) for s in getattr(request, field)] == [("rack", 2)]
    other = "preferred_slices" if field == "slices" else "slices"
    assert getattr(request, other) == ()


@pytest.mark.parametrize(
    ("notes", "match"),
    [
        ({"kai.scheduler/segment-topology-required-placement": KAI_LABEL}, "segment-size"),
        (
            {
                "kai.scheduler/segment-topology-required-placement": KAI_LABEL,
                "kai.scheduler/segment-topology-preferred-placement": KAI_LABEL,
                "kai.scheduler/segment-size": "2",
            },
            "either required or preferred",
        ),
        (
            {
                "kai.scheduler/segment-topology-preferred-placement": "no/such-label",
                "kai.scheduler/segment-size": "2",
            },
            "no level is read from node label",
        ),
        (
            {
                "kai.scheduler/segment-topology-required-placement": KAI_LABEL,
                "kai.scheduler/segment-size": "2",
                "kueue.x-k8s.io/podset-slice-required-topology": KAI_LABEL,
                "kueue.x-k8s.io/podset-slice-size": "2",
            },
            "not both",
        ),
    ],
)
def test_a_bad_segment_is_a_clear_error(notes, match):
    with pytest.raises(InvalidSpecError, match=match):
        read([pod(f"w{i}", 8, notes) for i in range(4)])
