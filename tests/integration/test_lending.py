"""Tiered pools on the real API server: a batch gang borrows idle online-inference nodes, an
online gang arrives and waits for its deadline (the borrower has no checkpoint within it), the
batch gang is taken back at the deadline and the online gang is placed there. Its own cluster
and operator: the lending rules are this operator's config."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest

from scheduler.controller.config import OperatorConfig
from scheduler.controller.runtime.gateway import AdminGateway
from scheduler.devtools.cluster import LocalCluster, free_port
from scheduler.devtools.devcluster import install
from scheduler.devtools.fake import create_nodes
from scheduler.pools import Lending, PoolSpec
from scheduler.topology import generate
from tests.integration.conftest import Env, operating, training_job

pytestmark = pytest.mark.apiserver

DEADLINE_S = 20.0
PORT = free_port()  # this operator's metrics
POOLS = (
    PoolSpec(name="training", objective="pack"),
    PoolSpec(name="batch-inference", objective="fill", borrow=True),
    PoolSpec(
        name="online-inference",
        objective="spread",
        lend=Lending(idle_after_s=0, reserve_hosts=0, reclaim_within_s=DEADLINE_S),
    ),
)
# one rack of two 8-GPU hosts for batch inference, one for online inference
SPEC = generate(
    blocks=1, racks=2, hosts=2, gpus=8, pools={"batch-inference": 0.5, "online-inference": 0.5}
)


@pytest.fixture(scope="module")
def lending_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    local = LocalCluster.start(tmp_path_factory.mktemp("lending"))
    config = OperatorConfig(resync_s=1.0, pool_list=POOLS)
    try:
        install(local)
        admin = AdminGateway(local.admin_kubeconfig)
        create_nodes(admin, SPEC, config)
        with operating(local, admin, config, PORT):
            yield Env(local, admin)
    finally:
        local.stop()


def metric(name: str) -> float:
    """One series' value on this operator's /metrics (0 when absent)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    found = [line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")]
    return float(found[0]) if found else 0.0


def pools_of(env: Env, name: str) -> set[str]:
    pool = {h.name: h.pool for h in SPEC.hosts}
    return {pool[p["spec"]["nodeName"]] for p in env.pods(name) if p["spec"].get("nodeName")}


def test_a_borrowed_gang_is_taken_back_within_the_deadline(lending_env: Env):
    env = lending_env
    # four 8-GPU pods: two more than batch inference has, so two go to lent online hosts
    env.post(training_job("batch", 4, pool="batch-inference", checkpointIntervalSeconds=3600))
    env.wait_placed("batch")
    assert pools_of(env, "batch") == {"batch-inference", "online-inference"}
    assert env.condition("batch", "Borrowed")["status"] == "True"
    online = {h.name for h in SPEC.hosts if h.pool == "online-inference"}
    lent = next(p for p in env.pods("batch") if p["spec"]["nodeName"] in online)
    tolerated = {t.get("value") for t in lent["spec"].get("tolerations") or []}
    assert "online-inference" in tolerated  # added by rackwise to the pods it makes
    assert metric('rackwise_lent_gpus{pool="online-inference"}') >= 0
    env.post(training_job("serve", 2, pool="online-inference"))
    # no checkpoint within the deadline: the owner waits for it (capacity may free first),
    # saying so, and the borrower keeps running meanwhile
    env.wait(
        "serve waits for its deadline",
        lambda: "unless capacity frees first" in env.condition("serve").get("message", ""),
    )
    assert env.condition("serve")["reason"] == "WaitingForPreemption"
    assert env.condition("batch", "Reclaimed").get("reason") != "Reclaimed"
    env.wait(
        "batch reclaimed",
        lambda: env.condition("batch", "Reclaimed").get("reason") == "Reclaimed",
        timeout=DEADLINE_S + 45,
    )
    # evicted at the deadline, on the operator's clock, counted from when serve was owed it
    series = 'rackwise_reclaims_total{pool="online-inference",result="deadline"}'
    assert metric(series) == 1
    waited = metric('rackwise_reclaim_seconds_sum{pool="online-inference"}')
    assert DEADLINE_S <= waited <= DEADLINE_S + 5, waited  # evicted on the first cycle after
    env.wait_placed("serve")
    assert pools_of(env, "serve") == {"online-inference"}
    reasons = {e["reason"] for e in env.events("batch")}
    assert {"Borrowed", "Reclaimed"} <= reasons, reasons
