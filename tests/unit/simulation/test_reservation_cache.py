"""EASY's reservation is kept between cycles while what it was made on is unchanged (the view,
the pool's running gangs, the cycle's starts): checked on seeded overloaded replays against the
reservation computed from scratch at every cycle it is asked for, with failures and several
priorities, so that ends, starts, evictions and restarts all happen."""

from __future__ import annotations

import pytest

import scheduler.queue.consider as queue_module
from scheduler.queue import Backfill
from scheduler.queue.consider import Consider
from scheduler.queue.reservation import reserve
from scheduler.simulation.config import Failures, SimConfig
from scheduler.simulation.engine import Simulation
from scheduler.topology import Fabric, generate
from tests.unit.simulation.overload import overload

FABRIC = Fabric(generate(blocks=2, racks=3, hosts=4, gpus=8))  # 192 GPUs
SIZES = (8, 8, 16, 32, 64, 96, 4, 1)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("policy", ["rackwise", "kueue-best-fit"])
def test_a_kept_reservation_is_the_one_made_from_scratch(policy, seed, monkeypatch):
    """Also: a reservation made later than asked for (`Pool.reservation`) is the one its gang's
    view gave when it blocked, though the walk has started gangs since."""
    kept, made = Consider._reserving, []
    asked = []

    def counted(*args):  # type: ignore[no-untyped-def]
        made.append(1)
        return reserve(*args)

    def checked(self, c, entry, v):  # type: ignore[no-untyped-def]
        later = kept(self, c, entry, v)
        pool = entry.gang.pool
        mine = [r for r in (*c.leaving, *c.started) if r.gang.pool == pool]
        releases = c.index.releases(pool, mine)
        fresh = reserve(entry.key, v.snapshot, entry.gang, releases, self.config)

        def when_asked():  # type: ignore[no-untyped-def]
            found = later()
            asked.append(1)
            assert found == fresh, f"{entry.key} at {c.now}"
            return found

        return when_asked

    monkeypatch.setattr(Consider, "_reserving", checked)
    monkeypatch.setattr(queue_module, "reserve", counted)
    config = SimConfig.of(seed=seed, backfill=Backfill.EASY).model_copy(
        update={"failures": Failures(mtbf_hours=48.0, mttr_hours=1.0)}
    )
    result = Simulation(FABRIC, overload(seed, 250, SIZES, (0, 0, 0, 5)), policy, config).run()
    assert len(asked) > 100
    assert len(made) < len(asked)  # some were kept: the cache was exercised
    assert result.evictions
