"""The operator's informer cache: each kind listed once, then kept by a watch.

Contract. An Informer lists its kind, remembers the list's resourceVersion and watches from
there (with bookmarks, so a quiet kind's version stays fresh); every event updates the stored
objects and wakes the reconcile loop. A watch that ends (its timeout, a dropped connection)
resumes from the last version seen; a 410 Gone (the version is too old) or an unreadable stream
means a fresh list. Until its first list has succeeded an informer is not synced and the reader
lists instead (`Cached`), so the cache is never worse than listing. What is stored is each
object's typed view (runtime/objects.py), made once when the object arrives. The cache is eventually
consistent: it may not yet show the operator's own latest writes; the reconciler waits for
those (runtime/expect.py) instead of acting on a stale picture. Without the cache,
`wake_on_changes` watches the same kinds only to wake the loop, which lists them itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

import structlog

from scheduler.controller.runtime.objects import (
    Meta,
    Node,
    Pod,
    PodGroup,
    QueueObject,
    TrainingJob,
)

Obj = dict[str, Any]


class Viewed(Protocol):
    @property
    def meta(self) -> Meta: ...


View = TypeVar("View", bound=Viewed)
Kept = TypeVar("Kept")
log = structlog.get_logger("rackwise")

NODES, PODS = "/api/v1/nodes", "/api/v1/pods"
JOBS = "/apis/rackwise.io/v1alpha1/trainingjobs"
QUEUES = "/apis/rackwise.io/v1alpha1/queues"  # cluster-scoped; absent without the CRD
PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"
WORKLOAD_PODGROUPS = "/apis/scheduling.k8s.io/v1alpha2/podgroups"  # the Workload API's (1.35+)
WATCH_SECONDS = 300
ABSENT_RETRY_S = 30.0  # a kind not served (its CRD not installed) is asked for again this often


class Source(Protocol):
    def list_raw(self, path: str, keep: Callable[[Obj], Kept]) -> tuple[list[Kept], str]: ...
    def watch_raw(self, path: str, version: str, seconds: int) -> Iterator[tuple[str, Obj]]: ...


class Informer(Generic[View]):
    def __init__(
        self,
        source: Source,
        path: str,
        wake: Callable[[], None],
        keep: Callable[[Obj], View],
    ) -> None:
        self.source, self.path, self.wake = source, path, wake
        self.keep = keep  # each object as it is stored: its view
        self.objects: dict[str, View] = {}
        self.version = ""
        self.synced = False
        self.missing = False  # the kind is not served (a CRD not installed): nothing to keep
        self.lists = 0  # how many times it listed (the first, then after each 410)
        self.lock = threading.Lock()

    def items(self) -> list[View]:
        with self.lock:
            return list(self.objects.values())

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                if not self.version:
                    self._list()
                self._watch(stop)
            except Exception as exc:  # the watch or list failed: list again (after a pause)
                if stop.is_set():  # stopping: a watch cut off by the shutdown is no failure
                    return
                self.version = ""
                status = getattr(exc, "status", None)
                if status == 410:  # Gone: the version is too old, nothing is wrong
                    continue
                if status == 404:
                    self._absent()
                else:
                    log.warning("informer failed; listing again", path=self.path, exc_info=True)
                stop.wait(ABSENT_RETRY_S if status == 404 else 1.0)

    def _list(self) -> None:
        keyed, version = self.source.list_raw(self.path, self._keyed)
        with self.lock:
            self.objects = dict(keyed)
            self.version, self.synced, self.missing = version, True, False
            self.lists += 1
        self.wake()

    def _keyed(self, obj: Obj) -> tuple[str, View]:
        view = self.keep(obj)
        return view.meta.key, view

    def _absent(self) -> None:
        with self.lock:
            self.objects, self.synced, self.missing = {}, True, True

    def _watch(self, stop: threading.Event) -> None:
        for kind, obj in self.source.watch_raw(self.path, self.version, WATCH_SECONDS):
            if stop.is_set():
                return
            self._apply(kind, obj)

    def _apply(self, kind: str, obj: Obj) -> None:
        view = self.keep(obj) if kind in ("ADDED", "MODIFIED") else None
        meta = view.meta if view is not None else Meta.of(obj)
        with self.lock:
            if kind == "DELETED":
                self.objects.pop(meta.key, None)
            elif view is not None:
                self.objects[meta.key] = view
            if meta.version:
                self.version = meta.version
        if kind != "BOOKMARK":
            self.wake()


POD_SPEC: tuple[str, ...] = ("nodeName", "schedulerName", "priority", "nodeSelector")
POD_SPEC += ("affinity", "tolerations", "overhead", "restartPolicy")
# today's fields (runtime/objects.py reads them): gates, claims, pod-level resources, the
# Workload API's PodGroup a pod belongs to
POD_SPEC += ("schedulingGates", "resourceClaims", "resources", "schedulingGroup")
POD_SPEC += ("topologySpreadConstraints",)
CONTAINER = ("name", "image", "resources", "restartPolicy")


def pod_view(pod: Obj) -> Pod:
    """A pod as the operator reads it: identity, ownership, what it requests and tolerates,
    where it runs, its phase and PodScheduled condition. 100,000 pods are kept, not their
    images' env and mounts (the spec kept for the pod-spec parser is trimmed first)."""
    spec = pod.get("spec") or {}
    kept = {k: spec[k] for k in POD_SPEC if k in spec}
    for part in ("containers", "initContainers"):
        if part in spec:
            kept[part] = [{k: c[k] for k in CONTAINER if k in c} for c in spec[part]]
    return Pod.of({**pod, "spec": kept})


class Cache:
    """The kinds the reconciler reads, each its own informer thread."""

    def __init__(self, source: Source, wake: Callable[[], None]) -> None:
        self.nodes = Informer(source, NODES, wake, Node.of)
        self.pods = Informer(source, PODS, wake, pod_view)
        self.jobs = Informer(source, JOBS, wake, TrainingJob.of)
        self.podgroups = Informer(source, PODGROUPS, wake, PodGroup.of)
        self.workload_podgroups = Informer(source, WORKLOAD_PODGROUPS, wake, PodGroup.of_workload)
        # a team's edit to its quota wakes the loop, and no cycle lists the Queues again
        self.queues = Informer(source, QUEUES, wake, QueueObject.of)

    @property
    def informers(self) -> tuple[Informer[Any], ...]:
        kinds = (self.nodes, self.pods, self.jobs, self.podgroups, self.workload_podgroups)
        return (*kinds, self.queues)

    def start(self, stop: threading.Event) -> None:
        for informer in self.informers:
            threading.Thread(target=informer.run, args=(stop,), daemon=True).start()

    def wait_synced(self, stop: threading.Event, timeout: float) -> bool:
        """Until every kind has been listed once (or `timeout`: readers then list themselves)."""
        deadline = time.monotonic() + timeout
        while not all(i.synced for i in self.informers):
            if stop.is_set() or time.monotonic() > deadline:
                return False
            stop.wait(0.1)
        return True


def wake_on_changes(
    source: Source, wake: Callable[[], None], stop: threading.Event
) -> list[threading.Thread]:
    """Without the cache (`informerCache: false`) the loop lists what it reads each cycle;
    a watch of each kind the cache would keep wakes it when one changes (a Queue's quota, a
    PodGroup, as well as nodes, pods and TrainingJobs), so no change waits for the resync."""
    threads = [
        threading.Thread(target=_wake_on, args=(source, path, wake, stop), daemon=True)
        for path in (NODES, PODS, JOBS, PODGROUPS, WORKLOAD_PODGROUPS, QUEUES)
    ]
    for thread in threads:
        thread.start()
    return threads


def _wake_on(source: Source, path: str, wake: Callable[[], None], stop: threading.Event) -> None:
    """Watch from now until stopped: each change wakes the loop; a failed watch wakes it too
    (it lists), then watches again; a kind not served is asked for again quietly."""
    while not stop.is_set():
        try:
            for kind, _ in source.watch_raw(path, "", WATCH_SECONDS):
                if stop.is_set():
                    return
                if kind != "BOOKMARK":
                    wake()
        except Exception as exc:  # the watch failed: wake the loop, then watch again
            if getattr(exc, "status", None) == 404:
                stop.wait(ABSENT_RETRY_S)
                continue
            log.warning("watch failed; watching again", path=path, exc_info=True)
            wake()
            stop.wait(1.0)
