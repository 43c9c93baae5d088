"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

Contract: `leading()` is true only while this replica holds the lease and renewed it less than
renewDeadline ago (by its own monotonic clock). Another replica takes the lease only after it
has seen the same holder and renewTime unchanged for a whole leaseDuration, also by its own
clock. Since renewDeadline < leaseDuration, a leader stops writing before anyone else may
start: two replicas never write at once, whatever the wall clocks say. Every update carries
the resourceVersion it read, so two candidates racing for a free lease cannot both win."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog

from scheduler.controller.config import LeaderElection
from scheduler.controller.runtime.gateway import ApiError
from scheduler.controller.runtime.objects import Meta, count
from scheduler.controller.runtime.podrequests import part

Obj = dict[str, Any]
log = structlog.get_logger("rackwise")


@dataclass(frozen=True, slots=True)
class Lease:
    """A coordination.k8s.io Lease, as leader election reads it."""

    version: str  # resourceVersion: a replace must name it
    holder: str
    renewed: str  # renewTime, as written
    duration_s: float | None
    acquired: str | None  # acquireTime, as written
    transitions: int

    @classmethod
    def of(cls, obj: Obj) -> Lease:
        spec = part(obj, "spec")
        duration = spec.get("leaseDurationSeconds")
        return cls(
            version=Meta.of(obj).version,
            holder=str(spec.get("holderIdentity") or ""),
            renewed=str(spec.get("renewTime") or ""),
            duration_s=float(duration) if duration else None,
            acquired=str(spec["acquireTime"]) if spec.get("acquireTime") else None,
            transitions=count(spec.get("leaseTransitions")),
        )


class LeaseStore(Protocol):
    def get_lease(self, namespace: str, name: str) -> Obj | None: ...
    def create_lease(self, namespace: str, body: Obj) -> Obj: ...
    def replace_lease(self, namespace: str, name: str, body: Obj) -> Obj: ...


def _micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Elector:
    store: LeaseStore
    config: LeaderElection
    identity: str
    clock: Callable[[], float] = time.monotonic
    valid_until: float = 0.0
    observed: tuple[str, str] = ("", "")  # (holder, renewTime) last seen
    observed_at: float = 0.0
    transitions: int = 0

    def leading(self) -> bool:
        return self.clock() < self.valid_until

    def step(self) -> None:
        """Try once to acquire or renew; never raises for API trouble."""
        start = self.clock()
        try:
            won = self._try(start)
        except ApiError as exc:
            log.warning("lease update failed", error=str(exc), identity=self.identity)
            won = False
        if won:
            if not self.leading():
                log.info("became leader", identity=self.identity)
            self.valid_until = start + self.config.renew_deadline_s

    def _try(self, start: float) -> bool:
        cfg = self.config
        found = self.store.get_lease(cfg.namespace, cfg.name)
        if found is None:
            self.store.create_lease(cfg.namespace, self._body(None, acquired=True))
            return True
        lease = Lease.of(found)
        holder = lease.holder
        seen = (holder, lease.renewed)
        if seen != self.observed:
            self.observed, self.observed_at = seen, start
        duration = lease.duration_s or cfg.lease_s
        free = not holder or start - self.observed_at > duration
        if holder != self.identity and not free:
            return False
        try:
            self.store.replace_lease(
                cfg.namespace, cfg.name, self._body(lease, acquired=holder != self.identity)
            )
        except ApiError as exc:
            if exc.status == 409:  # someone else wrote first
                return False
            raise
        return True

    def _body(self, lease: Lease | None, acquired: bool) -> Obj:
        cfg = self.config
        stamp = _micro_now()
        transitions = (lease.transitions if lease else 0) + (1 if lease and acquired else 0)
        metadata: Obj = {"name": cfg.name, "namespace": cfg.namespace}
        if lease is not None:
            metadata["resourceVersion"] = lease.version
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": max(1, round(cfg.lease_s)),
                "acquireTime": stamp if acquired or not lease else lease.acquired or stamp,
                "renewTime": stamp,
                "leaseTransitions": transitions,
            },
        }

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.step()
            stop.wait(self.config.retry_s)


class AlwaysLeader:
    """Leader election switched off: a single replica that always leads."""

    def leading(self) -> bool:
        return True

    def run(self, _stop: threading.Event) -> None:
        return
