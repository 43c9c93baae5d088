"""Quantities, effective pod requests and typed spec parsing: what the operator reads."""

from __future__ import annotations

from decimal import Decimal

import pytest

from scheduler.controller.cluster.resources import charge
from scheduler.controller.config import OperatorConfig, PodSecurity, SecurityLevel
from scheduler.controller.runtime.objects import TrainingJob
from scheduler.controller.runtime.podrequests import requests
from scheduler.controller.runtime.quantity import QuantityError, mebi, milli, parse
from scheduler.controller.trainingjob.pods import pipeline_stage, pod
from scheduler.controller.trainingjob.translate import InvalidSpecError, translate


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Decimal("0.5")),
        ("2", Decimal(2)),
        (4, Decimal(4)),
        ("1Gi", Decimal(1 << 30)),
        ("1.5k", Decimal(1500)),
        ("1e3", Decimal(1000)),
        ("100u", Decimal("0.0001")),
    ],
)
def test_quantities_parse_exactly(text, value):
    assert parse(text) == value


@pytest.mark.parametrize("text", ["1e400", "1e30", "-1", "abc", "1Zi", "", True, None, [1]])
def test_bad_or_out_of_range_quantities_are_errors(text):
    with pytest.raises(QuantityError):
        parse(text)


def test_units_round_up():
    assert milli(Decimal("0.0001")) == 1
    assert mebi(Decimal(1)) == 1
    assert mebi(Decimal(1 << 20)) == 1


def test_effective_request_is_max_of_init_and_sum_of_containers_plus_overhead():
    spec = {
        "containers": [
            {"resources": {"requests": {"cpu": "2"}, "limits": {"nvidia.com/gpu": "4"}}},
            {"resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "2"}}},  # limit as request
        ],
        "initContainers": [
            {"resources": {"requests": {"cpu": "10"}}},
            {"resources": {"requests": {"nvidia.com/gpu": "1"}}},
        ],
        "overhead": {"cpu": "250m"},
    }
    wanted = requests(spec)
    assert wanted["cpu"] == Decimal("10.25")  # init 10 > 2 + 1, plus overhead
    assert wanted["nvidia.com/gpu"] == Decimal(6)  # 4 + 2 > 1
    assert charge(spec, "nvidia.com/gpu").cpu_milli == 10_250


def box(cpu: str, policy: str | None = None, gpu: str | None = None) -> dict:
    wanted = {"cpu": cpu} | ({"nvidia.com/gpu": gpu} if gpu else {})
    return {"resources": {"requests": wanted}} | ({"restartPolicy": policy} if policy else {})


@pytest.mark.parametrize(
    ("spec", "cpu"),
    [
        # a sidecar runs for the pod's life: it adds to the app containers
        ({"containers": [box("2")], "initContainers": [box("1", "Always")]}, "3"),
        # a plain init container before any sidecar runs alone: max(5, 2 + 1)
        ({"containers": [box("2")], "initContainers": [box("5"), box("1", "Always")]}, "5"),
        # one after a sidecar runs beside it: max(1 + 5, 2 + 1)
        ({"containers": [box("2")], "initContainers": [box("1", "Always"), box("5")]}, "6"),
        # two sidecars, then an init container beside both: max(1 + 2 + 4, 2 + 1 + 2)
        (
            {
                "containers": [box("2")],
                "initContainers": [box("1", "Always"), box("2", "Always"), box("4")],
            },
            "7",
        ),
        # pod-level requests stand for the containers' CPU and memory; the overhead adds
        (
            {
                "containers": [box("2"), box("2")],
                "initContainers": [box("1", "Always")],
                "resources": {"requests": {"cpu": "4"}},
                "overhead": {"cpu": "250m"},
            },
            "4.25",
        ),
        # a pod-level limit stands in for its request
        ({"containers": [box("2")], "resources": {"limits": {"cpu": "3"}}}, "3"),
    ],
)
def test_requests_count_sidecars_and_pod_level_resources_as_the_scheduler_does(spec, cpu):
    assert requests(spec)["cpu"] == Decimal(cpu)


def test_pod_level_requests_leave_extended_resources_to_the_containers():
    spec = {
        "containers": [box("1", gpu="4")],
        "initContainers": [box("1", "Always", gpu="1")],
        "resources": {"requests": {"cpu": "8", "nvidia.com/gpu": "1"}},
    }
    assert requests(spec) == {"cpu": Decimal(8), "nvidia.com/gpu": Decimal(5)}


def job(**spec: object) -> dict:
    base = {
        "replicas": 2,
        "gpusPerReplica": 8,
        "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}},
    }
    return {
        "metadata": {"name": "j", "namespace": "team", "uid": "u"},
        "spec": {**base, **spec},
    }


def test_a_good_job_translates_with_its_true_charge():
    sidecar = {"name": "side", "image": "b", "resources": {"requests": {"cpu": "3"}}}
    view = translate(
        TrainingJob.of(
            job(
                cpuPerReplica="1",
                template={"spec": {"containers": [{"name": "main", "image": "x"}, sidecar]}},
            )
        ),
        OperatorConfig(),
    )
    assert view.gang.cpu_milli_per_pod == 4000  # the sidecar counts
    assert view.gang.extended_per_pod == {}


def test_extended_resources_and_slices_reach_the_gang():
    main = {
        "name": "main",
        "image": "x",
        "resources": {"limits": {"rdma/ib": "1", "ephemeral-storage": "1Gi"}},
    }
    view = translate(
        TrainingJob.of(
            job(
                replicas=4,
                topology={"slices": [{"level": "rack", "size": 2}]},
                template={"spec": {"containers": [main]}},
            )
        ),
        OperatorConfig(),
    )
    assert view.gang.extended_per_pod == {"rdma/ib": 1}  # storage is the kubelet's business
    assert [(s.level, s.size) for s in view.gang.slices] == [("rack", 2)]
    assert view.pod_spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert view.gang.constraints.selector == (("rackwise.io/pool", "training"),)


def test_a_slice_is_required_unless_it_says_preferred():
    """Kueue's slices and Slurm's --segment wait; KAI's preferred segments fall back."""
    slices = [
        {"level": "rack", "size": 2},
        {"level": "host", "size": 2, "mode": "preferred"},
    ]
    view = translate(TrainingJob.of(job(replicas=4, topology={"slices": slices})), OperatorConfig())
    assert [(s.level, s.size) for s in view.gang.slices] == [("rack", 2)]
    assert [(s.level, s.size) for s in view.gang.preferred_slices] == [("host", 2)]
    bad = TrainingJob.of(job(replicas=4, topology={"slices": [{**slices[0], "mode": "soft"}]}))
    with pytest.raises(InvalidSpecError, match=r"spec\.topology\.slices\.0\.mode"):
        translate(bad, OperatorConfig())


def test_a_role_slice_cannot_be_preferred():
    role = {
        "name": "ps",
        "replicas": 2,
        "topology": {"slices": [{"level": "host", "size": 2, "mode": "preferred"}]},
        "template": {"spec": {"containers": [{"name": "p", "image": "x"}]}},
    }
    with pytest.raises(InvalidSpecError, match=r"spec.roles.0.topology.slices.0.mode"):
        translate(TrainingJob.of(job(roles=[role])), OperatorConfig())


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"replicas": "2"}, "spec.replicas"),
        ({"replicas": 20_000}, "maxGangPods"),
        ({"cpuPerReplica": "1e400"}, "spec.cpuPerReplica"),
        ({"template": {"spec": "x"}}, "spec.template.spec"),
        ({"template": {"spec": {"containers": []}}}, "spec.template.spec.containers"),
        ({"pool": "gpu"}, "spec.pool"),
        ({"topology": {"requiredLevel": "pod"}}, "spec.topology.requiredLevel"),
        ({"topology": {"slices": [{"level": "row", "size": 2}]}}, "spec.topology.slices.0.level"),
        ({"parallelism": {"dp": 3, "tp": 8}}, "spec"),
        ({"parallelism": {"dp": 4, "tp": 8, "ep": 3}}, "ep=3 must divide dp=4"),
    ],
)
def test_bad_specs_name_the_field(change, field):
    with pytest.raises(InvalidSpecError) as info:
        translate(TrainingJob.of(job(**change)), OperatorConfig())
    assert field in str(info.value)


def test_pod_security_levels_and_exempt_namespaces():
    root = {"name": "main", "image": "x", "securityContext": {"runAsUser": 0}}
    as_root = job(template={"spec": {"containers": [root]}})
    translate(TrainingJob.of(as_root), OperatorConfig())  # baseline allows root
    restricted = OperatorConfig(pod_security=PodSecurity(level=SecurityLevel.RESTRICTED))
    with pytest.raises(InvalidSpecError, match="restricted"):
        translate(TrainingJob.of(as_root), restricted)
    host = job(template={"spec": {"containers": [root], "hostNetwork": True}})
    with pytest.raises(InvalidSpecError, match="hostNetwork"):
        translate(TrainingJob.of(host), OperatorConfig())
    exempt = OperatorConfig(pod_security=PodSecurity(exempt_namespaces=("team",)))
    translate(TrainingJob.of(host), exempt)


def test_a_role_is_checked_as_the_workers_are_and_named_in_errors():
    role = {
        "name": "launcher",
        "replicas": 1,
        "gpusPerReplica": 0,
        "cpuPerReplica": "2",
        "template": {"spec": {"containers": [{"name": "l", "image": "x"}]}},
    }
    view = translate(TrainingJob.of(job(roles=[role])), OperatorConfig())
    [launcher] = view.gang.roles
    assert (launcher.name, launcher.pods, launcher.cpu_milli_per_pod) == ("launcher", 1, 2000)
    assert view.total_pods == view.gang.pods + 1
    bad = {
        **role,
        "template": {"spec": {"nodeName": "n1", "containers": [{"name": "l", "image": "x"}]}},
    }
    with pytest.raises(InvalidSpecError, match=r"^spec\.roles\.0\.template\.spec\.nodeName"):
        translate(TrainingJob.of(job(roles=[bad])), OperatorConfig())


def test_a_role_carries_its_own_topology_and_its_errors_name_it():
    role = {
        "name": "ps",
        "replicas": 4,
        "topology": {
            "requiredLevel": "rack",
            "preferredLevel": "host",
            "slices": [{"level": "host", "size": 2}],
        },
        "template": {"spec": {"containers": [{"name": "p", "image": "x"}]}},
    }
    [ps] = translate(TrainingJob.of(job(roles=[role])), OperatorConfig()).gang.roles
    assert (ps.required_level, ps.preferred_level) == ("rack", "host")
    assert [(s.level, s.size) for s in ps.slices] == [("host", 2)]
    unknown = {**role, "topology": {"requiredLevel": "pod"}}
    with pytest.raises(
        InvalidSpecError, match=r"^spec\.roles\.0\.topology\.requiredLevel: unknown"
    ):
        translate(TrainingJob.of(job(roles=[unknown])), OperatorConfig())
    odd = {**role, "topology": {"slices": [{"level": "host", "size": 3}]}}
    with pytest.raises(InvalidSpecError, match=r"^spec\.roles\.0.*slice of 3 pods per host"):
        translate(TrainingJob.of(job(roles=[odd])), OperatorConfig())


def test_a_role_in_the_gradient_ring_is_read_and_refused_beside_pipeline_stages():
    role = {
        "name": "wide",
        "replicas": 2,
        "gpusPerReplica": 4,
        "gradients": True,
        "template": {"spec": {"containers": [{"name": "w", "image": "x"}]}},
    }
    [wide] = translate(TrainingJob.of(job(roles=[role])), OperatorConfig()).gang.roles
    assert wide.gradients
    staged = job(roles=[role], replicas=4, parallelism={"dp": 1, "tp": 8, "pp": 4})
    with pytest.raises(InvalidSpecError, match="pipeline stages"):
        translate(TrainingJob.of(staged), OperatorConfig())
    not_bool = {**role, "gradients": "yes"}
    with pytest.raises(InvalidSpecError, match=r"^spec\.roles\.0\.gradients"):
        translate(TrainingJob.of(job(roles=[not_bool])), OperatorConfig())


def test_priority_maps_to_the_configured_priority_class_unless_the_template_names_one():
    config = OperatorConfig(priorityClasses={100: "high"})
    assert (
        translate(TrainingJob.of(job(priority=100)), config).pod_spec["priorityClassName"] == "high"
    )
    assert "priorityClassName" not in translate(TrainingJob.of(job(priority=5)), config).pod_spec
    own = {"spec": {"priorityClassName": "mine", "containers": [{"name": "m", "image": "x"}]}}
    pod_spec = translate(TrainingJob.of(job(priority=100, template=own)), config).pod_spec
    assert pod_spec["priorityClassName"] == "mine"
    assert pod_spec["restartPolicy"] == "Never"


def test_expert_parallelism_reaches_the_gang():
    shaped = job(replicas=4, parallelism={"dp": 4, "tp": 8, "ep": 2})
    view = translate(TrainingJob.of(shaped), OperatorConfig())
    assert view.gang.shape is not None
    assert view.gang.shape.ep == 2


def test_each_worker_knows_its_pipeline_stage():
    """Ranks ordered TP, EP, PP, DP: with TP 8 on pods of 8 GPUs, stage = rank mod pp."""
    shaped = job(replicas=8, parallelism={"dp": 2, "tp": 8, "pp": 4})
    view = translate(TrainingJob.of(shaped), OperatorConfig())
    stages = [pipeline_stage(view.gang, i) for i in range(8)]
    assert stages == [0, 1, 2, 3, 0, 1, 2, 3]
    env = {
        e["name"]: e["value"]
        for e in pod(view, 5, OperatorConfig())["spec"]["containers"][0]["env"]
    }
    assert env["RACKWISE_PIPELINE_STAGE"] == "1"
    flat = translate(TrainingJob.of(job(replicas=2)), OperatorConfig())
    assert pipeline_stage(flat.gang, 1) is None


MOE = {"paramsB": 16, "activeParamsB": 3, "hidden": 4096, "layers": 16, "seq": 4096,
       "microBatches": 8, "moeShare": 1, "topk": 8}  # fmt: skip


def test_the_model_its_users_state_reaches_the_gang():
    """What the queue prices a split of its expert-parallel block by (queue/split.py)."""
    shaped = job(replicas=4, parallelism={"dp": 4, "tp": 8, "ep": 2}, model=MOE)
    gang = translate(TrainingJob.of(shaped), OperatorConfig()).gang
    assert gang.model is not None
    assert (gang.model.params_b, gang.model.active, gang.model.topk) == (16, 3, 8)
    assert gang.model.micro_batch == 1


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({**MOE, "moeShare": 2}, "spec.model.moeShare"),
        ({**MOE, "overlap": 1}, "spec.model.overlap"),
        ({**MOE, "hidden": "4k"}, "spec.model.hidden"),
        ({k: v for k, v in MOE.items() if k != "layers"}, "spec.model.layers"),
        ({**MOE, "experts": 256}, "spec.model.experts"),
    ],
)
def test_a_bad_model_names_its_field(bad, field):
    with pytest.raises(InvalidSpecError, match=field.replace(".", r"\.")):
        translate(TrainingJob.of(job(model=bad)), OperatorConfig())


def resized(spec_cpu: str, running: str, allocated: str, infeasible: bool = False) -> tuple:
    """A pod resized in place (GA in 1.35): its spec asks `spec_cpu`; its container status
    says it runs with `running` and the kubelet allocated `allocated` (API reference 1.35:
    `status.containerStatuses[].resources`, `.allocatedResources`, condition PodResizePending)."""
    spec = {"containers": [{"name": "main", **box(spec_cpu, gpu="8")}]}
    seen = {
        "name": "main",
        "resources": {"requests": {"cpu": running}},
        "allocatedResources": {"cpu": allocated, "nvidia.com/gpu": "8"},
    }
    status: dict = {"containerStatuses": [seen]}
    if infeasible:
        status["conditions"] = [
            {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}
        ]
    return spec, status


@pytest.mark.parametrize(
    ("case", "cpu"),
    [
        (resized("800m", "700m", "700m"), "0.8"),  # growing: the new spec is held already
        (resized("500m", "700m", "700m"), "0.7"),  # shrinking: not below what it runs with
        (resized("700m", "700m", "900m"), "0.9"),  # allocated, not yet running: allocated
        (resized("64", "700m", "700m", infeasible=True), "0.7"),  # never happens: what runs
    ],
)
def test_a_pod_resized_in_place_is_charged_what_its_node_holds_for_it(case, cpu):
    spec, status = case
    wanted = requests(spec, status)
    assert wanted["cpu"] == Decimal(cpu)
    assert wanted["nvidia.com/gpu"] == Decimal(8)


def test_a_sidecar_resized_in_place_counts_its_status_too():
    spec = {"containers": [box("1")], "initContainers": [{"name": "log", **box("1", "Always")}]}
    status = {"initContainerStatuses": [{"name": "log", "resources": {"requests": {"cpu": "3"}}}]}
    assert requests(spec, status)["cpu"] == Decimal(4)
