"""Prometheus metrics (rackwise_ prefix), liveness/readiness probes, structured JSON logs."""

from __future__ import annotations

import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import structlog
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from scheduler.model import GangRequest, Placement

# an API call's verb and resource, by the Api method that failed
CALLS = {
    "create_pod": ("create", "pods"),
    "bind": ("create", "pods/binding"),
    "delete_pod": ("delete", "pods"),
    "delete_job": ("delete", "trainingjobs"),
    "ensure_service": ("create", "services"),
    "patch_status": ("patch", "trainingjobs/status"),
    "patch_podgroup_status": ("patch", "podgroups/status"),
    "record": ("create", "events"),
    "create_event": ("create", "events"),
    "patch_event": ("patch", "events"),
}


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)  # CPU, resident memory, open files
        PlatformCollector(registry=self.registry)
        self.attempts = Counter(
            "rackwise_placement_attempts",
            "Placement decisions",
            ["pool", "namespace", "result"],
            registry=self.registry,
        )
        self.solve = Histogram(
            "rackwise_solve_seconds",
            "Time to decide one gang",
            ["pool"],
            registry=self.registry,
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
        )
        self.time_to_place = Histogram(
            "rackwise_time_to_place_seconds",
            "From a gang's creation to all its pods bound (first placement)",
            ["pool", "namespace"],
            registry=self.registry,
            buckets=(1, 5, 15, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600),
        )
        self.queue_depth = Gauge(
            "rackwise_queue_depth", "Gangs waiting, by pool", ["pool"], registry=self.registry
        )
        self.preemptions = Counter(
            "rackwise_preemptions",
            "Gangs preempted (their pods deleted for a higher priority)",
            ["pool", "namespace"],
            registry=self.registry,
        )
        self.moves = Counter(
            "rackwise_defrag_moves",
            "Gangs moved at a checkpoint (defragmentation)",
            ["pool", "namespace"],
            registry=self.registry,
        )
        self.lent = Gauge(
            "rackwise_lent_gpus", "GPUs a pool lends now", ["pool"], registry=self.registry
        )
        self.reclaims = Counter(
            "rackwise_reclaims",
            "Borrowed gangs taken back for their lender: at a checkpoint or at the deadline",
            ["pool", "result"],
            registry=self.registry,
        )
        self.reclaim_seconds = Histogram(
            "rackwise_reclaim_seconds",
            "From a reclaim's start to the borrowed gang's eviction",
            ["pool"],
            registry=self.registry,
            buckets=(0, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600),
        )
        self.cycle_seconds = Histogram(
            "rackwise_cycle_seconds",
            "One reconcile cycle",
            registry=self.registry,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
        )
        self.pending = Gauge("rackwise_pending_gangs", "Gangs waiting", registry=self.registry)
        self.queue_gpus = Gauge(
            "rackwise_queue_gpus",
            "A team Queue's GPUs: nominal, used, borrowed (beyond nominal)",
            ["queue", "kind"],
            registry=self.registry,
        )
        self.queue_gangs = Gauge(
            "rackwise_queue_gangs",
            "A team Queue's gangs: pending, admitted, leaving (pods on their way out)",
            ["queue", "state"],
            registry=self.registry,
        )
        self.queue_wait = Gauge(
            "rackwise_queue_wait_seconds",
            "A team Queue's longest wait now: seconds since its longest-waiting gang arrived",
            ["queue"],
            registry=self.registry,
        )
        self.queue_reclaims = Counter(
            "rackwise_queue_reclaims",
            "Borrowers evicted to give a team Queue its quota back: at a checkpoint or deadline",
            ["queue", "result"],
            registry=self.registry,
        )
        self.ignored = Gauge(
            "rackwise_ignored_objects",
            "TrainingJobs and pod groups rackwise does not schedule, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.gap = Gauge(
            "rackwise_placement_gap", "Gap of the last placement", registry=self.registry
        )
        self.last_cycle = Gauge(
            "rackwise_last_cycle_timestamp", "End of the last reconcile", registry=self.registry
        )
        self.invalid = Gauge(
            "rackwise_invalid_jobs", "Jobs with an InvalidSpec condition", registry=self.registry
        )
        self.launching = Gauge(
            "rackwise_launching_gangs", "Gangs whose pods are being created", registry=self.registry
        )
        self.job_errors = Counter(
            "rackwise_job_errors",
            "Unexpected failures while handling one job (logged with the stack)",
            registry=self.registry,
        )
        self.cycle_errors = Counter(
            "rackwise_cycle_errors", "Cycles that did not complete", registry=self.registry
        )
        self.api_requests = Counter(
            "rackwise_api_requests",
            "API requests made (watches count once per stream opened)",
            ["verb"],
            registry=self.registry,
        )
        self.api_errors = Counter(
            "rackwise_api_errors",
            "Failed API calls",
            ["verb", "resource"],
            registry=self.registry,
        )
        self.leader = Gauge(
            "rackwise_leader", "1 while this replica holds the lease", registry=self.registry
        )

    def cycle(self, pending: int, invalid: int, launching: int, seconds: float) -> None:
        self.pending.set(pending)
        self.invalid.set(invalid)
        self.launching.set(launching)
        self.cycle_seconds.observe(seconds)

    def depth(self, waiting: dict[str, int]) -> None:
        """Every pool's queue depth, 0 for a pool with nothing waiting (no stale series)."""
        for pool, count in waiting.items():
            self.queue_depth.labels(pool).set(count)

    def observe(self, placement: Placement, gang: GangRequest) -> None:
        result = "placed" if placement.placed else "unplaceable"
        self.attempts.labels(gang.pool, namespace_of(gang), result).inc()
        self.solve.labels(gang.pool).observe(placement.solve_seconds)
        if placement.gap is not None:
            self.gap.set(placement.gap)

    def placed(self, gang: GangRequest, seconds: float) -> None:
        self.time_to_place.labels(gang.pool, namespace_of(gang)).observe(max(seconds, 0.0))

    def preempted(self, gang: GangRequest) -> None:
        self.preemptions.labels(gang.pool, namespace_of(gang)).inc()

    def lending(self, lent: dict[str, int]) -> None:
        for pool, gpus in lent.items():
            self.lent.labels(pool).set(gpus)

    def reclaimed(self, lender: str, at_checkpoint: bool, waited_s: float) -> None:
        self.reclaims.labels(lender, "checkpoint" if at_checkpoint else "deadline").inc()
        self.reclaim_seconds.labels(lender).observe(waited_s)

    def moved(self, gang: GangRequest) -> None:
        self.moves.labels(gang.pool, namespace_of(gang)).inc()

    def api_error(self, call: str) -> None:
        verb, resource = CALLS.get(call, ("other", call))
        self.api_errors.labels(verb, resource).inc()


def namespace_of(gang: GangRequest) -> str:
    """Gangs the operator makes are named `<namespace>/<name>`."""
    return gang.name.split("/", 1)[0] if "/" in gang.name else ""


class Health:
    """Live while cycles keep completing; ready after the first successful cycle."""

    def __init__(self, stale_after: float) -> None:
        self.stale_after = stale_after
        self.last_ok = 0.0
        self.started = time.monotonic()

    def beat(self) -> None:
        self.last_ok = time.monotonic()

    @property
    def ready(self) -> bool:
        return self.last_ok > 0

    @property
    def live(self) -> bool:
        reference = self.last_ok or self.started
        return time.monotonic() - reference < self.stale_after


def serve(host: str, port: int, metrics: Metrics, health: Health) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._reply(200, generate_latest(metrics.registry), "text/plain; version=0.0.4")
            elif self.path == "/healthz":
                self._reply(200 if health.live else 500, b"ok" if health.live else b"stale")
            elif self.path == "/readyz":
                self._reply(200 if health.ready else 503, b"ready" if health.ready else b"starting")
            else:
                self._reply(404, b"not found")

        def _reply(self, code: int, body: bytes, kind: str = "text/plain") -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            return

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def configure_logging() -> None:
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
    )
