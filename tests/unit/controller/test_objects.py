"""Typed views of the API's objects (runtime/objects.py): what each field is read as, its default
when absent, an unreadable value kept as its reason instead of raised; and no module of the
operator below the reader indexes the API's JSON itself."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

from scheduler.controller.runtime import status as st
from scheduler.controller.runtime.leader import Lease
from scheduler.controller.runtime.objects import (
    Condition,
    JobState,
    Node,
    Pod,
    PodGroup,
    TrainingJob,
)

OURS = {"apiVersion": "rackwise.io/v1alpha1", "kind": "TrainingJob", "uid": "j1", "name": "j"}


def test_a_pod_as_the_operator_reads_it():
    pod = Pod.of(
        {
            "metadata": {
                "name": "p",
                "namespace": "ns",
                "uid": "u",
                "resourceVersion": "7",
                "deletionTimestamp": "2026-01-01T00:00:00Z",
                "ownerReferences": [{**OURS, "controller": True}],
            },
            "spec": {
                "nodeName": "h1",
                "schedulerName": "rackwise",
                "priority": 5,
                "containers": [{"name": "a", "resources": {"requests": {"cpu": "500m"}}}],
                "initContainers": [{"name": "i", "resources": {"limits": {"cpu": "2"}}}],
                "overhead": {"cpu": "100m"},
            },
            "status": {
                "phase": "Running",
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "PodScheduled", "status": "True", "reason": "Bound"},
                ],
            },
        }
    )
    assert (pod.node, pod.scheduler, pod.priority, pod.phase) == ("h1", "rackwise", 5, "Running")
    assert pod.meta.deleting
    assert pod.meta.version == "7"
    assert pod.meta.key == "u"
    assert pod.owner_job == "j1"
    assert pod.requests == {"cpu": Decimal("2.1")}  # the init container's 2 + the overhead
    assert pod.scheduled == Condition("PodScheduled", "True", "Bound")


def test_absent_fields_take_their_defaults_and_a_bad_quantity_is_kept_as_its_reason():
    bare = Pod.of({"metadata": {"name": "p"}})
    assert (bare.node, bare.phase, bare.priority, bare.owner_job) == (None, None, None, None)
    assert bare.meta.key == "/p"
    assert bare.requests == {}
    bad = Pod.of({"spec": {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]}})
    assert bad.requests is None
    assert "lots" in bad.unreadable
    # owned only through a controller reference of a TrainingJob
    other = {**OURS, "kind": "Job", "controller": True}
    assert Pod.of({"metadata": {"ownerReferences": [other]}}).owner_job is None
    assert Pod.of({"metadata": {"ownerReferences": [OURS]}}).owner_job is None


def test_a_node_its_allocatable_taints_and_readiness():
    node = Node.of(
        {
            "metadata": {"name": "h1", "labels": {"rack": "r1"}},
            "spec": {"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {
                "allocatable": {"nvidia.com/gpu": 8, "cpu": "64"},
                "conditions": [{"type": "Ready", "status": "False"}],
            },
        }
    )
    assert node.name == "h1"
    assert node.meta.labels == {"rack": "r1"}
    assert node.allocatable == {"nvidia.com/gpu": "8", "cpu": "64"}
    assert node.unschedulable
    assert not node.ready
    assert [(t.key, t.value, t.effect) for t in node.taints] == [("k", "", "NoSchedule")]
    assert Node.of({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}).ready


def test_kubectls_copy_of_the_applied_object_is_not_kept():
    notes = {"kubectl.kubernetes.io/last-applied-configuration": "{...}", "a": "b"}
    job = TrainingJob.of({"metadata": {"annotations": notes}, "spec": {}})
    assert job.meta.annotations == {"a": "b"}


def test_a_training_job_its_templates_and_its_status():
    raw = {
        "metadata": {"name": "j", "namespace": "ns", "uid": "j1", "generation": 3},
        "spec": {
            "replicas": 4,
            "ttlSecondsAfterFinished": 60,
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}},
            "roles": [{"replicas": 1, "template": {"spec": {"hostNetwork": False}}}],
        },
        "status": {"phase": "Running", "restarts": 2, "conditions": [{"type": "Placed"}]},
    }
    job = TrainingJob.of(raw)
    assert job.key == "ns/j"
    assert job.meta.generation == 3
    assert job.ttl_s == 60
    assert job.template() == ({"labels": {"a": "b"}}, {"containers": []})
    assert job.template(0) == ({}, {"hostNetwork": False})
    assert job.template(5) == ({}, {})  # parsed first: a role it lacks is an empty template
    assert job.pods_asked == 5
    assert (job.status.phase, job.status.restarts) == ("Running", 2)
    assert TrainingJob.of({"spec": "nonsense"}).spec is None  # the parser reports it
    odd = TrainingJob.of({"status": {"gpus": "x", "restarts": "two", "conditions": ["?"]}})
    assert (odd.status.gpus, odd.status.restarts, odd.status.conditions) == (0, 0, ())


def test_a_status_written_and_read_back_is_the_same_and_transition_times_do_not_count():
    meta = TrainingJob.of({"metadata": {"generation": 2}}).meta
    placed = st.condition("Placed", True, "Placed", "4 pods", ())
    new = st.build(meta, JobState(), "Placed", [placed], 32, {"domains": {"rack": 1}})
    assert JobState.of(st.body(new)) == new
    later = Condition("Placed", "True", "Placed", "4 pods", since="2030-01-01T00:00:00Z")
    assert new == JobState.of({**st.body(new), "conditions": [later.body()]})
    assert new != JobState.of({**st.body(new), "gpus": 8})


def test_a_pod_group_reads_only_sizes_and_timeouts_it_can_use():
    good = PodGroup.of({"spec": {"minMember": 4, "scheduleTimeoutSeconds": 30}})
    assert (good.min_member, good.timeout_s) == (4, 30.0)
    bad = PodGroup.of({"spec": {"minMember": "4", "scheduleTimeoutSeconds": 0}})
    assert (bad.min_member, bad.timeout_s) == (None, None)


def test_a_lease():
    lease = Lease.of(
        {
            "metadata": {"resourceVersion": "9"},
            "spec": {"holderIdentity": "a", "renewTime": "t", "leaseDurationSeconds": 15},
        }
    )
    assert (lease.version, lease.holder, lease.duration_s, lease.transitions) == ("9", "a", 15, 0)


# the modules that read the API's JSON: the gateway (it sends and receives it), the informer
# cache (it trims pods before their views are made) and the views themselves
READERS = {"runtime/gateway.py", "runtime/cache.py", "runtime/objects.py"}
RAW = re.compile(r"""\[["'](metadata|spec|status)["']\]|\.get\(["'](metadata|spec|status)["']""")


def test_no_module_below_the_reader_indexes_the_apis_json():
    root = Path(__file__).parents[3] / "scheduler" / "controller"
    found = [
        f"{path.relative_to(root)}:{n}: {line.strip()}"
        for path in sorted(root.rglob("*.py"))
        if str(path.relative_to(root)) not in READERS
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if RAW.search(line)
    ]
    assert not found, "\n".join(found)
