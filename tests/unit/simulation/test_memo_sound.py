"""What the queue learns is unplaceable (queue/memo.py), kept across cycles and shared by the
gangs of a shape and priority, what it learns no reclaim makes room for (teams/owed.py, until
something running changes) and what counting proves cannot start (queue/counts.py) must
change no decision: a replay in which every waiting gang is placed by its policy's engine on
every cycle, and every owed gang's reclaim tried, decides the same, start for start and
eviction for eviction. Seeded overloaded replays with failures, several priorities
(preemption) and teams in each lending mode, so that ends, starts, evictions, reclaims and
restarts all change the views between cycles.
Tries are unbounded in both runs: a bounded budget is spent differently when nothing is known,
which is a legitimate difference, not one this test is about."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.model.policy import LendingMode
from scheduler.placement.snapshot import Bools
from scheduler.queue import Backfill
from scheduler.queue.memo import Memo
from scheduler.queue.order import PoolOrder
from scheduler.queue.teams.owed import OwedBack
from scheduler.queue.views import Views
from scheduler.simulation.config import Failures, SimConfig
from scheduler.simulation.engine import Simulation
from scheduler.simulation.trace import TraceJob
from scheduler.topology import Fabric, generate
from tests.unit.simulation.overload import overload
from tests.unit.simulation.test_quiet import teams, with_tenants

FABRIC = Fabric(generate(blocks=2, racks=3, hosts=4, gpus=8))  # 192 GPUs
UNBOUNDED = 1_000_000


def replay(policy: str, jobs: list[TraceJob], config: SimConfig):  # type: ignore[no-untyped-def]
    result = Simulation(FABRIC, jobs, policy, config).run()
    return result.starts, result.evictions


def nothing_counted(_views: Views, _c: object, _v: object, order: PoolOrder) -> tuple[Bools, Bools]:
    none = np.zeros(len(order), dtype=np.bool_)
    return none, none


def both(policy: str, jobs: list[TraceJob], config: SimConfig, monkeypatch):  # type: ignore[no-untyped-def]
    """The decisions with the memo, how often it knew something, and the decisions without
    it (the patches end with the test)."""
    at = Memo.at
    answered = []

    def counted(self: Memo, view):  # type: ignore[no-untyped-def]
        found = at(self, view)
        answered.append(bool(found))
        return found

    monkeypatch.setattr(Memo, "at", counted)
    kept = replay(policy, jobs, config)
    monkeypatch.setattr(Memo, "learn", lambda *_: None)  # nothing known: every gang tried
    monkeypatch.setattr(OwedBack, "_failed_on", lambda *_: False)  # every reclaim tried
    # nor proven by counting (queue/counts.py): every gang placed by its policy's engine
    monkeypatch.setattr(Views, "counted", lambda *_: None)
    monkeypatch.setattr(Views, "count_blocked", nothing_counted)
    return kept, sum(answered), replay(policy, jobs, config)


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("policy", ["rackwise", "kueue-best-fit"])
@pytest.mark.parametrize("backfill", [Backfill.EASY, Backfill.NONE])
def test_what_is_known_unplaceable_changes_no_decision(policy, seed, backfill, monkeypatch):
    config = SimConfig.of(
        seed=seed,
        backfill=backfill,
        failures=Failures(mtbf_hours=200, mttr_hours=1),
        max_attempts=UNBOUNDED,
    )
    jobs = overload(seed, 250, priorities=(0, 0, 0, 5))
    kept, answered, fresh = both(policy, jobs, config, monkeypatch)
    assert len(kept[0]) > 100  # starts and evictions both happened
    assert kept[1]
    assert answered > 50  # the memo was asked and knew something
    assert kept == fresh


@pytest.mark.parametrize("lending", list(LendingMode))
def test_what_is_known_unplaceable_changes_no_decision_under_quotas(lending, monkeypatch):
    config = SimConfig.of(seed=0, max_attempts=UNBOUNDED, lending=lending).model_copy(
        update={"teams": teams()}
    )
    jobs = with_tenants(overload(0, 250), 0)
    kept, answered, fresh = both("rackwise", jobs, config, monkeypatch)
    assert len(kept[0]) > 100
    assert answered > 50
    assert kept == fresh
