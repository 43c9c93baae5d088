"""Lending in the simulator: the owner's gang gets the lent hosts only once the borrowed gang
has left them (at its deadline here), never while it still runs there."""

from __future__ import annotations

import pytest

from scheduler.pools import Lending, PoolSpec
from scheduler.simulation.config import SimConfig
from scheduler.simulation.engine import Simulation
from scheduler.simulation.trace import TraceJob
from scheduler.topology import Fabric, generate


def fabric() -> Fabric:
    """Rack r0 is training's, r1 and r2 online inference's: two 8-GPU hosts each."""
    spec = generate(blocks=1, racks=3, hosts=2, gpus=8)
    hosts = tuple(
        h.model_copy(
            update={"pool": "training" if h.domains["rack"] == "r0" else "online-inference"}
        )
        for h in spec.hosts
    )
    return Fabric(spec.model_copy(update={"hosts": hosts}))


def test_the_owner_starts_when_the_borrower_has_left_not_before():
    rules = (
        PoolSpec(name="training", objective="pack", borrow=True),
        PoolSpec(
            name="online-inference",
            objective="spread",
            lend=Lending(idle_after_s=0, reserve_hosts=0, reclaim_within_s=600),
        ),
    )
    jobs = [
        TraceJob(id="busy", submit_s=0, duration_s=9000, gpus=8, pool="online-inference"),
        TraceJob(id="train", submit_s=1, duration_s=5000, gpus=32, pods=4),
        TraceJob(
            id="serve", submit_s=100, duration_s=500, gpus=16, pods=2, pool="online-inference"
        ),
    ]
    config = SimConfig(pool_rules=rules, checkpoint_minutes=60)  # no checkpoint before 700
    result = Simulation(fabric(), jobs, "rackwise", config).run()
    states = {s.job.id: s for s in result.jobs}
    [(at, eviction)] = [(t, e) for t, e in result.evictions if e.reclaimed]
    assert (eviction.victim, eviction.preemptor) == ("train", "serve")
    assert at == pytest.approx(700)  # the deadline: asked at 100, 600 s to give them back
    assert states["serve"].first_start == pytest.approx(700)
    assert states["train"].restarts == 1
    assert all(s.finish is not None for s in states.values())
