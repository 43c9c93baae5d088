"""`rackwise operator`: elect a leader, watch, reconcile, repeat; keep running whatever one cycle
meets. Only the leader reconciles, and every write it makes is fenced: once its lease is no
longer certainly held, the write is refused before it leaves the process."""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import structlog

from scheduler.controller.config import OperatorConfig
from scheduler.controller.cycle.reconciler import Reconciler
from scheduler.controller.runtime.cache import Cache, Informer, Viewed, wake_on_changes
from scheduler.controller.runtime.gateway import (
    PODGROUP_API,
    WORKLOAD_PODGROUP_API,
    ApiError,
    Gateway,
)
from scheduler.controller.runtime.leader import AlwaysLeader, Elector
from scheduler.controller.runtime.objects import (
    GroupApi,
    Node,
    Pod,
    PodGroup,
    QueueObject,
    TrainingJob,
)
from scheduler.controller.runtime.observability import Health, Metrics, configure_logging, serve

Obj = dict[str, Any]
V = TypeVar("V", bound=Viewed)
log = structlog.get_logger("rackwise")


class NotLeaderError(ApiError):
    def __init__(self) -> None:
        super().__init__(0, "not the leader: write refused")


class Fenced:
    """The gateway's reads as typed views (runtime/objects.py), its writes only while
    `leading()` holds."""

    def __init__(self, gateway: Gateway, leading: Any) -> None:
        self.gw = gateway
        self.leading = leading

    def _check(self) -> None:
        if not self.leading():
            raise NotLeaderError()

    def nodes(self) -> list[Node]:
        return [Node.of(o) for o in self.gw.nodes()]

    def pods(self) -> list[Pod]:
        return [Pod.of(o) for o in self.gw.pods()]

    def jobs(self) -> list[TrainingJob]:
        return [TrainingJob.of(o) for o in self.gw.jobs()]

    def queues(self) -> list[QueueObject]:
        """Listed each cycle where there is no informer cache (config `informerCache: false`)."""
        return [QueueObject.of(o) for o in self.gw.queues()]

    def patch_queue_status(self, name: str, status: Obj) -> None:
        self._check()
        self.gw.patch_queue_status(name, status)

    def set_queue_finalizers(self, name: str, finalizers: list[str]) -> None:
        self._check()
        self.gw.set_queue_finalizers(name, finalizers)

    def podgroups(self) -> list[PodGroup]:
        """Both kinds: scheduler-plugins' and the Workload API's."""
        return self.plugin_podgroups() + self.workload_podgroups()

    def plugin_podgroups(self) -> list[PodGroup]:
        return [PodGroup.of(o) for o in self.gw.podgroups()]

    def workload_podgroups(self) -> list[PodGroup]:
        return [PodGroup.of_workload(o) for o in self.gw.podgroups(WORKLOAD_PODGROUP_API)]

    def create_pod(self, namespace: str, body: Obj) -> None:
        self._check()
        self.gw.create_pod(namespace, body)

    def bind(self, namespace: str, pod: str, node: str, queue: str = "") -> None:
        self._check()
        self.gw.bind(namespace, pod, node, queue)

    def delete_pod(self, namespace: str, pod: str) -> None:
        self._check()
        self.gw.delete_pod(namespace, pod)

    def delete_job(self, namespace: str, name: str) -> None:
        self._check()
        self.gw.delete_job(namespace, name)

    def ensure_service(self, namespace: str, body: Obj) -> None:
        self._check()
        self.gw.ensure_service(namespace, body)

    def patch_status(self, namespace: str, name: str, status: Obj) -> None:
        self._check()
        self.gw.patch_status(namespace, name, status)

    def patch_podgroup_status(
        self, namespace: str, name: str, status: Obj, api: GroupApi = GroupApi.PLUGINS
    ) -> None:
        self._check()
        which = WORKLOAD_PODGROUP_API if api is GroupApi.WORKLOAD else PODGROUP_API
        self.gw.patch_podgroup_status(namespace, name, status, which)

    def patch_pod_status(self, namespace: str, name: str, status: Obj) -> None:
        self._check()
        self.gw.patch_pod_status(namespace, name, status)

    def can_write(self, namespace: str) -> bool:
        return self.gw.can_write(namespace)

    def create_event(self, namespace: str, body: Obj) -> str:
        self._check()
        return self.gw.create_event(namespace, body)

    def patch_event(self, namespace: str, name: str, patch: Obj) -> None:
        self._check()
        self.gw.patch_event(namespace, name, patch)


class Cached(Fenced):
    """Reads from the informer cache once each kind is synced (listing until then); writes
    are fenced as they are."""

    def __init__(self, gateway: Gateway, leading: Any, cache: Cache) -> None:
        super().__init__(gateway, leading)
        self.cache = cache

    def nodes(self) -> list[Node]:
        return self._read(self.cache.nodes, super().nodes)

    def pods(self) -> list[Pod]:
        return self._read(self.cache.pods, super().pods)

    def jobs(self) -> list[TrainingJob]:
        return self._read(self.cache.jobs, super().jobs)

    def queues(self) -> list[QueueObject]:
        return self._read(self.cache.queues, super().queues)

    def podgroups(self) -> list[PodGroup]:
        plugins = self._read(self.cache.podgroups, super().plugin_podgroups)
        return plugins + self._read(self.cache.workload_podgroups, super().workload_podgroups)

    @staticmethod
    def _read(informer: Informer[V], listing: Callable[[], list[V]]) -> list[V]:
        return informer.items() if informer.synced else listing()


def identity() -> str:
    """The pod's name in a cluster (downward API), else host and process."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


def run(
    config: OperatorConfig,
    kubeconfig: Path | None,
    port: int | None,
    stop: threading.Event | None = None,
    host: str = "127.0.0.1",
) -> None:
    configure_logging()
    stop = stop or threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        if threading.current_thread() is threading.main_thread():
            signal.signal(sig, lambda *_: stop.set())
    metrics = Metrics()
    gateway = Gateway(
        kubeconfig,
        config.api_workers * 2,
        config.api_timeout_s,
        lambda verb: metrics.api_requests.labels(verb).inc(),
    )
    health = Health(stale_after=max(30.0, config.resync_s * 6))
    if port is not None:
        server = serve(host, port, metrics, health)
        log.info("serving metrics and probes", address=f"{host}:{server.server_address[1]}")
    me = identity()
    elector = (
        Elector(gateway, config.leader_election, me)
        if config.leader_election.enabled
        else AlwaysLeader()
    )
    threading.Thread(target=elector.run, args=(stop,), daemon=True).start()
    wake = threading.Event()
    cache = Cache(gateway, wake.set) if config.informer_cache else None
    if cache is not None:
        cache.start(stop)
        # the first cycle reads the cache, not a second full list beside the informers' own
        cache.wait_synced(stop, config.api_timeout_s * 2)
    else:
        wake_on_changes(gateway, wake.set, stop)
    log.info("operator started", scheduler=config.scheduler_name, identity=me)
    _loop(config, gateway, cache, elector, metrics, health, wake, stop, me)
    log.info("operator stopped")


def _loop(
    config: OperatorConfig,
    gateway: Gateway,
    cache: Cache | None,
    elector: Elector | AlwaysLeader,
    metrics: Metrics,
    health: Health,
    wake: threading.Event,
    stop: threading.Event,
    me: str,
) -> None:
    reconciler: Reconciler | None = None
    while not stop.is_set():
        wake.clear()
        leading = elector.leading()
        metrics.leader.set(1 if leading else 0)
        if not leading:
            if reconciler is not None:  # a new term starts from the cluster, not old memory
                reconciler.close()
                reconciler = None
            health.beat()  # a standby replica is healthy
            stop.wait(min(1.0, config.resync_s))
            continue
        if reconciler is None:
            api = (
                Fenced(gateway, elector.leading)
                if cache is None
                else Cached(gateway, elector.leading, cache)
            )
            reconciler = Reconciler(api, config, metrics, me)
        if _cycle(reconciler, metrics):
            health.beat()
            metrics.last_cycle.set_to_current_time()
        else:
            stop.wait(1.0)
            continue
        wake.wait(config.resync_s)
        stop.wait(0.05)  # let a burst of watch events land in one cycle


def _cycle(reconciler: Reconciler, metrics: Metrics) -> bool:
    try:
        report = reconciler.cycle()
    except ApiError as exc:  # the API server is unreachable or refused a list: try again
        metrics.cycle_errors.inc()
        log.warning("cycle failed: API unavailable", error=str(exc))
        return False
    except Exception:  # a bug outside any one job: logged with its stack; /healthz goes stale
        metrics.cycle_errors.inc()
        log.exception("cycle failed")
        return False
    if report.placed or report.errors:
        log.info(
            "cycle",
            placed=report.placed,
            pods=report.pods_bound,
            pending=report.pending,
            invalid=report.invalid,
            errors=report.errors,
            seconds=round(report.seconds, 3),
            solve=round(report.solve_seconds, 3),
        )
    return True
