"""The operator reports a priced wait on the job (queue/split.py): a TrainingJob that states
its model, parallelism and run time, whose expert-parallel block no placement keeps now,
waits for the NVLink domain that frees soon, with both figures in its condition, and its
pods are bound there once it is free; told that the domain frees late, it starts split."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.controller.config import OperatorConfig
from scheduler.devtools.fake import node_manifest
from scheduler.topology import generate
from tests.unit.controller.test_reconciler import Clock, Driven, MemoryApi

# two racks, each one NVLink domain of 4 trays of 4 GPUs (a small NVL72)
NVL = generate(blocks=1, racks=2, hosts=4, gpus=4, nvlink=4)
MOE = {"paramsB": 16, "activeParamsB": 3, "hidden": 4096, "layers": 16, "seq": 4096,
       "microBatches": 8, "moeShare": 1, "topk": 8}  # fmt: skip
HOURS = 3600


def on(*hosts: str) -> dict[str, Any]:
    """A pod template pinned to these trays (required node affinity on the hostname)."""
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                  "values": list(hosts)}]}  # fmt: skip
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}  # fmt: skip
    container = {"name": "main", "image": "busybox"}
    return {"spec": {"containers": [container], "affinity": affinity}}


@pytest.fixture
def api() -> MemoryApi:
    config = OperatorConfig()
    memory = MemoryApi(config)
    memory.node_objs = {h.name: node_manifest(h, config) for h in NVL.hosts}
    return memory


def three_and_one(api: MemoryApi, reconciler: Driven, short_s: int) -> None:
    """One tray taken in the first domain, three in the second for `short_s`: the only
    placement of 4 trays now is 3 + 1, which splits an EP block of two trays."""
    api.submit("rest", 1, gpusPerReplica=4, template=on("h0-0"))
    api.submit("short", 3, gpusPerReplica=4, expectedRuntimeSeconds=short_s,
               template=on("h1-0", "h1-1", "h1-2"))  # fmt: skip
    for _ in range(2):
        reconciler.cycle()
    assert all(api.nodes_of("short").values())
    api.submit("moe", 4, at="2026-12-01T00:01:00Z", gpusPerReplica=4,
               parallelism={"dp": 16, "ep": 8}, model=MOE,
               expectedRuntimeSeconds=6 * HOURS)  # fmt: skip
    for _ in range(2):
        reconciler.cycle()


def test_a_job_waits_for_the_domain_that_frees_soon_and_says_why(api):
    clock = Clock()
    reconciler = Driven(api, clock)
    three_and_one(api, reconciler, short_s=600)
    assert api.reason("moe") == "WaitingToKeepSlices"
    assert not any(api.nodes_of("moe").values())
    placed = next(c for c in api.job_objs["moe"]["status"]["conditions"] if c["type"] == "Placed")
    assert "waits ~10 min" in placed["message"]
    assert "over 6.0 h" in placed["message"]


def test_a_job_starts_split_when_the_domain_frees_late(api):
    clock = Clock()
    reconciler = Driven(api, clock)
    three_and_one(api, reconciler, short_s=20 * HOURS)
    nodes = api.nodes_of("moe")
    assert all(nodes.values())
    assert sorted(nodes.values()) == ["h0-1", "h0-2", "h0-3", "h1-3"]
