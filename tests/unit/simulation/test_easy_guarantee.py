"""EASY backfilling's promise, checked on seeded overloaded replays: a gang that holds its pool's
reservation starts no later than the time that reservation first gave it, whatever was
backfilled meanwhile. It holds where estimates are exact: the oracle fabric (every run at its
compact rate), no failures, one priority, arrivals in queue order."""

from __future__ import annotations

import pytest

from scheduler.queue import Backfill, Decisions
from scheduler.simulation.config import SimConfig
from scheduler.simulation.engine import Simulation
from scheduler.simulation.profiles import FabricProfile, ProfileName
from scheduler.topology import Fabric, generate
from tests.unit.simulation.overload import overload

FABRIC = Fabric(generate(blocks=2, racks=3, hosts=4, gpus=8))  # 192 GPUs


class Promised(Simulation):
    """The first start time each reservation holder was given."""

    first: dict[str, float]

    def record(self, decisions: Decisions) -> None:
        super().record(decisions)
        for r in decisions.reservations.values():
            self.first.setdefault(r.key, r.at)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("policy", ["rackwise", "kueue-best-fit"])
def test_a_reserved_gang_starts_by_its_first_reservation(policy, seed):
    # cycles that report waits make every reservation (quiet ones only those a look needs,
    # to the same decisions: test_quiet.py)
    config = SimConfig.of(seed=seed, backfill=Backfill.EASY, report_waits=True).model_copy(
        update={"fabric": FabricProfile(name=ProfileName.ORACLE)}
    )
    sim = Promised(FABRIC, overload(seed), policy, config)
    sim.first = {}
    result = sim.run()
    started = {}
    for t, key, _ in result.starts:
        started.setdefault(key, t)
    assert len(sim.first) > 50
    late = {k: (at, started.get(k)) for k, at in sim.first.items() if started[k] > at + 1e-6}
    assert late == {}
    # backfill happened: gangs that arrived after a reserved gang started before it
    arrival = {s.job.id: s.job.submit_s for s in result.jobs}
    ahead = [
        k
        for k in started
        if any(arrival[r] < arrival[k] and started[k] < started[r] for r in sim.first)
    ]
    assert ahead
