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
from scheduler.pools import Lending, PoolSpec
from scheduler.queue import Backfill
from scheduler.queue.memo import Memo
from scheduler.queue.order import PoolOrder
from scheduler.queue.teams.owed import OwedBack
from scheduler.queue.views import Views
from scheduler.simulation.config import Failures, SimConfig
from scheduler.simulation.engine import Simulation
from scheduler.simulation.trace import TraceJob
from scheduler.topology import Fabric
from tests.unit.simulation.overload import overload, two_pools
from tests.unit.simulation.test_quiet import FABRIC, teams, with_tenants

UNBOUNDED = 1_000_000


def replay(policy: str, jobs: list[TraceJob], config: SimConfig, fabric: Fabric):  # type: ignore[no-untyped-def]
    result = Simulation(fabric, jobs, policy, config).run()
    return result.starts, result.evictions


def nothing_counted(_views: Views, _c: object, _v: object, order: PoolOrder) -> tuple[Bools, Bools]:
    none = np.zeros(len(order), dtype=np.bool_)
    return none, none


def both(
    policy: str, jobs: list[TraceJob], config: SimConfig, monkeypatch, fabric: Fabric = FABRIC
):  # type: ignore[no-untyped-def]
    """The decisions with the memo, how often it knew something, and the decisions without
    it (the patches end with the test)."""
    at = Memo.at
    answered = []

    def counted(self: Memo, view):  # type: ignore[no-untyped-def]
        found = at(self, view)
        answered.append(bool(found))
        return found

    monkeypatch.setattr(Memo, "at", counted)
    kept = replay(policy, jobs, config, fabric)
    monkeypatch.setattr(Memo, "learn", lambda *_: None)  # nothing known: every gang tried
    monkeypatch.setattr(OwedBack, "_failed_on", lambda *_: False)  # every reclaim tried
    # nor proven by counting (queue/counts.py): every gang placed by its policy's engine
    monkeypatch.setattr(Views, "counted", lambda *_: None)
    monkeypatch.setattr(Views, "count_blocked", nothing_counted)
    return kept, sum(answered), replay(policy, jobs, config, fabric)


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


@pytest.mark.parametrize("lending", [LendingMode.TOPOLOGY, LendingMode.QUOTA])
def test_what_is_known_unplaceable_changes_no_decision_where_pools_lend(lending, monkeypatch):
    """Pools that lend idle hosts and take them back (queue/lending.py), no teams: the second
    spine is online inference's, which lends idle hosts to training."""
    rules = (
        PoolSpec(name="training", objective="pack", borrow=True),
        PoolSpec(
            name="online-inference",
            objective="spread",
            lend=Lending(idle_after_s=300, reserve_hosts=1, reclaim_within_s=1800),
        ),
    )
    config = SimConfig.of(
        seed=1, max_attempts=UNBOUNDED, lending=lending, checkpoint_minutes=20
    ).model_copy(update={"pool_rules": rules})
    jobs = overload(1, 250)
    serving = {j.id for j in jobs[::4]}
    jobs = [
        j.model_copy(update={"pool": "online-inference", "gpus": min(j.gpus, 16)})
        if j.id in serving
        else j
        for j in jobs
    ]
    # every failure here is proven by counting (nothing is left for the memo to learn): what
    # this checks is counting, and the pass over gangs it proves blocked, against every try
    kept, _, fresh = both("rackwise", jobs, config, monkeypatch, two_pools(FABRIC))
    assert len(kept[0]) > 100
    assert any(e.reclaimed for _, e in kept[1])  # lent hosts were taken back
    assert kept == fresh
