"""The informer cache and the expectations that give the reconciler read-your-writes, with a
scripted source (the real API server runs them in tests/integration)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from scheduler.controller.operator import Cached
from scheduler.controller.runtime import cache as informers
from scheduler.controller.runtime.cache import QUEUES, Cache, Informer, wake_on_changes
from scheduler.controller.runtime.expect import Expectations
from scheduler.controller.runtime.gateway import ApiError
from scheduler.controller.runtime.objects import Pod
from scheduler.model import GangRequest, Placement, PlacementStatus, PodAssignment
from scheduler.placement.snapshot import Snapshot
from scheduler.topology import Fabric, generate
from tests.waits import until


def obj(uid: str, version: str, name: str = "", node: str = "") -> dict:
    return {
        "metadata": {
            "uid": uid,
            "name": name or uid,
            "namespace": "ns",
            "resourceVersion": version,
        },
        "spec": {"nodeName": node} if node else {},
    }


def pod(uid: str, version: str, name: str = "", node: str = "") -> Pod:
    return Pod.of(obj(uid, version, name, node))


class Script:
    """list() answers in turn; each watch() plays its events, then ends or fails."""

    def __init__(self, lists, watches, stop: threading.Event) -> None:
        self.lists, self.watches, self.stop = list(lists), list(watches), stop
        self.asked: list[tuple[str, str]] = []

    def list_raw(self, path: str, keep) -> tuple[list[dict], str]:
        self.asked.append(("list", ""))
        items, version = self.lists.pop(0)
        return [keep(o) for o in items], version

    def watch_raw(self, path: str, version: str, seconds: int) -> Iterator[tuple[str, dict]]:
        self.asked.append(("watch", version))
        if not self.watches:
            self.stop.set()
            return
        events, failure = self.watches.pop(0)
        yield from events
        if failure is not None:
            raise failure


def run(lists, watches) -> tuple[Informer, Script]:
    stop = threading.Event()
    script = Script(lists, watches, stop)
    informer = Informer(script, "/api/v1/pods", lambda: None, Pod.of)
    informer.run(stop)
    return informer, script


def test_listed_once_then_kept_by_events_resuming_from_the_last_version():
    informer, script = run(
        [([obj("a", "1"), obj("b", "2")], "5")],
        [
            ([("ADDED", obj("c", "6")), ("DELETED", obj("a", "7"))], None),  # the watch times out
            ([("MODIFIED", obj("b", "8", node="n1")), ("BOOKMARK", obj("", "9"))], None),
        ],
    )
    assert {o.meta.uid for o in informer.items()} == {"b", "c"}
    assert informer.objects["b"].node == "n1"
    assert script.asked == [("list", ""), ("watch", "5"), ("watch", "7"), ("watch", "9")]
    assert informer.lists == 1


def test_gone_lists_again_and_drops_what_vanished_meanwhile():
    informer, script = run(
        [([obj("a", "1")], "5"), ([obj("z", "20")], "21")],
        [([("ADDED", obj("b", "6"))], ApiError(410, "too old")), ([], None)],
    )
    assert {o.meta.uid for o in informer.items()} == {"z"}
    assert informer.lists == 2
    assert script.asked[-1] == ("watch", "21")


def queue(uid: str, version: str, gpus: int) -> dict:
    spec = {"quotas": [{"pool": "training", "gpus": gpus}]}
    return {"metadata": {"uid": uid, "name": uid, "resourceVersion": version}, "spec": spec}


class Lister:
    """A gateway that counts the Queue lists asked of it."""

    def __init__(self) -> None:
        self.listed = 0

    def queues(self) -> list[dict]:
        self.listed += 1
        return [queue("listed", "1", 8)]


def test_queues_are_watched_and_read_from_the_cache_once_synced():
    """A team's edit to its quota reaches the operator by a watch event, not by a list each
    cycle; until the first list the reader lists, so the cache is never worse."""
    stop = threading.Event()
    script = Script(
        [([queue("research", "3", 16)], "4")],
        [([("MODIFIED", queue("research", "5", 32)), ("ADDED", queue("serving", "6", 8))], None)],
        stop,
    )
    cache = Cache(script, lambda: None)
    gateway = Lister()
    reader = Cached(gateway, lambda: True, cache)
    assert [q.meta.name for q in reader.queues()] == ["listed"]  # not synced: listed
    cache.queues.run(stop)
    assert cache.queues.path == QUEUES
    read = {q.meta.name: q.spec for q in reader.queues()}
    assert read == {
        "research": {"quotas": [{"pool": "training", "gpus": 32}]},
        "serving": {"quotas": [{"pool": "training", "gpus": 8}]},
    }
    assert gateway.listed == 1
    assert cache.queues in cache.informers  # the operator waits for it before the first cycle


FABRIC = Fabric(generate(blocks=1, racks=1, hosts=2, gpus=8))
GANG = GangRequest(name="ns/g", pods=2, gpus_per_pod=8)
PLACED = Placement(
    gang="ns/g",
    policy="rackwise",
    status=PlacementStatus.PLACED,
    pods=(
        PodAssignment(rank=0, host=FABRIC.spec.hosts[0].name),
        PodAssignment(rank=1, host=FABRIC.spec.hosts[1].name),
    ),
)


def test_an_owner_waits_until_the_cache_shows_its_pods_bound_and_their_hosts_stay_charged():
    now = [0.0]
    expect = Expectations(lambda: now[0], patience=30)
    expect.bound("u", GANG, PLACED, ["g-0", "g-1"])
    h0, h1 = FABRIC.spec.hosts[0].name, FABRIC.spec.hosts[1].name
    seen = [pod("p0", "1", "g-0", node=h0)]
    expect.settle(seen)
    assert expect.waiting("u")
    snapshot = Snapshot(FABRIC)
    expect.reserve(snapshot, seen)  # g-1 is not shown: its host is charged, g-0's is not
    free = dict(zip([h.name for h in FABRIC.spec.hosts], snapshot.free_gpus.tolist(), strict=True))
    assert free == {h0: 8, h1: 0}
    expect.settle([*seen, pod("p1", "2", "g-1", node=h1)])
    assert not expect.waiting("u")


def test_deleted_pods_must_vanish_and_an_unmet_expectation_expires():
    now = [0.0]
    expect = Expectations(lambda: now[0], patience=30)
    stale = [pod("p0", "1", "g-0")]
    expect.gone("u", stale)
    expect.settle(stale)
    assert expect.waiting("u")
    now[0] = 31.0
    expect.settle(stale)
    assert not expect.waiting("u")


def test_what_the_operator_never_reads_is_not_kept():
    fat = obj("a", "1")
    fat["metadata"]["managedFields"] = [{"manager": "kubectl"}] * 50
    fat["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": "{...}",
        "rackwise.io/node": "h1",
    }
    informer, _ = run([([fat], "5")], [([("MODIFIED", fat)], None)])
    [kept] = informer.items()
    assert kept.meta.annotations == {"rackwise.io/node": "h1"}


def test_a_pod_seen_bound_and_deleted_since_is_not_charged_and_gone_owners_expect_nothing():
    expect = Expectations(lambda: 0.0, patience=30)
    expect.bound("u", GANG, PLACED, ["g-0", "g-1"])
    h0 = FABRIC.spec.hosts[0].name
    expect.settle([pod("p0", "1", "g-0", node=h0)])  # g-0 shown, g-1 not yet
    snapshot = Snapshot(FABRIC)
    expect.reserve(snapshot, [])  # g-0 deleted since (its job was): only g-1 is charged
    assert sorted(snapshot.free_gpus.tolist()) == [0, 8]
    expect.forget(set())
    assert not expect.waiting("u")


def test_the_cached_pod_reads_as_the_listed_one_on_todays_fields():
    """The informer trims a pod's spec to what the operator reads: nothing it reads may go
    (gates, claims, pod-level resources, sidecars, the Workload API's group, a resize)."""
    from scheduler.controller.runtime.cache import pod_view

    sidecar = {"name": "log", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}
    main = {"name": "main", "image": "x", "env": [{"name": "A", "value": "1"}]}
    main["resources"] = {"requests": {"cpu": "2", "nvidia.com/gpu": "8"}}
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {
            "schedulerName": "rackwise",
            "containers": [main],
            "initContainers": [sidecar],
            "resources": {"requests": {"memory": "1Gi"}},
            "schedulingGates": [{"name": "example.com/gate"}],
            "resourceClaims": [{"name": "gpus", "resourceClaimName": "c"}],
            "schedulingGroup": {"podGroupName": "g"},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone"}],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}},
            "volumes": [{"name": "v", "emptyDir": {}}],
        },
        "status": {
            "nominatedNodeName": "h1",
            "containerStatuses": [{"name": "main", "resources": {"requests": {"cpu": "3"}}}],
        },
    }
    listed, cached = Pod.of(pod), pod_view(pod)
    for name in ("requests", "gates", "claims", "nominated", "where"):
        assert getattr(cached, name) == getattr(listed, name), name
    for field in ("schedulingGroup", "topologySpreadConstraints", "affinity"):
        assert cached.spec[field] == pod["spec"][field], field
    assert "volumes" not in cached.spec


def test_without_the_cache_each_kind_it_keeps_is_watched_for_wakes():
    """informerCache off: the loop lists each cycle, and a watch of each kind the cache would
    keep wakes it: Queues and both PodGroups too, not only nodes, pods and TrainingJobs."""
    stop = threading.Event()
    asked: list[str] = []

    class Quiet:
        def watch_raw(self, path: str, version: str, seconds: int) -> Iterator[tuple[str, dict]]:
            asked.append(path)
            stop.wait()  # nothing changes until the test ends
            return iter(())

        def list_raw(self, path: str, keep) -> tuple[list[dict], str]:
            raise AssertionError("a watch for wakes lists nothing")

    threads = wake_on_changes(Quiet(), lambda: None, stop)
    until("every kind watched", lambda: len(asked) == len(Cache(Quiet(), print).informers), 10)
    stop.set()
    for thread in threads:
        thread.join(timeout=10)
    assert sorted(asked) == sorted(i.path for i in Cache(Quiet(), print).informers)
    assert QUEUES in asked


def test_a_watch_for_wakes_wakes_on_changes_and_failures_not_on_bookmarks_or_absent_kinds(
    monkeypatch,
):
    """Two changes and a bookmark, then a failed watch (wake: the loop lists), then a kind not
    served (404: no wake, no warning, asked again later), then the test stops it."""
    monkeypatch.setattr(informers, "ABSENT_RETRY_S", 0.0)
    stop = threading.Event()
    script = Script(
        [],
        [
            (
                [("ADDED", obj("a", "1")), ("BOOKMARK", obj("", "2")), ("MODIFIED", obj("a", "3"))],
                ApiError(500, "broken"),
            ),
            ([], ApiError(404, "the server could not find the requested resource")),
        ],
        stop,
    )
    wakes: list[int] = []
    informers._wake_on(script, QUEUES, lambda: wakes.append(1), stop)
    assert len(wakes) == 3
    assert script.asked == [("watch", ""), ("watch", ""), ("watch", "")]


def test_a_watch_cut_off_by_the_shutdown_is_not_logged_as_a_failure(capsys):
    """The API server goes while the operator stops (the end of a test session, a rollout):
    the stopped informer ends quietly, no warning with a stack."""
    stop = threading.Event()

    class Closing:
        def list_raw(self, path: str, keep) -> tuple[list[dict], str]:
            return [], "1"

        def watch_raw(self, path: str, version: str, seconds: int) -> Iterator[tuple[str, dict]]:
            stop.set()
            raise ConnectionError("connection refused")

    Informer(Closing(), "/api/v1/pods", lambda: None, Pod.of).run(stop)
    assert "informer failed" not in capsys.readouterr().out
