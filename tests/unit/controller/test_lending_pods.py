"""What lending changes in the pods and gangs the operator reads and makes: a borrowing pool's
TrainingJob pods may run on a lender's nodes (pool affinity `In`, the lender's toleration added
by rackwise); a pod group's pods are lent to only where they tolerate the lender's taint."""

from __future__ import annotations

from scheduler.controller.config import OperatorConfig
from scheduler.controller.podgroup.members import GROUP_LABEL, Members, gang
from scheduler.controller.runtime.objects import Pod, TrainingJob
from scheduler.controller.trainingjob.pods import pod
from scheduler.controller.trainingjob.translate import translate
from scheduler.model.constraints import MatchOperator
from scheduler.model.policy import LendingMode, SchedulingPolicy
from scheduler.pools import Lending, PoolSpec

LENDS = OperatorConfig(
    pool_list=(
        PoolSpec(name="training", objective="pack"),
        PoolSpec(name="batch-inference", objective="fill", borrow=True),
        PoolSpec(name="online-inference", objective="spread", lend=Lending()),
    )
)


def job(pool: str) -> dict:
    return {
        "metadata": {"name": "j", "namespace": "ns", "uid": "j"},
        "spec": {
            "replicas": 1,
            "gpusPerReplica": 8,
            "pool": pool,
            "template": {"spec": {"containers": [{"name": "m", "image": "x"}]}},
        },
    }


def test_a_borrowing_pools_pods_may_run_on_the_lenders_nodes():
    view = translate(TrainingJob.of(job("batch-inference")), LENDS)
    made = pod(view, 0, LENDS)["spec"]
    assert "rackwise.io/pool" not in (made.get("nodeSelector") or {})
    [term] = made["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert {
        "key": "rackwise.io/pool",
        "operator": "In",
        "values": ["batch-inference", "online-inference"],
    } in term["matchExpressions"]
    assert {t["value"] for t in made["tolerations"]} == {"batch-inference", "online-inference"}
    constraints = view.gang.constraints
    [[anywhere]] = constraints.affinity
    assert anywhere.operator is MatchOperator.IN
    assert {t.value for t in constraints.tolerations} == {"batch-inference", "online-inference"}


def test_pools_that_do_not_borrow_and_lending_off_keep_their_pool_selector():
    off = LENDS.model_copy(update={"scheduling": SchedulingPolicy(lending=LendingMode.OFF)})
    for config, pool in ((LENDS, "training"), (off, "batch-inference")):
        made = pod(translate(TrainingJob.of(job(pool)), config), 0, config)["spec"]
        assert made["nodeSelector"] == {"rackwise.io/pool": pool}
        assert {t["value"] for t in made["tolerations"]} == {pool}


def group_pod(tolerates: bool) -> dict:
    tolerations = [
        {"key": "rackwise.io/pool", "operator": "Equal", "value": p, "effect": "NoSchedule"}
        for p in (["batch-inference", "online-inference"] if tolerates else ["batch-inference"])
    ]
    return {
        "metadata": {
            "name": "p0",
            "namespace": "default",
            "labels": {GROUP_LABEL: "g", "rackwise.io/pool": "batch-inference"},
        },
        "spec": {
            "schedulerName": "rackwise",
            "tolerations": tolerations,
            "containers": [
                {"name": "m", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
            ],
        },
    }


def test_a_pod_group_is_lent_to_only_where_its_pods_tolerate_the_lender():
    for tolerates in (False, True):
        pods = [group_pod(tolerates)]
        views = [Pod.of(p) for p in pods]
        request, _ = gang(Members("default", "g", views, None), views, LENDS)
        values = {t.value for t in request.constraints.tolerations}
        assert ("online-inference" in values) is tolerates
