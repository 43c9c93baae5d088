"""`rackwise operator`: watch, reconcile, repeat; keep running whatever one cycle meets."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import structlog

from scheduler.controller.config import OperatorConfig
from scheduler.controller.gateway import Gateway
from scheduler.controller.observability import Health, Metrics, configure_logging, serve
from scheduler.controller.reconciler import Reconciler

log = structlog.get_logger("rackwise")


def run(
    config: OperatorConfig,
    kubeconfig: Path | None,
    port: int | None,
    stop: threading.Event | None = None,
) -> None:
    configure_logging()
    stop = stop or threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        if threading.current_thread() is threading.main_thread():
            signal.signal(sig, lambda *_: stop.set())
    gateway = Gateway(kubeconfig, pool_size=config.api_workers * 2)
    metrics = Metrics()
    health = Health(stale_after=max(30.0, config.resync_s * 6))
    if port is not None:
        serve(port, metrics, health)
    reconciler = Reconciler(gateway, config, metrics)
    wake = threading.Event()
    gateway.watch_all(wake.set, stop)
    log.info("operator started", scheduler=config.scheduler_name)
    while not stop.is_set():
        wake.clear()
        try:
            report = reconciler.cycle()
        except Exception as exc:
            log.error("reconcile failed", error=f"{exc.__class__.__name__}: {exc}")
            stop.wait(1.0)
            continue
        health.beat()
        metrics.last_cycle.set_to_current_time()
        if report.placed:
            log.info(
                "cycle",
                placed=report.placed,
                pods=report.pods_bound,
                pending=report.pending,
                seconds=round(report.seconds, 3),
                solve=round(report.solve_seconds, 3),
            )
        wake.wait(config.resync_s)
        stop.wait(0.05)  # let a burst of watch events land in one cycle
    log.info("operator stopped")
