"""Teams' quota promises checked after every cycle of seeded, overloaded replays (teams/queues.py's
contract), each from the running gangs alone, without the queue's own ledger:
- no queue uses more than its nominal quota plus its borrowing limit (static quotas: more than
  its nominal quota);
- no cohort's members claim more than what its members lend (each queue's use beyond what it
  keeps for itself, nominal less lending limit, summed over the cohort);
- a reclaim's victim is evicted only while its queue borrows: with it, the queue uses more than
  its nominal quota (Kueue's rule for reclaiming within a cohort);
- nothing is oversubscribed."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from scheduler.model.policy import LendingMode
from scheduler.queue import Running
from scheduler.simulation.config import SimConfig
from scheduler.simulation.engine import Simulation
from scheduler.simulation.trace import TraceJob
from scheduler.teams import PoolQuota, QueueSpec, Resource, Teams
from scheduler.topology import Fabric, generate

FABRIC = Fabric(generate(blocks=2, racks=3, hosts=4, gpus=8))  # 192 GPUs
POOL = "training"
G = Resource.GPUS


def teams(within_s: float) -> Teams:
    def queue(name: str, gpus: int, cohort: str | None = "all", **extra: object) -> QueueSpec:
        quota = PoolQuota(pool=POOL, nominal={G: gpus}, **extra)
        spec = QueueSpec(name=name, namespaces=(name,), cohort=cohort, quotas=(quota,))
        return spec.model_copy(update={"reclaim_within_s": within_s})

    return Teams(
        queues=(
            queue("a", 64),
            queue("b", 48, borrowing_limit={G: 24}),
            queue("c", 40, lending_limit={G: 16}),
            queue("d", 16, cohort=None),
        )
    )


def bursts(seed: int, n: int = 240) -> list[TraceJob]:
    """Each team in bursts of its own, so that one borrows while another's quota lies idle, and
    the owner comes back for it."""
    rng = random.Random(seed)
    jobs = []
    for i in range(n):
        tenant = "abcd"[(i // 30) % 4] if rng.random() < 0.7 else rng.choice("abcd")
        jobs.append(
            TraceJob(
                id=f"j{i}",
                submit_s=i * 60.0 + rng.uniform(0, 60),
                duration_s=rng.lognormvariate(8, 1),
                gpus=rng.choice([1, 2, 4, 8, 8, 16, 16, 32, 48]),
                tenant=tenant,
            )
        )
    return jobs


def used_by_queue(running: list[Running]) -> dict[str, int]:
    used: dict[str, int] = defaultdict(int)
    for r in running:
        used[r.tenant] += r.gang.all_gpus
    return used


def check_limits(running: list[Running], spec: Teams, lending: LendingMode) -> None:
    used = used_by_queue(running)
    claims = 0
    lent = 0
    for q in spec.queues:
        quota = q.quota(POOL)
        top = quota.owned(G)
        if lending is not LendingMode.OFF and q.cohort is not None:
            top += quota.may_borrow(G) or 10**9
        assert used[q.name] <= top, f"queue {q.name} uses {used[q.name]} of {top}"
        if q.cohort is not None:
            claims += max(0, used[q.name] - quota.guaranteed(G))
            lent += quota.lendable(G)
    assert claims <= lent, f"the cohort claims {claims} of the {lent} GPUs its members lend"


class Checked(Simulation):
    """The simulator, its promises checked around each cycle."""

    lending: LendingMode
    reclaims = 0

    def _cycle(self, now: float) -> None:
        before = {r.key: r for r in self.running}
        seen = len(self.result.evictions)
        super()._cycle(now)
        after = used_by_queue(list(self.running))
        for _, e in self.result.evictions[seen:]:
            if e.reclaimed:
                self.reclaims += 1
                victim = before[e.victim]
                nominal = self.config.teams.by_name[victim.tenant].quota(POOL).owned(G)
                held = after[victim.tenant] + victim.gang.all_gpus
                assert held > nominal, f"t={now:.0f}: {e.victim}'s queue did not borrow"
        check_limits(list(self.running), self.config.teams, self.lending)
        assert (self.snapshot.free_gpus >= 0).all()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("lending", list(LendingMode))
def test_quota_promises_hold_after_every_cycle(seed, lending):
    rng = random.Random(seed)
    config = SimConfig.of(
        seed=seed, checkpoint_minutes=rng.choice([5, 20, 60]), lending=lending
    ).model_copy(update={"teams": teams(rng.choice([0.0, 120.0, 600.0]))})
    sim = Checked(FABRIC, bursts(seed), "rackwise", config)
    sim.lending = lending
    result = sim.run()
    assert len(result.starts) >= 200  # d's gangs over 16 GPUs never start
    if lending is not LendingMode.OFF:
        assert sim.reclaims > 0
