"""The reconciler's TrainingJob path without an API server: an in-memory API behind the same
protocol (`reconciler.Api`), consistent on every read. The integration suite runs the same code
against the real kube-apiserver; these cases pin the rules one by one, fast."""

from __future__ import annotations

import itertools
from concurrent.futures import wait
from typing import Any

import pytest

from scheduler.controller.config import OperatorConfig
from scheduler.controller.cycle.reconciler import CycleReport, Reconciler
from scheduler.controller.runtime.admitted import ADMITTED
from scheduler.controller.runtime.gateway import ApiError
from scheduler.controller.runtime.objects import (
    GroupApi,
    Node,
    Pod,
    PodGroup,
    QueueObject,
    TrainingJob,
)
from scheduler.controller.runtime.observability import Metrics
from scheduler.devtools.fake import node_manifest
from scheduler.topology import generate
from tests.conftest import place_raises_for

Obj = dict[str, Any]
SPEC = generate(blocks=1, racks=2, hosts=2, gpus=8)  # racks r0 (h0-0, h0-1), r1 (h1-*)
RACK = {h.name: h.domains["rack"] for h in SPEC.hosts}


class MemoryApi:
    """Nodes, pods and TrainingJobs in dicts; writes take effect at once."""

    def __init__(self, config: OperatorConfig) -> None:
        self.node_objs = {h.name: node_manifest(h, config) for h in SPEC.hosts}
        self.pod_objs: dict[tuple[str, str], Obj] = {}
        self.job_objs: dict[str, Obj] = {}
        self.podgroup_objs: list[Obj] = []
        self.queue_objs: dict[str, Obj] = {}  # team Queues by name
        self.workload_podgroup_objs: list[Obj] = []  # scheduling.k8s.io/v1alpha2 PodGroups
        self.reject: set[str] = set()  # pod names the API server refuses
        self.unserved: set[str] = set()  # namespaces the operator may not write to
        self.attempts: list[str] = []  # every pod creation asked for
        self.service_failures: dict[str, Exception] = {}  # job -> what its Service raises
        self.ids = itertools.count()
        self.linger = False  # deleted pods stay, terminating, until `gone` (as with a kubelet)

    # reads: typed views of what is stored, as the operator's reader makes them from a list
    def nodes(self) -> list[Node]:
        return [Node.of(n) for n in self.node_objs.values()]

    def pods(self) -> list[Pod]:
        return [Pod.of(p) for p in self.pod_objs.values()]

    def jobs(self) -> list[TrainingJob]:
        return [TrainingJob.of(j) for j in self.job_objs.values()]

    def queues(self) -> list[QueueObject]:
        return [QueueObject.of(q) for q in self.queue_objs.values()]

    def patch_queue_status(self, name: str, status: Obj) -> None:
        self.queue_objs[name]["status"] = status

    def set_queue_finalizers(self, name: str, finalizers: list[str]) -> None:
        """A deleted Queue goes once its last finalizer does, as the API server does it."""
        meta = self.queue_objs[name].setdefault("metadata", {})
        meta["finalizers"] = finalizers
        if meta.get("deletionTimestamp") and not finalizers:
            del self.queue_objs[name]

    def podgroups(self) -> list[PodGroup]:
        plugins = [PodGroup.of(g) for g in self.podgroup_objs]
        return plugins + [PodGroup.of_workload(g) for g in self.workload_podgroup_objs]

    def create_pod(self, namespace: str, body: Obj) -> None:
        name = body["metadata"]["name"]
        self.attempts.append(name)
        if name in self.reject:
            raise ApiError(422, f"pod {name} is forbidden")
        if (namespace, name) in self.pod_objs:
            raise ApiError(409, f"pod {name} already exists")
        meta = body["metadata"] | {"uid": f"pod-{next(self.ids)}", "resourceVersion": "1"}
        meta["namespace"] = namespace
        self.pod_objs[(namespace, name)] = body | {"metadata": meta, "status": {"phase": "Pending"}}

    def bind(self, namespace: str, pod: str, node: str, queue: str = "") -> None:
        obj = self.pod_objs[(namespace, pod)]
        if obj["spec"].get("nodeName"):
            raise ApiError(409, f"pod {pod} is already bound")
        obj["spec"]["nodeName"] = node
        if queue:  # the API server copies the Binding's annotations onto the pod
            obj["metadata"].setdefault("annotations", {})[ADMITTED] = queue
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)

    def delete_pod(self, namespace: str, pod: str) -> None:
        if not self.linger:
            self.pod_objs.pop((namespace, pod), None)
        elif (namespace, pod) in self.pod_objs:
            meta = self.pod_objs[(namespace, pod)]["metadata"]
            meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"

    def gone(self) -> None:
        """Every terminating pod's kubelet has confirmed: they are removed."""
        for key, obj in list(self.pod_objs.items()):
            if obj["metadata"].get("deletionTimestamp"):
                del self.pod_objs[key]

    def delete_job(self, namespace: str, name: str) -> None:
        self.job_objs.pop(name, None)

    def ensure_service(self, namespace: str, body: Obj) -> None:
        failure = self.service_failures.get(body["metadata"]["name"])
        if failure is not None:
            raise failure

    def patch_status(self, namespace: str, name: str, status: Obj) -> None:
        self.job_objs[name]["status"] = status

    def patch_podgroup_status(
        self, namespace: str, name: str, status: Obj, api: GroupApi = GroupApi.PLUGINS
    ) -> None:
        kept = self.podgroup_objs if api is GroupApi.PLUGINS else self.workload_podgroup_objs
        group = next(g for g in kept if g["metadata"]["name"] == name)
        group["status"] = status

    def patch_pod_status(self, namespace: str, name: str, status: Obj) -> None:
        if (namespace, name) not in self.pod_objs:  # deleted since the cycle listed it
            raise ApiError(404, f"pod {name} not found")
        self.pod_objs[(namespace, name)]["status"] |= status

    def can_write(self, namespace: str) -> bool:
        return namespace not in self.unserved

    def create_event(self, namespace: str, body: Obj) -> str:
        return f"event-{next(self.ids)}"

    def patch_event(self, namespace: str, name: str, patch: Obj) -> None:
        pass

    # what a test does
    def submit(
        self, name: str, replicas: int, at: str = "2026-12-01T00:00:00Z", **spec: Any
    ) -> None:
        self.job_objs[name] = {
            "apiVersion": "rackwise.io/v1alpha1",
            "kind": "TrainingJob",
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": f"job-{name}",
                "generation": 1,
                "creationTimestamp": at,
            },
            "spec": {
                "replicas": replicas,
                "gpusPerReplica": 8,
                "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}},
                **spec,
            },
        }

    def edit(self, name: str, **spec: Any) -> None:
        """A spec change: the API server counts a new generation."""
        job = self.job_objs[name]
        job["spec"] |= spec
        job["metadata"]["generation"] += 1

    def add_member(self, group: str, rank: int, at: str) -> None:
        """A pod of a pod group, as another controller makes it."""
        labels = {"scheduling.x-k8s.io/pod-group": group}
        meta = {"name": f"{group}-{rank}", "labels": labels, "creationTimestamp": at}
        container = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
        spec = {"schedulerName": "rackwise", "containers": [container]}
        self.create_pod(
            "default", {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
        )

    def members(self, group: str) -> list[Obj]:
        return [
            p
            for p in self.pod_objs.values()
            if p["metadata"]["labels"].get("scheduling.x-k8s.io/pod-group") == group
        ]

    def of(self, job: str) -> dict[str, Obj]:
        """The job's pods by name."""
        return {
            name: p
            for (_, name), p in self.pod_objs.items()
            if p["metadata"]["labels"].get("rackwise.io/job") == job
        }

    def nodes_of(self, job: str) -> dict[str, str | None]:
        return {name: p["spec"].get("nodeName") for name, p in self.of(job).items()}

    def reason(self, job: str) -> str | None:
        conditions = (self.job_objs[job].get("status") or {}).get("conditions") or []
        return next((c["reason"] for c in conditions if c["type"] == "Placed"), None)


@pytest.fixture
def api() -> MemoryApi:
    return MemoryApi(OperatorConfig())


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


class Driven:
    """The reconciler, each cycle followed by the pod creations it sent (they run on its API
    threads while a real operator's next cycle begins)."""

    def __init__(self, api: MemoryApi, clock: Clock, config: OperatorConfig | None = None) -> None:
        self.inner = Reconciler(api, config or OperatorConfig(), Metrics(), clock=clock)
        self.queue = self.inner.queue

    def cycle(self) -> CycleReport:
        report = self.inner.cycle()
        for launch in self.inner.launches.values():
            wait(launch.inflight.values())
        return report


@pytest.fixture
def reconciler(api: MemoryApi, clock: Clock) -> Driven:
    return Driven(api, clock)


def test_a_jobs_pods_are_made_unbound_then_bound_where_the_queue_places_them(api, reconciler):
    api.submit("train", 2)
    reconciler.cycle()
    pods = api.of("train")
    assert sorted(pods) == ["train-0", "train-1"]
    assert all(p["spec"]["schedulerName"] == "rackwise" for p in pods.values())
    assert all(not p["spec"].get("nodeName") for p in pods.values())  # nothing held yet
    report = reconciler.cycle()
    assert report.placed == 1
    assert report.pods_bound == 2
    nodes = api.nodes_of("train")
    assert len({RACK[str(n)] for n in nodes.values()}) == 1
    assert api.reason("train") == "Placed"


def test_a_half_bound_gang_is_completed_beside_its_bound_pod(api, reconciler):
    """An operator that stopped mid-binding left one pod bound: it keeps its node (and uid),
    the other is bound beside it."""
    api.submit("half", 2)
    reconciler.cycle()
    api.bind("default", "half-0", "h1-1")
    uid = api.of("half")["half-0"]["metadata"]["uid"]
    reconciler.cycle()
    assert api.nodes_of("half") == {"half-0": "h1-1", "half-1": "h1-0"}
    assert api.of("half")["half-0"]["metadata"]["uid"] == uid
    assert api.reason("half") == "Placed"


def test_a_half_bound_gang_that_may_not_be_repaired_is_placed_again_whole(api, reconciler):
    api.submit("whole", 2, repair="WholeGang")
    reconciler.cycle()
    api.bind("default", "whole-0", "h1-1")
    reconciler.cycle()
    assert api.of("whole") == {}  # rolled back: every pod deleted
    assert api.reason("whole") == "IncompleteGang"
    reconciler.cycle()  # made again
    reconciler.cycle()  # and placed
    assert all(api.nodes_of("whole").values())


def test_a_failed_creation_deletes_the_pods_it_made_and_waits_its_backoff(api, reconciler, clock):
    api.reject.add("shy-1")
    api.submit("shy", 3)
    reconciler.cycle()
    assert api.of("shy") == {}
    assert api.reason("shy") == "PodRejected"
    tried = len(api.attempts)
    reconciler.cycle()  # backing off: nothing is made again yet
    assert len(api.attempts) == tried
    api.reject.clear()
    clock.now += 600
    reconciler.cycle()
    reconciler.cycle()
    assert all(api.nodes_of("shy").values())


def test_a_gang_whose_service_fails_makes_no_pod_and_the_others_are_made(api, reconciler, clock):
    """Services are created together: one refused, or one that raises the unexpected, keeps
    its own job's pods from being made (and backs it off), never another job's."""
    api.service_failures = {"refused": ApiError(403, "forbidden"), "odd": RuntimeError("odd")}
    for name in ("refused", "odd", "fine"):
        api.submit(name, 2)
    reconciler.cycle()
    reconciler.cycle()
    assert api.of("refused") == {}
    assert api.of("odd") == {}
    assert api.reason("refused") == api.reason("odd") == "BindFailed"
    assert all(api.nodes_of("fine").values())
    api.service_failures = {}
    clock.now += 600  # after its backoff: its pods are made
    reconciler.cycle()
    assert len(api.of("refused")) == 2


def test_lost_pods_are_made_again_and_bound_near_the_survivors(api, reconciler):
    api.submit("phoenix", 3)
    reconciler.cycle()
    reconciler.cycle()
    before = api.nodes_of("phoenix")
    lost = before["phoenix-0"]
    del api.node_objs[str(lost)]
    reconciler.cycle()  # the lost pod is deleted
    assert "phoenix-0" not in api.of("phoenix")
    reconciler.cycle()  # made again, unbound
    assert api.nodes_of("phoenix")["phoenix-0"] is None
    reconciler.cycle()  # bound near the others
    after = api.nodes_of("phoenix")
    assert after["phoenix-0"] not in (None, lost)
    assert {k: v for k, v in after.items() if k != "phoenix-0"} == {
        k: v for k, v in before.items() if k != "phoenix-0"
    }
    assert api.reason("phoenix") == "Placed"


def test_a_waiting_job_and_a_pod_group_wait_in_one_queue_in_arrival_order(api, reconciler):
    """Both wait as gangs of unbound pods in the same queue. When the fabric frees, the group
    (3 hosts, earlier) starts and the job (2 hosts, later) keeps waiting: the other order
    would start the job and leave the group waiting."""
    api.submit("fill", 4)
    reconciler.cycle()
    reconciler.cycle()
    for rank in range(3):
        api.add_member("g", rank, at="2026-12-01T00:00:01Z")
    api.podgroup_objs.append(
        {"metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 3}}
    )
    api.submit("later", 2, at="2026-12-01T00:00:02Z")
    for _ in range(3):
        reconciler.cycle()
    assert {"podgroup:default/g", "job-later"} <= reconciler.queue.keys()
    for name in api.of("fill"):
        api.delete_pod("default", name)
    del api.job_objs["fill"]
    reconciler.cycle()
    assert all(p["spec"].get("nodeName") for p in api.members("g"))
    assert not any(api.nodes_of("later").values())


def gpus(pod: Obj) -> str:
    return str(pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])


def test_a_waiting_jobs_pods_are_made_again_when_its_spec_is_edited(api, reconciler):
    """Its unbound pods were made from the old spec: bound as they are, they would ask for
    other GPUs than the gang was placed for."""
    api.submit("fill", 4)
    api.submit("edited", 1, at="2026-12-01T00:00:05Z")
    for _ in range(2):
        reconciler.cycle()
    assert [gpus(p) for p in api.of("edited").values()] == ["8"]
    api.edit("edited", gpusPerReplica=4, replicas=2)
    for _ in range(2):
        reconciler.cycle()
    assert sorted(api.of("edited")) == ["edited-0", "edited-1"]
    assert [gpus(p) for p in api.of("edited").values()] == ["4", "4"]
    assert not any(api.nodes_of("edited").values())


def test_a_running_gang_whose_size_shrinks_is_placed_again_at_its_new_size(api, reconciler):
    api.submit("shrink", 3)
    for _ in range(2):
        reconciler.cycle()
    assert all(api.nodes_of("shrink").values())
    api.edit("shrink", replicas=2)
    reconciler.cycle()
    assert api.of("shrink") == {}
    assert api.reason("shrink") == "Resized"
    for _ in range(2):
        reconciler.cycle()
    assert sorted(api.nodes_of("shrink")) == ["shrink-0", "shrink-1"]
    assert all(api.nodes_of("shrink").values())


def scheduled(api: MemoryApi, group: str) -> Obj:
    podgroup = next(g for g in api.podgroup_objs if g["metadata"]["name"] == group)
    conditions = (podgroup.get("status") or {}).get("conditions") or []
    return next(c for c in conditions if c["type"] == "Scheduled")


def test_a_pod_groups_condition_says_why_it_waits_then_that_it_is_scheduled(api, reconciler):
    api.submit("fill", 4)
    for _ in range(2):
        reconciler.cycle()
    for rank in range(2):
        api.add_member("g", rank, at="2026-12-01T00:00:01Z")
    api.podgroup_objs.append(
        {"metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}}
    )
    reconciler.cycle()
    waiting = scheduled(api, "g")
    assert (waiting["status"], waiting["reason"]) == ("False", "Unplaceable")
    for name in api.of("fill"):
        api.delete_pod("default", name)
    del api.job_objs["fill"]
    reconciler.cycle()
    done = scheduled(api, "g")
    assert (done["status"], done["reason"]) == ("True", "Scheduled")


def pod_scheduled(pod: Obj) -> tuple[str, str, str] | None:
    conditions = (pod.get("status") or {}).get("conditions") or []
    found = [c for c in conditions if c["type"] == "PodScheduled"]
    return (found[0]["status"], found[0]["reason"], found[0]["message"]) if found else None


class Counting(MemoryApi):
    def __init__(self, config: OperatorConfig) -> None:
        super().__init__(config)
        self.pod_patches = 0
        self.events: list[Obj] = []

    def patch_pod_status(self, namespace: str, name: str, status: Obj) -> None:
        self.pod_patches += 1
        super().patch_pod_status(namespace, name, status)

    def create_event(self, namespace: str, body: Obj) -> str:
        self.events.append(body)
        return super().create_event(namespace, body)


def test_pending_pods_say_why_they_wait_once_per_change_and_never_fits_is_not_a_wait():
    """A job waiting for capacity: its pods say PodScheduled=False Unschedulable with the job's
    message and get a FailedScheduling event; cycles that change nothing write nothing. A job
    larger than the fabric is NeverFits, on the job and on its pods."""
    api, clock = Counting(OperatorConfig()), Clock()
    reconciler = Driven(api, clock)
    api.submit("fill", 4)
    api.submit("waits", 1, at="2026-12-01T00:00:05Z")
    api.submit("huge", 5, at="2026-12-01T00:00:06Z")
    for _ in range(2):
        reconciler.cycle()
    [pod] = api.of("waits").values()
    message = api.job_objs["waits"]["status"]["conditions"][0]["message"]
    assert pod_scheduled(pod) == ("False", "Unschedulable", message)
    assert api.reason("huge") == "NeverFits"
    assert {pod_scheduled(p)[1] for p in api.of("huge").values()} == {"NeverFits"}
    failed = [e for e in api.events if e["reason"] == "FailedScheduling"]
    assert {e["involvedObject"]["name"] for e in failed} == {"waits-0", *api.of("huge")}
    assert failed[0]["message"].startswith(("Unplaceable: ", "NeverFits: "))
    writes = api.pod_patches
    for _ in range(3):
        reconciler.cycle()
    assert api.pod_patches == writes
    assert len([e for e in api.events if e["reason"] == "FailedScheduling"]) == len(failed)


def test_a_pod_groups_waiting_members_say_why_too(api, reconciler):
    api.submit("fill", 4)
    for _ in range(2):
        reconciler.cycle()
    api.add_member("g", 0, at="2026-12-01T00:00:01Z")
    api.podgroup_objs.append(
        {"metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}}
    )
    reconciler.cycle()
    [member] = api.members("g")
    status, reason, message = pod_scheduled(member)
    assert (status, reason) == ("False", "GroupIncomplete")
    assert message == scheduled(api, "g")["message"]


def test_a_member_that_ran_and_finished_counts_toward_min_member(api, reconciler):
    """An operator bound one member of a group of two and stopped; the member ran and
    finished before this one took over. Its sibling is placed, not left waiting for a second
    member that will never arrive."""
    for rank in range(2):
        api.add_member("g", rank, at="2026-12-01T00:00:01Z")
    api.podgroup_objs.append(
        {"metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}}
    )
    first, second = sorted(api.members("g"), key=lambda p: p["metadata"]["name"])
    api.bind("default", first["metadata"]["name"], "h0-0")
    first["status"]["phase"] = "Succeeded"
    reconciler.cycle()
    assert second["spec"].get("nodeName")


def test_objects_of_namespaces_not_served_are_left_alone_and_reported_once():
    """A job in kube-system (protected) and one in a namespace without the RoleBinding: no
    pod is made for either; one event each in the operator's namespace names it and why, and
    the gauge counts them; the job in `default` is scheduled."""
    api, clock = Counting(OperatorConfig()), Clock()
    api.unserved.add("tenant-x")
    reconciler = Driven(api, clock)
    for name, namespace in (("sys", "kube-system"), ("theirs", "tenant-x"), ("mine", "default")):
        api.submit(name, 1)
        api.job_objs[name]["metadata"]["namespace"] = namespace
    for _ in range(3):
        reconciler.cycle()
    assert set(api.of("mine")) == {"mine-0"}
    assert not api.of("sys")
    assert not api.of("theirs")
    refused = [e for e in api.events if e["metadata"]["namespace"] == "rackwise-system"]
    assert sorted(e["reason"] for e in refused) == ["NamespaceNotServed", "ProtectedNamespace"]
    assert any("TrainingJob tenant-x/theirs is not scheduled" in e["message"] for e in refused)
    gauge = reconciler.inner.metrics.ignored
    assert gauge.labels("ProtectedNamespace")._value.get() == 1
    assert gauge.labels("NamespaceNotServed")._value.get() == 1
    del api.job_objs["theirs"]
    reconciler.cycle()
    assert gauge.labels("NamespaceNotServed")._value.get() == 0


def test_a_placement_that_raises_is_a_failure_reported_and_the_others_go_on(
    api, reconciler, monkeypatch
):
    """The same queue failure the simulator stops on (test_engine): the operator counts it,
    logs its stack, and places the other jobs."""
    place_raises_for(monkeypatch, "default/bad")
    api.submit("bad", 1)
    api.submit("good", 1, at="2026-12-01T00:00:01Z")
    reconciler.cycle()
    report = reconciler.cycle()
    assert report.errors == 1
    assert reconciler.inner.metrics.job_errors._value.get() == 1
    assert all(api.nodes_of("good").values())
    assert not any(api.nodes_of("bad").values())


def test_a_creation_that_raises_the_unexpected_stops_only_its_own_job(api, reconciler):
    """A bug in building one job's pods is logged against that job; the others are placed."""
    build = reconciler.inner.launcher.build

    def broken(launch, rank):
        if launch.view.name == "cursed":
            raise RuntimeError("a bug in building this job's pods")
        return build(launch, rank)

    reconciler.inner.launcher.build = broken
    api.submit("cursed", 1)
    api.submit("fine", 1)
    errors = sum(reconciler.cycle().errors for _ in range(3))
    assert errors >= 1
    assert all(api.nodes_of("fine").values())
    assert api.of("cursed") == {}


def test_a_pods_message_for_the_same_reason_is_refreshed_at_most_once_a_minute():
    """A waiting gang's message changes with every start elsewhere (free GPUs): its pods are
    rewritten at once on a new reason, and for a new message of the same reason only after
    REFRESH_S (a 1,000-pod gang would otherwise cost 1,000 writes per change)."""
    from scheduler.controller.pods.podwhy import REFRESH_S

    api, clock = Counting(OperatorConfig()), Clock()
    reconciler = Driven(api, clock)
    raw = {"metadata": {"uid": "p", "name": "p", "namespace": "default"}, "spec": {}}
    api.pod_objs[("default", "p")] = {**raw, "status": {}}
    pods = [Pod.of(raw)]
    why = reconciler.inner.why
    why.tell(pods, "Unplaceable", "8 GPUs free")
    writes = api.pod_patches
    assert writes == 1
    clock.now += 1
    why.tell(pods, "Unplaceable", "16 GPUs free")
    assert api.pod_patches == writes
    why.tell(pods, "NeverFits", "never")
    assert api.pod_patches == writes + 1
    why.tell(pods, "NeverFits", "never, again")
    assert api.pod_patches == writes + 1
    clock.now += REFRESH_S
    why.tell(pods, "NeverFits", "never, again")
    assert api.pod_patches == writes + 2


def test_the_wall_clock_is_injected_a_finished_job_goes_when_its_ttl_has_passed(api):
    """Timestamps from the API (completion, creation) are read against the injected wall
    clock, not the machine's: a test can drive it, as it drives the queue's clock."""
    from scheduler.controller.runtime import status as st

    done = "2026-12-01T00:00:00Z"
    wall = Clock()
    wall.now = st.seconds(done) + 30
    reconciler = Reconciler(api, OperatorConfig(), Metrics(), clock=Clock(), wall=wall)
    api.submit("finished", 1, ttlSecondsAfterFinished=60)
    api.job_objs["finished"]["status"] = {"phase": "Succeeded", "completionTime": done}
    reconciler.cycle()
    assert "finished" in api.job_objs
    wall.now += 31
    reconciler.cycle()
    assert "finished" not in api.job_objs


def test_a_deleted_jobs_terminating_pods_stay_reserved_for_the_blocked_gang(api, reconciler):
    """first holds a host; big (all 4 hosts) is blocked and reserves them; small waits for the
    reservation. first is deleted and its pod terminates slowly: it still holds its host but
    no job lists it as running. Its gang is leaving (binding/leaving.py), so big's reservation
    still counts on that host coming back and small is not backfilled onto a host big needs;
    once the pod is gone, big is placed."""
    api.linger = True
    api.submit("first", 1)
    reconciler.cycle()
    reconciler.cycle()
    assert all(api.nodes_of("first").values())
    api.submit("big", 4, at="2026-12-01T00:01:00Z")
    api.submit("small", 1, at="2026-12-01T00:02:00Z")
    for _ in range(3):
        reconciler.cycle()
    assert api.reason("small") == "WaitingForReservation"
    del api.job_objs["first"]
    for _ in range(3):
        reconciler.cycle()
    assert api.of("first")["first-0"]["metadata"].get("deletionTimestamp")
    small_waits_until_the_pods_are_gone(api, reconciler)


def test_a_pod_groups_terminating_member_stays_reserved_for_the_blocked_gang(api, reconciler):
    """A pod group's member holds a host and is being deleted (its group is never listed as
    running). big (all 4 hosts) arrives: its reservation counts on that host coming back
    (binding/leaving.py), so small waits instead of being backfilled onto a host big needs."""
    api.linger = True
    api.add_member("g", 0, at="2026-12-01T00:00:00Z")
    api.podgroup_objs.append(
        {"metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 1}}
    )
    reconciler.cycle()
    [member] = api.members("g")
    assert member["spec"].get("nodeName")
    api.delete_pod("default", member["metadata"]["name"])
    api.submit("big", 4, at="2026-12-01T00:01:00Z")
    api.submit("small", 1, at="2026-12-01T00:02:00Z")
    for _ in range(3):
        reconciler.cycle()
    small_waits_until_the_pods_are_gone(api, reconciler)


def small_waits_until_the_pods_are_gone(api: MemoryApi, reconciler: Driven) -> None:
    """small is not backfilled onto the host the terminating pods hold for big; once they are
    gone, big takes every host."""
    assert not any(api.nodes_of("small").values())
    assert api.reason("small") == "WaitingForReservation"
    api.gone()
    for _ in range(2):
        reconciler.cycle()
    assert all(api.nodes_of("big").values())
    assert not any(api.nodes_of("small").values())
