"""One event sequence, two drivers. The simulator and the operator (on the real API server, its
clock driven by the test) both drive the scheduling queue; fed the same arrivals and
completions they must make the same starts, on the same hosts, at the same times, and the same
preemptions. The sequence exercises EASY backfilling (a gang that ends before the reservation
passes, one that does not is held) and topology-aware preemption (a rack freed at the least
loss, the victims queued again and backfilled later).

The operator runs here on a cluster of its own with no background loop: the test calls
`Reconciler.cycle()` at each event time, as the operator's loop would on a watch event."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import wait
from typing import Any

import pytest

from scheduler.controller.config import OperatorConfig
from scheduler.controller.cycle.reconciler import Reconciler
from scheduler.controller.operator import Fenced
from scheduler.controller.runtime.gateway import AdminGateway, Gateway
from scheduler.controller.runtime.observability import Metrics
from scheduler.devtools.cluster import LocalCluster
from scheduler.devtools.devcluster import install
from scheduler.devtools.fake import create_nodes
from scheduler.simulation.config import SimConfig
from scheduler.simulation.engine import Simulation
from scheduler.simulation.profiles import FabricProfile, ProfileName, RestartCost
from scheduler.simulation.trace import TraceJob
from scheduler.topology import Fabric, generate
from tests.integration.conftest import training_job

pytestmark = pytest.mark.apiserver
SPEC = generate(blocks=1, racks=2, hosts=2, gpus=8)  # racks r0 (h0-0, h0-1) and r1 (h1-*)
CHECKPOINT_S = 60
# (id, submit, run time, GPUs, priority)
EVENTS = [
    ("j0", 0, 300, 16, 0),  # rack 0 until 300
    ("j1", 10, 100, 8, 0),
    ("j2", 20, 100, 32, 0),  # everything: holds the fabric for when the others end
    ("j3", 30, 50, 8, 0),  # ends at 80, before j0 at 300: backfills
    ("j4", 40, 1000, 8, 0),  # would end after j0: held
    # preempts a rack at 70: j0 checkpointed at 60 and loses 10 s x 16 GPUs; in the other rack
    # j1 checkpointed at 70 (loses nothing) but j3 loses 40 s x 8: rack 0 goes
    ("j5", 70, 100, 16, 5),
]


def simulate() -> Any:
    jobs = [
        TraceJob(id=i, submit_s=t, duration_s=d, gpus=g, priority=p) for i, t, d, g, p in EVENTS
    ]
    # no moves at checkpoints: the operator moves only jobs that report a checkpoint, and
    # these jobs do not (tests/integration/test_defrag.py covers moves)
    # the oracle fabric and free restarts: the operator's run times are the trace's as given
    config = SimConfig.of(
        fabric=FabricProfile(name=ProfileName.ORACLE),
        restart=RestartCost(base_s=0, per_doubling_s=0),
        checkpoint_minutes=CHECKPOINT_S / 60,
        defrag_moves_per_hour=0,
    )
    return Simulation(Fabric(SPEC), jobs, "rackwise", config).run()


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster.start(tmp_path_factory.mktemp("same-decisions"))
    try:
        install(local)
        create_nodes(AdminGateway(local.admin_kubeconfig), SPEC, OperatorConfig())
        yield local
    finally:
        local.stop()


class Driven:
    """The operator with the test's clock, and what it was seen to do."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.now = 0.0
        self.admin = AdminGateway(cluster.admin_kubeconfig)
        # the operator's reader without its cache: every cycle lists, as typed views
        api = Fenced(Gateway(cluster.operator_kubeconfig), leading=lambda: True)
        self.reconciler = Reconciler(api, OperatorConfig(), Metrics(), clock=lambda: self.now)
        self.hosts: dict[str, dict[str, int]] = {}
        self.starts: list[tuple[float, str, dict[str, int]]] = []
        self.evicted: list[tuple[float, str]] = []

    def submit(self, name: str, run_s: int, gpus: int, priority: int) -> None:
        job = training_job(
            name,
            gpus // 8,
            priority=priority,
            expectedRuntimeSeconds=run_s,
            checkpointIntervalSeconds=CHECKPOINT_S,
        )
        self.admin.custom.create_namespaced_custom_object(
            "rackwise.io", "v1alpha1", "default", "trainingjobs", job
        )

    def finish(self, name: str) -> None:
        for pod in self._pods(name):
            self.admin.patch_pod_status("default", pod["metadata"]["name"], {"phase": "Succeeded"})
        self.hosts.pop(name, None)

    def settle(self) -> None:
        """Cycles at this instant until its consequences are in: the operator's loop runs
        again when the pods it made appear, so each cycle here waits for its creations."""
        for _ in range(4):
            self.reconciler.cycle()
            for launch in self.reconciler.launches.values():
                wait(launch.inflight.values())
        for name in {n for n, *_ in EVENTS}:
            self._observe(name)

    def _observe(self, name: str) -> None:
        pods = [p for p in self._pods(name) if p["status"].get("phase") != "Succeeded"]
        hosts: dict[str, int] = {}
        for p in pods:
            node = p["spec"].get("nodeName")
            if node:
                hosts[node] = hosts.get(node, 0) + 1
        before = self.hosts.get(name)
        if hosts and hosts != before:
            self.starts.append((self.now, name, hosts))
        if before and not hosts:
            self.evicted.append((self.now, name))
        self.hosts[name] = hosts

    def _pods(self, name: str) -> list[dict[str, Any]]:
        return [
            p
            for p in self.admin.pods()
            if (p["metadata"].get("labels") or {}).get("rackwise.io/job") == name
        ]


def test_the_simulator_and_the_operator_decide_alike(own_cluster: LocalCluster):
    sim = simulate()
    finishes = {s.job.id: s.finish for s in sim.jobs}
    assert all(f is not None for f in finishes.values())
    arrivals = {i: (t, d, g, p) for i, t, d, g, p in EVENTS}
    times = sorted({t for t, *_ in arrivals.values()} | set(finishes.values()))
    driven = Driven(own_cluster)
    try:
        for now in times:
            driven.now = now
            for name in sorted(n for n, f in finishes.items() if f == now):
                driven.finish(name)
            for name in sorted(n for n, a in arrivals.items() if a[0] == now):
                _, run_s, gpus, priority = arrivals[name]
                driven.submit(name, run_s, gpus, priority)
            driven.settle()
    finally:
        driven.reconciler.close()
    # what the sequence is meant to show happened in the simulator
    assert [(t, e.victim, e.preemptor) for t, e in sim.evictions] == [(70, "j0", "j5")]
    first: dict[str, float] = {}
    for t, name, _ in sim.starts:
        first.setdefault(name, t)
    assert first["j3"] == 30  # backfilled before the reservation
    assert first["j4"] > first["j2"]  # held: it would have delayed j2
    # and the operator did the same
    assert sorted(driven.starts) == sorted(sim.starts)
    assert sorted(driven.evicted) == sorted((t, e.victim) for t, e in sim.evictions)
