"""Tiered pools on the real API server: a batch gang borrows idle online-inference nodes, an
online gang arrives and waits for its deadline (the borrower has no checkpoint within it), the
batch gang is taken back at the deadline and the online gang is placed there. Then, with team
Queues, what a gang uses of lent nodes is borrowed from the lender pool's quota through the
cohort, within the lender Queue's lending limit. Its own cluster and operator: the lending rules
are this operator's config."""

from __future__ import annotations

import json
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


QUEUES = """
apiVersion: rackwise.io/v1alpha1
kind: Queue
metadata: {name: batch}
spec:
  cohort: c
  namespaces: [default]
  quotas: [{pool: batch-inference, nominal: {gpus: 16}}]
---
apiVersion: rackwise.io/v1alpha1
kind: Queue
metadata: {name: serving}
spec:
  cohort: c
  quotas: [{pool: online-inference, nominal: {gpus: 16}, lendingLimit: {gpus: LENDS}}]
"""


def test_with_queues_lent_nodes_are_borrowed_from_the_lenders_quota(lending_env: Env):
    """Team Queues on the same cluster: what the batch gang uses of lent online nodes is charged
    to online inference's quota, which serving lends through cohort c. Lending 8 GPUs, the
    32-GPU gang (16 on lent nodes) waits and says why; lending 16, it is placed and its Queue
    counts the 16 under online inference, as borrowed."""
    env = lending_env
    env.kubectl("delete", "trainingjobs", "--all", "--wait=true")
    env.wait("the first test's pods gone", lambda: not env.pods("batch") and not env.pods("serve"))
    env.kubectl("wait", "--for=condition=Established", "crd/queues.rackwise.io", "--timeout=60s")
    env.kubectl("apply", "-f", "-", stdin=QUEUES.replace("LENDS", "8"))
    env.post(training_job("big", 4, pool="batch-inference", checkpointIntervalSeconds=3600))
    env.wait(
        "big waits for serving's quota",
        lambda: env.condition("big").get("reason") == "WaitingToBorrow",
    )
    message = env.condition("big")["message"]
    assert "online-inference's lent hosts" in message, message
    assert "cohort c has 8 GPUs left to lend to queue batch" in message, message
    env.kubectl("apply", "-f", "-", stdin=QUEUES.replace("LENDS", "16"))
    env.wait_placed("big")
    assert pools_of(env, "big") == {"batch-inference", "online-inference"}

    def counted() -> bool:
        status = env.kubectl("get", "queue", "batch", "-o", "json").stdout
        found = json.loads(status).get("status") or {}
        used = {p["pool"]: p["used"]["gpus"] for p in found.get("pools", [])}
        return used == {"batch-inference": 16, "online-inference": 16} and (
            found.get("borrowedGPUs") == 16
        )

    env.wait("batch's Queue counts the lent GPUs under online inference", counted)
