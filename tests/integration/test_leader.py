"""Two operator replicas on the real API server, the leader SIGKILLed again and again while 200
gangs are placed: nothing oversubscribed at any moment, nothing half bound and no job lost once
the survivors settle. Its own control plane, so the session's in-process operator is not a
third replica."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator

import pytest
import yaml

from scheduler.controller.cluster import invariants
from scheduler.controller.config import OperatorConfig
from scheduler.controller.runtime.gateway import AdminGateway, Gateway
from scheduler.devtools.cluster import LocalCluster
from scheduler.devtools.devcluster import Replicas, install
from scheduler.devtools.fake import create_nodes, run_kubelet
from scheduler.topology import generate
from tests.integration.conftest import training_job
from tests.waits import until

pytestmark = [pytest.mark.apiserver, pytest.mark.slow]
KILLS = 20
GANGS = 200
SEED = 20261130
FAST_LEASE = {
    "resyncSeconds": 1.0,
    "leaderElection": {
        "leaseDurationSeconds": 3,
        "renewDeadlineSeconds": 2,
        "retryPeriodSeconds": 0.5,
    },
}


@pytest.fixture(scope="module")
def replicated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Replicas]]:
    workdir = tmp_path_factory.mktemp("replicated")
    cluster = LocalCluster.start(workdir)
    config = workdir / "config.yaml"
    config.write_text(yaml.safe_dump(FAST_LEASE))
    replicas = Replicas(cluster, config, workdir / "logs")
    try:
        install(cluster)
        yield cluster, replicas
    finally:
        replicas.stop()
        cluster.stop()


def gangs(rng: random.Random) -> list[dict]:
    """About 930 GPUs in all, on a fabric of 1,152: every gang fits once the others are in."""
    out = []
    for i in range(GANGS):
        job = training_job(f"g{i}", rng.choice([1, 2, 2, 3]), gpus=rng.choice([1, 2, 4]))
        out.append(job)
    return out


def test_leader_kills_never_oversubscribe_or_lose_a_gang(replicated):
    cluster, replicas = replicated
    admin = AdminGateway(cluster.admin_kubeconfig)
    create_nodes(admin, generate(blocks=2, racks=6, hosts=12, gpus=8), OperatorConfig())
    stop = threading.Event()
    kubelet = threading.Thread(target=run_kubelet, args=(admin, stop, 0.5), daemon=True)
    kubelet.start()
    seen: list[str] = []
    watcher = threading.Thread(target=_watch_invariants, args=(admin, stop, seen), daemon=True)
    watcher.start()
    rng = random.Random(SEED)
    jobs = gangs(rng)
    replicas.start()
    replicas.start()
    killed = 0
    try:
        # half the gangs at once: two writers would both place them from the same snapshot;
        # the rest in batches between kills, so kills land mid-creation and mid-binding
        rest = jobs[GANGS // 2 :]
        batches = [jobs[: GANGS // 2]] + [rest[i :: KILLS - 1] for i in range(KILLS - 1)]
        for batch in batches:
            items = {"apiVersion": "v1", "kind": "List", "items": batch}
            cluster.kubectl("apply", "-f", "-", stdin=json.dumps(items))
            leader = _wait_leader(replicas)
            time.sleep(rng.uniform(0.1, 1.5))  # mid-creation, mid-binding, or idle
            replicas.kill(leader)
            killed += 1
            replicas.start()
        _settle(admin, timeout=180)
    finally:
        stop.set()
    report = invariants.check(admin.nodes(), admin.pods(), admin.jobs(), OperatorConfig())
    assert killed >= KILLS
    assert seen == [], f"oversubscribed while running: {seen[:5]}"
    assert report.oversubscribed == []
    assert report.half_bound == []
    assert report.unplaced == []  # every one of the 200 gangs is placed: no job lost
    assert len(admin.jobs()) == GANGS
    assert len(replicas.alive()) == 2  # the survivors never crashed on their own


def _wait_leader(replicas: Replicas, timeout: float = 30) -> str:
    return until("a replica to lead", replicas.leader, timeout, poll_s=0.1)


def _watch_invariants(admin: Gateway, stop: threading.Event, seen: list[str]) -> None:
    config = OperatorConfig()
    while not stop.is_set():
        seen += invariants.oversubscribed(admin.nodes(), admin.pods(), config)
        stop.wait(0.5)


def _settle(admin: Gateway, timeout: float) -> None:
    def settled() -> bool:
        partial, empty = invariants.half_bound(admin.jobs(), admin.pods())
        return not partial and not empty

    try:
        until("every gang whole", settled, timeout, poll_s=1.0)
        return
    except AssertionError:
        partial, empty = invariants.half_bound(admin.jobs(), admin.pods())
    jobs = {f"{j['metadata']['namespace']}/{j['metadata']['name']}": j for j in admin.jobs()}
    reasons = [
        c.get("message", "")
        for name in empty[:3]
        for c in (jobs[name].get("status") or {}).get("conditions") or []
    ]
    raise AssertionError(f"not settled: {len(partial)} partial, {len(empty)} empty: {reasons}")
