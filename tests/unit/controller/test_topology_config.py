"""The operator's topology config: levels named and labelled by the user, Kueue-style."""

from __future__ import annotations

import copy

import pytest

from scheduler.controller.cluster.state import StateBuilder
from scheduler.controller.config import OperatorConfig
from scheduler.controller.runtime.objects import Node, Pod, TrainingJob
from scheduler.controller.trainingjob.translate import InvalidSpecError, translate

KUEUE = {
    "levels": [
        {"name": "block", "nodeLabel": "cloud.google.com/gce-topology-block"},
        {"name": "subblock", "nodeLabel": "cloud.google.com/gce-topology-subblock"},
        {"name": "hostname", "nodeLabel": "kubernetes.io/hostname"},
    ][::-1]
}


def node(name: str, labels: dict[str, str]) -> dict:
    return {
        "metadata": {"name": name, "labels": {"rackwise.io/pool": "training", **labels}},
        "spec": {},
        "status": {
            "allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def test_levels_from_the_config_and_nodes_without_them_left_out():
    config = OperatorConfig.model_validate(KUEUE)
    labels = {
        "cloud.google.com/gce-topology-block": "b1",
        "cloud.google.com/gce-topology-subblock": "sb1",
    }
    nodes = [
        node("a", labels),
        node("b", labels),
        node("c", {"cloud.google.com/gce-topology-block": "b1"}),
    ]
    state = StateBuilder(config).build([Node.of(n) for n in nodes], [])
    assert state is not None
    assert state.fabric.levels == ("host", "nvlink", "subblock", "block")
    assert sorted(state.fabric.host_index) == ["a", "b"]
    assert state.excluded["c"].startswith(
        "no subblock label cloud.google.com/gce-topology-subblock"
    )


def test_jobs_name_the_configured_levels():
    config = OperatorConfig.model_validate(KUEUE)
    base = {
        "apiVersion": "rackwise.io/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": "j", "namespace": "default", "uid": "u"},
        "spec": {
            "replicas": 2,
            "template": {"spec": {"containers": [{"name": "main", "image": "x"}]}},
        },
    }
    base["spec"]["topology"] = {"requiredLevel": "subblock"}
    assert translate(TrainingJob.of(base), config).gang.required_level == "subblock"
    base["spec"]["topology"] = {"requiredLevel": "rack"}
    with pytest.raises(InvalidSpecError, match="unknown level 'rack'; levels are host, nvlink"):
        translate(TrainingJob.of(base), config)
    # the config's name for the hostname level is the fabric's `host`
    base["spec"]["topology"] = {"requiredLevel": "hostname"}
    assert translate(TrainingJob.of(base), config).gang.required_level == "host"


def test_kueue_annotations_naming_the_hostname_label_use_the_configured_level():
    """The README's own levels (hostname, subblock, block): a pod group asking Kueue's
    required topology kubernetes.io/hostname is required on one host, not 'unknown level'."""
    from scheduler.controller.podgroup.members import Members, gang

    config = OperatorConfig.model_validate(KUEUE)
    notes = {"kueue.x-k8s.io/podset-required-topology": "kubernetes.io/hostname"}
    pods = [
        {
            "metadata": {"name": f"p-{i}", "namespace": "default", "annotations": notes},
            "spec": {
                "schedulerName": "rackwise",
                "containers": [
                    {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}}}
                ],
            },
        }
        for i in range(2)
    ]
    views = [Pod.of(p) for p in pods]
    request, _ = gang(Members("default", "g", views, None), views, config)
    assert request.required_level == "host"


def test_pools_are_the_configs_with_their_objectives():
    config = OperatorConfig.model_validate(
        {
            "pools": [
                {"name": "training", "objective": "pack"},
                {"name": "research", "objective": "fill"},
            ]
        }
    )
    base = {
        "apiVersion": "rackwise.io/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": "j", "namespace": "default", "uid": "u"},
        "spec": {
            "replicas": 2,
            "pool": "research",
            "template": {"spec": {"containers": [{"name": "main", "image": "x"}]}},
        },
    }
    gang = translate(TrainingJob.of(base), config).gang
    assert (gang.pool, gang.objective) == ("research", "fill")
    assert gang.constraints.selector == (("rackwise.io/pool", "research"),)
    base["spec"]["pool"] = "online-inference"  # a default pool this config does not have
    with pytest.raises(
        InvalidSpecError, match="unknown pool 'online-inference'; pools are training, research"
    ):
        translate(TrainingJob.of(base), config)
    base["spec"]["pool"] = "training"
    toleration = {"key": "rackwise.io/pool", "operator": "Exists"}
    base["spec"]["template"]["spec"]["tolerations"] = [toleration]
    with pytest.raises(InvalidSpecError, match="tolerates pool 'research'"):
        translate(TrainingJob.of(base), config)


def test_a_node_of_a_pool_the_operator_does_not_have_is_left_out():
    config = OperatorConfig.model_validate({"pools": [{"name": "training", "objective": "pack"}]})
    rack = {"rackwise.io/rack": "r1"}
    other = node("b", rack)
    other["metadata"]["labels"]["rackwise.io/pool"] = "research"
    state = StateBuilder(config).build([Node.of(n) for n in [node("a", rack), other]], [])
    assert state is not None
    assert list(state.fabric.host_index) == ["a"]
    assert state.excluded["b"] == "pool 'research' is not one of the operator's pools (training)"


def test_node_capacity_is_rounded_down_never_up():
    """1536Ki of memory is 1.5 MiB: the node offers 1, not 2 (a 2 MiB pod would not fit on the
    real node); CPU 0.0015 cores offers 1 millicore, a fractional device count its whole part."""
    config = OperatorConfig()
    small = node("a", {"rackwise.io/rack": "r1"})
    small["status"]["allocatable"] = {
        "nvidia.com/gpu": "7.5",
        "cpu": "0.0015",
        "memory": "1536Ki",
        "pods": "10",
    }
    state = StateBuilder(config).build([Node.of(n) for n in [small]], [])
    assert state is not None
    [host] = state.fabric.hosts
    assert (host.gpus, host.cpu_milli, host.memory_mib, host.max_pods) == (7, 1, 1, 10)


def test_a_node_is_read_again_when_it_changes_and_only_then():
    """Entries are kept by resourceVersion: a resized node (a new version) is read again."""
    builder = StateBuilder(OperatorConfig())
    before = node("a", {"rackwise.io/rack": "r1"})
    before["metadata"]["resourceVersion"] = "1"
    after = copy.deepcopy(before)
    after["status"]["allocatable"]["nvidia.com/gpu"] = "4"
    gpus = []
    for version, raw in (("1", before), ("2", after)):
        raw["metadata"]["resourceVersion"] = version
        state = builder.build([Node.of(raw)], [])
        assert state is not None
        gpus.append(state.fabric.hosts[0].gpus)
    assert gpus == [8, 4]


def test_health_taints_make_a_host_down_and_leave_the_fabric_as_it_is():
    """The lifecycle controller's not-ready taint comes and goes with the node's health: the
    host is down while it is there, and the fabric (what never-fits is judged on) is the one
    the node had without it. A taint of the operator's own choosing stays the host's."""
    config = OperatorConfig()
    healthy = node("a", {"rackwise.io/rack": "r1"})
    flapping = node("a", {"rackwise.io/rack": "r1"})
    flapping["spec"]["taints"] = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    builder = StateBuilder(config)
    before = builder.build([Node.of(n) for n in [healthy]], [])
    during = builder.build([Node.of(n) for n in [flapping]], [])
    assert before is not None
    assert during is not None
    assert during.fabric is before.fabric
    assert during.snapshot.down == {0}
    dedicated = node("a", {"rackwise.io/rack": "r1"})
    dedicated["spec"]["taints"] = [{"key": "team", "value": "x", "effect": "NoSchedule"}]
    state = builder.build([Node.of(n) for n in [dedicated]], [])
    assert state is not None
    assert [t.key for t in state.fabric.hosts[0].taints] == ["team"]
    assert state.snapshot.down == set()


def test_the_gpu_operators_clique_label_is_the_nvlink_level_of_nvl72_racks():
    """GB200 NVL72 racks as NVIDIA's GPU operator labels them: every tray of one NVLink
    domain carries the same `nvidia.com/gpu.clique` (<cluster uuid>.<clique id>). Pointing the
    NVLink level at that label makes each rack's 18 trays one NVLink domain, and a gang
    required inside one is placed on a single clique (with the default label: fails, tried)."""
    from scheduler.model import GangRequest, PlaceConfig
    from scheduler.model.topology import Tier
    from scheduler.placement import place_one

    config = OperatorConfig.model_validate({"labels": {"nvlink": "nvidia.com/gpu.clique"}})
    nodes = []
    for rack in (1, 2):
        for tray in range(18):
            labels = {"rackwise.io/rack": f"r{rack}", "nvidia.com/gpu.clique": f"9f3c.{rack}"}
            body = node(f"r{rack}-t{tray}", labels)
            body["status"]["allocatable"]["nvidia.com/gpu"] = "4"
            nodes.append(body)
    state = StateBuilder(config).build([Node.of(n) for n in nodes], [])
    assert state is not None
    fabric = state.fabric
    assert len(fabric.real_nvlink) == 2
    sizes: dict[int, int] = {}
    for h in range(len(fabric.hosts)):
        domain = int(fabric.columns[Tier.NVLINK][h])
        sizes[domain] = sizes.get(domain, 0) + int(fabric.gpus[h])
    assert sorted(sizes.values()) == [72, 72]
    gang = GangRequest(name="tp72", pods=18, gpus_per_pod=4, required_level="nvlink")
    placed = place_one(state.snapshot, gang, PlaceConfig())
    assert placed.placed
    assert len({h.split("-")[0] for h in placed.hosts()}) == 1


def test_an_nvlink_level_keeps_the_spares_its_config_names():
    config = OperatorConfig.model_validate(
        {
            "levels": [
                {
                    "name": "clique",
                    "nodeLabel": "nvidia.com/gpu.clique",
                    "nvlink": True,
                    "spares": 2,
                },
                {"name": "rack", "nodeLabel": "rackwise.io/rack"},
            ]
        }
    )
    nodes = [
        node(f"t{i}", {"nvidia.com/gpu.clique": "c0", "rackwise.io/rack": "r0"}) for i in range(4)
    ]
    state = StateBuilder(config).build([Node.of(n) for n in nodes], [])
    assert state is not None
    assert state.fabric.spares == 2
    assert state.fabric.largest_nvlink == {"training": 16}  # 2 of 4 trays of 8 GPUs in service
