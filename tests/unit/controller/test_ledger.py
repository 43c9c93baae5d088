"""The incremental snapshot (controller/ledger.py): after any sequence of pods coming, going,
moving and changing, the snapshot equals one charged from scratch with the same pods."""

from __future__ import annotations

import random

import numpy as np

from scheduler.controller.cluster.ledger import Ledger
from scheduler.controller.cluster.resources import pod_charge
from scheduler.controller.runtime.objects import Pod
from scheduler.placement import Snapshot
from scheduler.topology import Fabric, generate

FABRIC = Fabric(generate(blocks=1, racks=2, hosts=3, gpus=8))
HOSTS = [h.name for h in FABRIC.hosts]
GPU = "nvidia.com/gpu"


def pod(uid: str, version: int, gpus: int, cpu: str, extra: int = 0) -> Pod:
    limits = {GPU: str(gpus), **({"example.com/nic": str(extra)} if extra else {})}
    return Pod.of(
        {
            "metadata": {
                "uid": uid,
                "name": uid,
                "namespace": "n",
                "resourceVersion": str(version),
            },
            "spec": {
                "containers": [
                    {"name": "c", "resources": {"limits": limits, "requests": {"cpu": cpu}}}
                ]
            },
        }
    )


def scratch(pods: dict[str, tuple[str, Pod]]) -> Snapshot:
    snapshot = Snapshot(FABRIC)
    for node, p in pods.values():
        used = pod_charge(p, GPU)
        snapshot.use(node, used.gpus, used.cpu_milli, used.memory_mib, 1, used.extended)
    return snapshot


def same(a: Snapshot, b: Snapshot) -> bool:
    columns = ("free_gpus", "free_cpu", "free_mem", "free_pods")
    if not all(np.array_equal(getattr(a, c), getattr(b, c)) for c in columns):
        return False
    names = set(a.free_ext) | set(b.free_ext)
    return all(np.array_equal(a.ext(n), b.ext(n)) for n in names)


def test_any_sequence_of_changes_gives_the_snapshot_from_scratch():
    rng = random.Random(7)
    ledger = Ledger(GPU)
    live: dict[str, tuple[str, Pod]] = {}
    for step in range(400):
        version = step + 1
        roll = rng.random()
        if roll < 0.4 or not live:  # a pod comes
            uid = f"p{step}"
            live[uid] = (
                rng.choice(HOSTS),
                pod(uid, version, rng.randint(0, 2), "500m", rng.randint(0, 1)),
            )
        elif roll < 0.7:  # one goes
            live.pop(rng.choice(sorted(live)))
        elif roll < 0.85:  # one changes (a new version, other requests)
            uid = rng.choice(sorted(live))
            live[uid] = (live[uid][0], pod(uid, version, rng.randint(0, 2), "1"))
        else:  # one moves to another node (the same version: the node alone differs)
            uid = rng.choice(sorted(live))
            live[uid] = (rng.choice(HOSTS), live[uid][1])
        got = ledger.update(FABRIC, list(live.values()))
        assert same(got, scratch(live)), step


def test_a_new_fabric_starts_again():
    ledger = Ledger(GPU)
    ledger.update(FABRIC, [(HOSTS[0], pod("a", 1, 8, "1"))])
    other = Fabric(generate(blocks=1, racks=2, hosts=3, gpus=8))
    got = ledger.update(other, [])
    assert int(got.free_gpus.sum()) == 6 * 8


def test_an_unreadable_pod_fills_its_node_while_it_is_there():
    ledger = Ledger(GPU)
    bad = pod("bad", 1, 1, "lots")
    got = ledger.update(FABRIC, [(HOSTS[1], bad)])
    assert got.free_gpus[1] == 0
    assert got.free_pods[1] == 0
    assert ledger.update(FABRIC, []).free_gpus[1] == 8
