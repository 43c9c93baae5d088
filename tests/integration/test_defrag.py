"""Defragmentation at checkpoints on the real API server: a running job that reports its
checkpoints is marked, then moved after the checkpoint it reports, so that a job needing a
whole rack can start."""

from __future__ import annotations

import datetime

import pytest

from tests.integration.conftest import Env, training_job

pytestmark = pytest.mark.apiserver
CHECKPOINTED = "rackwise.io/checkpointed-at"


def only(env: Env, host: str, job: dict) -> None:
    """Place `job` on `host` by cordoning every other node while it is placed."""
    others = [n["metadata"]["name"] for n in env.admin.nodes() if n["metadata"]["name"] != host]
    for node in others:
        env.kubectl("cordon", node)
    env.post(job)
    env.wait_placed(job["metadata"]["name"])
    for node in others:
        env.kubectl("uncordon", node)


def rack_job(name: str) -> dict:
    return training_job(name, 2, topology={"requiredLevel": "rack"})


def test_a_job_is_moved_after_its_checkpoint_so_a_rack_job_starts(env: Env, fabric):
    fabric(blocks=1, racks=2, hosts=2, gpus=8)  # racks r0 (h0-0, h0-1) and r1 (h1-0, h1-1)
    only(env, "h0-0", training_job("movable", 1, checkpointIntervalSeconds=600))
    only(env, "h1-0", training_job("fixed", 1))
    env.post(rack_job("whole"))
    env.wait("whole waits", lambda: env.condition("whole").get("reason") == "Unplaceable")
    env.wait("mark", lambda: env.condition("movable", "MoveRequested").get("status") == "True")
    assert env.pods("movable")[0]["spec"]["nodeName"] == "h0-0"  # nothing moves before
    assert env.condition("fixed", "MoveRequested") == {}  # it reports no checkpoints
    # a checkpoint after the mark: whole seconds could fall before it, within the same second
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds")
    env.kubectl("annotate", "tj", "movable", f"{CHECKPOINTED}={now}")
    env.wait_placed("whole")
    racks = {env.node_rack()[p["spec"]["nodeName"]] for p in env.pods("whole")}
    assert len(racks) == 1
    env.wait_placed("movable")
    assert env.pods("movable")[0]["spec"]["nodeName"] == "h1-1"
    assert any(e["reason"] == "Moved" for e in env.events("movable"))
    assert env.condition("movable", "MoveRequested") == {}
    assert env.pods("fixed")[0]["spec"]["nodeName"] == "h1-0"
