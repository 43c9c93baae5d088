"""Quiet cycles (`QueueConfig.report_waits` off: the simulator's) pass over gangs known to be
blocked without looking at each; they must decide exactly what cycles that look at every
waiting gang decide. An overloaded run with every queue rule on is replayed both ways."""

from __future__ import annotations

import random

import pytest

from scheduler.model.policy import LendingMode
from scheduler.queue import Backfill
from scheduler.simulation.config import Failures, SimConfig
from scheduler.simulation.engine import Simulation
from scheduler.simulation.trace import TraceJob
from scheduler.teams import PoolQuota, QueueSpec, Resource, Teams
from scheduler.topology import Fabric, generate

FABRIC = Fabric(generate(blocks=2, racks=3, hosts=4, gpus=8))  # 192 GPUs


def overload(seed: int, n: int = 300) -> list[TraceJob]:
    """About three times the fabric's GPU-hours within the window: hundreds wait at once,
    most of them of a shape (and priority) another gang already found no room for."""
    rng = random.Random(seed)
    jobs = []
    for i in range(n):
        gpus = rng.choice([8, 8, 8, 16, 16, 32, 64, 96, 4, 2])
        jobs.append(
            TraceJob(
                id=f"j{i}",
                submit_s=rng.uniform(0, 20_000),
                duration_s=rng.lognormvariate(8, 1),
                gpus=gpus,
                priority=rng.choice([0, 0, 0, 5, 10]),
            )
        )
    return jobs


def decisions(policy: str, seed: int, quiet: bool, **rules: object):
    failures = Failures(mtbf_hours=200, mttr_hours=1)
    config = SimConfig.of(
        seed=seed,
        failures=failures,
        checkpoint_minutes=20,
        report_waits=not quiet,
        defrag_moves_per_hour=6,
        max_attempts=4,  # small, so that tries run out and the rest is passed over
        **rules,
    )
    result = Simulation(FABRIC, overload(seed), policy, config).run()
    moves = [(t, m.key, m.placement.hosts(), m.waiting) for t, m in result.moves]
    return result.starts, result.evictions, moves


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("policy", ["rackwise", "kueue-best-fit"])
@pytest.mark.parametrize("backfill", [Backfill.EASY, Backfill.NONE, Backfill.GREEDY])
def test_quiet_cycles_decide_what_full_cycles_decide(policy, seed, backfill):
    quiet = decisions(policy, seed, quiet=True, backfill=backfill)
    full = decisions(policy, seed, quiet=False, backfill=backfill)
    assert len(quiet[0]) > 100
    assert quiet == full


def teams() -> Teams:
    def queue(name: str, gpus: int, **extra: object) -> QueueSpec:
        quota = PoolQuota(pool="training", nominal={Resource.GPUS: gpus}, **extra)
        return QueueSpec(name=name, namespaces=(name,), cohort="all", quotas=(quota,))

    return Teams(
        queues=(
            queue("a", 96),
            queue("b", 64, borrowing_limit={Resource.GPUS: 32}),
            queue("c", 32, lending_limit={Resource.GPUS: 16}),
        )
    )


def with_tenants(jobs: list[TraceJob], seed: int) -> list[TraceJob]:
    rng = random.Random(seed)
    return [j.model_copy(update={"tenant": rng.choice("abc")}) for j in jobs]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("lending", list(LendingMode))
def test_quiet_cycles_decide_what_full_cycles_decide_under_quotas(seed, lending):
    """Gangs held by quota are passed over by shape; borrowers set aside, at most the pool's
    tries per queue; the decisions are those of cycles that look at every gang."""

    def run(quiet: bool):
        config = SimConfig.of(
            seed=seed,
            checkpoint_minutes=20,
            report_waits=not quiet,
            max_attempts=4,
            lending=lending,
        ).model_copy(update={"teams": teams()})
        result = Simulation(FABRIC, with_tenants(overload(seed), seed), "rackwise", config).run()
        return result.starts, result.evictions

    quiet, full = run(True), run(False)
    assert len(quiet[0]) > 100
    assert quiet == full
    if lending is not LendingMode.OFF:
        assert any(e.reclaimed for _, e in quiet[1])
