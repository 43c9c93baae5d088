"""The operator's informer cache: each kind listed once, then kept by a watch.

Contract. An Informer lists its kind, remembers the list's resourceVersion and watches from
there (with bookmarks, so a quiet kind's version stays fresh); every event updates the stored
objects and wakes the reconcile loop. A watch that ends (its timeout, a dropped connection)
resumes from the last version seen; a 410 Gone (the version is too old) or an unreadable stream
means a fresh list. Until its first list has succeeded an informer is not synced and the reader
lists instead (`Cached`), so the cache is never worse than listing. The cache is eventually
consistent: it may not yet show the operator's own latest writes; the reconciler waits for
those (runtime/expect.py) instead of acting on a stale picture.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import structlog

Obj = dict[str, Any]
log = structlog.get_logger("rackwise")

NODES, PODS = "/api/v1/nodes", "/api/v1/pods"
JOBS = "/apis/rackwise.io/v1alpha1/trainingjobs"
PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"
WATCH_SECONDS = 300


class Source(Protocol):
    def list_raw(self, path: str, keep: Callable[[Obj], Obj]) -> tuple[list[Obj], str]: ...
    def watch_raw(self, path: str, version: str, seconds: int) -> Iterator[tuple[str, Obj]]: ...


class Informer:
    def __init__(
        self,
        source: Source,
        path: str,
        wake: Callable[[], None],
        keep: Callable[[Obj], Obj] | None = None,
    ) -> None:
        self.source, self.path, self.wake = source, path, wake
        self.keep = keep or slim  # what of each object is stored
        self.objects: dict[str, Obj] = {}
        self.version = ""
        self.synced = False
        self.missing = False  # the kind is not served (a CRD not installed): nothing to keep
        self.lists = 0  # how many times it listed (the first, then after each 410)
        self.lock = threading.Lock()

    def items(self) -> list[Obj]:
        with self.lock:
            return list(self.objects.values())

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                if not self.version:
                    self._list()
                self._watch(stop)
            except Exception as exc:  # the watch or list failed: list again (after a pause)
                self.version = ""
                status = getattr(exc, "status", None)
                if status == 410:  # Gone: the version is too old, nothing is wrong
                    continue
                if status == 404:
                    self._absent()
                else:
                    log.warning("informer failed; listing again", path=self.path, exc_info=True)
                stop.wait(30.0 if status == 404 else 1.0)

    def _list(self) -> None:
        items, version = self.source.list_raw(self.path, self.keep)
        with self.lock:
            self.objects = {object_key(o): o for o in items}
            self.version, self.synced, self.missing = version, True, False
            self.lists += 1
        self.wake()

    def _absent(self) -> None:
        with self.lock:
            self.objects, self.synced, self.missing = {}, True, True

    def _watch(self, stop: threading.Event) -> None:
        for kind, obj in self.source.watch_raw(self.path, self.version, WATCH_SECONDS):
            if stop.is_set():
                return
            self._apply(kind, obj)

    def _apply(self, kind: str, obj: Obj) -> None:
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        with self.lock:
            if kind == "DELETED":
                self.objects.pop(object_key(obj), None)
            elif kind in ("ADDED", "MODIFIED"):
                self.objects[object_key(obj)] = self.keep(obj)
            if version:
                self.version = version
        if kind != "BOOKMARK":
            self.wake()


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def slim(obj: Obj) -> Obj:
    """What the operator never reads, dropped before it is kept: field managers (a third of a
    1.20 object) and kubectl's copy of the whole applied object."""
    meta = obj.get("metadata") or {}
    meta.pop("managedFields", None)
    notes = meta.get("annotations")
    if notes:
        notes.pop(LAST_APPLIED, None)
    return obj


POD_META: tuple[str, ...] = ("name", "namespace", "uid", "labels", "annotations")
POD_META += ("ownerReferences", "creationTimestamp", "deletionTimestamp", "resourceVersion")
POD_SPEC: tuple[str, ...] = ("nodeName", "schedulerName", "priority", "nodeSelector")
POD_SPEC += ("affinity", "tolerations", "overhead", "restartPolicy")
CONTAINER = ("name", "image", "resources", "restartPolicy")


def pod_view(pod: Obj) -> Obj:
    """A pod as the operator reads it: identity, ownership, what it requests and tolerates,
    where it runs, its phase and PodScheduled condition. 100,000 pods are kept, not their
    images' env and mounts."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    status = pod.get("status") or {}
    kept_spec = {k: spec[k] for k in POD_SPEC if k in spec}
    for part in ("containers", "initContainers"):
        if part in spec:
            kept_spec[part] = [{k: c[k] for k in CONTAINER if k in c} for c in spec[part]]
    out = {
        "metadata": {k: meta[k] for k in POD_META if k in meta},
        "spec": kept_spec,
        "status": {"phase": status.get("phase")},
    }
    said = [c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"]
    if said:  # what the pod says of why it waits (pods/podwhy.py)
        out["status"]["conditions"] = said
    return slim(out)


def node_view(node: Obj) -> Obj:
    """A node without its image list and heartbeat history (large on real kubelets)."""
    status = node.get("status") or {}
    kept = {k: status[k] for k in ("allocatable", "capacity", "conditions") if k in status}
    return slim(
        {"metadata": node.get("metadata") or {}, "spec": node.get("spec") or {}, "status": kept}
    )


def object_key(obj: Obj) -> str:
    """An object's identity: its uid, else namespace/name."""
    meta = obj.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")


class Cache:
    """The four kinds the reconciler reads, each its own informer thread."""

    def __init__(self, source: Source, wake: Callable[[], None]) -> None:
        self.nodes = Informer(source, NODES, wake, node_view)
        self.pods = Informer(source, PODS, wake, pod_view)
        self.jobs = Informer(source, JOBS, wake)
        self.podgroups = Informer(source, PODGROUPS, wake)

    @property
    def informers(self) -> tuple[Informer, ...]:
        return (self.nodes, self.pods, self.jobs, self.podgroups)

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
