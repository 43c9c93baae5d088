"""Pools' promises checked after every cycle of seeded replays of a small tiered-pools scenario
(training borrows online inference's idle racks; simulations/scenarios/tiered-pools.yaml's rules
on a smaller fabric), each from the running gangs alone:
- a gang runs on its own pool's hosts, or on a lending pool's when its own pool borrows and
  lending is on; never on a pool that does not lend, and static pools lend nothing;
- the lender's reserve stays unlent: at most its hosts less `reserveHosts` carry borrowed pods;
- a lender by the rack (`unit: rack`): a borrowed gang starts in no rack the lender's own gangs
  run in (by the host: anywhere idle; both units replayed);
- a reclaimed gang was on lent hosts, and left within the lender's `reclaimWithinSeconds`;
- a preemption's victim has a lower priority than the gang it makes room for;
- nothing is oversubscribed."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from scheduler.model.policy import LendingMode
from scheduler.model.topology import TopologySpec
from scheduler.pools import LendUnit
from scheduler.queue import Running
from scheduler.queue.teams.lent import demand_by_pool
from scheduler.queue.types import Eviction
from scheduler.simulation.engine import Simulation
from scheduler.simulation.scenario import (
    GenerateSpec,
    Scenario,
    build_topology,
    load_scenario,
    seed_jobs,
)
from scheduler.teams import PoolQuota, QueueSpec, Resource, Teams
from scheduler.topology import Fabric

TRAIN, ONLINE = "training", "online-inference"
SCENARIO = Path(__file__).resolve().parents[3] / "simulations" / "scenarios" / "tiered-pools.yaml"


def small(
    lending: LendingMode, unit: LendUnit = LendUnit.HOST
) -> tuple[Scenario, Path, TopologySpec]:
    scenario, base = load_scenario(SCENARIO)
    topology = scenario.topology.model_copy(
        update={"generate": GenerateSpec(blocks=2, racks=4, hosts=4, gpus=8)}
    )
    traces = [t.model_copy(update={"days": 2.0}) for t in scenario.traces]
    policy = scenario.scheduling.model_copy(update={"lending": lending})
    # a small reserve, so that the lender's peak needs what it lent, and a short deadline, so
    # that some reclaims cannot wait for capacity to free (a deferred one that can is no reclaim)
    rules = tuple(
        r.model_copy(
            update={
                "lend": r.lend.model_copy(
                    update={"reserve_hosts": 2, "reclaim_within_s": 120.0, "unit": unit}
                )
            }
        )
        if r.lend is not None
        else r
        for r in scenario.pool_rules
    )
    update = {"topology": topology, "traces": traces, "scheduling": policy, "pool_rules": rules}
    scenario = scenario.model_copy(update={**update, "warmup_s": 0.0})
    return scenario, base, build_topology(scenario, base)


class Checked(Simulation):
    lending: LendingMode
    reclaims = 0
    preemptions = 0
    borrowed = 0

    def _cycle(self, now: float) -> None:
        before = {r.key: r for r in self.running}
        seen = len(self.result.evictions)
        super()._cycle(now)
        rules = {p.name: p for p in self.config.pool_rules}
        for _, e in self.result.evictions[seen:]:
            victim = before[e.victim]
            if e.reclaimed:
                self.reclaims += 1
                self._check_reclaim(before, e, rules)
            else:
                self.preemptions += 1
                preemptor = self.by_key[e.preemptor].gang.priority
                assert victim.gang.priority < preemptor, f"{e.victim} preempted by an equal"
        self._check_hosts(rules)
        self._check_racks(before, rules)
        assert (self.snapshot.free_gpus >= 0).all()

    def _check_racks(self, before: dict[str, Running], rules: dict) -> None:
        """A lender by the rack: a gang borrowing this cycle starts in no rack where one of
        the lender's own gangs runs."""
        rack = {h.name: h.domains["rack"] for h in self.fabric.hosts}
        own: dict[str, set[str]] = {}  # pool -> racks its own gangs run in
        for r in self.running:
            own.setdefault(r.gang.pool, set()).update(rack[h] for h in r.placement.hosts())
        for r in self.running:
            if r.key in before:
                continue
            for host in r.placement.hosts():
                lend = rules[self.fabric.host_pool[host]].lend
                if self.fabric.host_pool[host] != r.gang.pool and lend.unit is LendUnit.RACK:
                    assert rack[host] not in own.get(self.fabric.host_pool[host], set()), r.key

    def _check_reclaim(self, before: dict[str, Running], e: Eviction, rules: dict) -> None:
        victim = before[e.victim]
        pools = {self.fabric.host_pool[h] for h in victim.placement.hosts()}
        lender = [p for p in pools if p != victim.gang.pool]
        assert lender, f"{e.victim} was reclaimed from its own pool's hosts"
        lend = rules[lender[0]].lend
        assert lend is not None
        assert e.waited_s <= lend.reclaim_within_s + 1e-6

    def _check_hosts(self, rules: dict) -> None:
        lent_hosts: dict[str, set[str]] = {}
        for r in self.running:
            for host in r.placement.hosts():
                pool = self.fabric.host_pool[host]
                if pool == r.gang.pool:
                    continue
                self.borrowed += 1
                assert self.lending is not LendingMode.OFF, f"{r.key} on {pool}: nothing is lent"
                assert rules[r.gang.pool].borrow
                assert rules[pool].lend is not None
                lent_hosts.setdefault(pool, set()).add(host)
        for pool, hosts in lent_hosts.items():
            lend = rules[pool].lend
            assert lend is not None
            mine = sum(1 for p in self.fabric.host_pool.values() if p == pool)
            assert len(hosts) <= mine - lend.reserve_hosts


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize(
    ("lending", "unit"),
    [*((mode, LendUnit.HOST) for mode in LendingMode), (LendingMode.TOPOLOGY, LendUnit.RACK)],
)
def test_pool_promises_hold_after_every_cycle(seed, lending, unit):
    scenario, base, spec = small(lending, unit)
    rng = random.Random(seed)
    jobs = seed_jobs(scenario, base, spec, seed)
    jobs = [
        j.model_copy(update={"priority": rng.choice([0, 0, 5, 10])}) if j.pool == TRAIN else j
        for j in jobs
    ]
    sim = Checked(Fabric(spec), jobs, "rackwise", scenario.sim_config(seed))
    sim.lending = lending
    result = sim.run()
    assert len(result.starts) > 100
    assert sim.preemptions > 0
    if lending is not LendingMode.OFF:
        assert sim.borrowed > 0
        assert sim.reclaims > 0


def two_teams_and_serving(fabric: Fabric) -> Teams:
    """Teams a and b in one cohort, each owed three quarters of training's GPUs, b borrowing at
    most 32 of a's; serving owns online inference's (the default queue: online gangs name no
    team) and lends them through the cohort, at most `LENDS`: what a training gang uses of
    online inference's lent hosts is borrowed from it."""
    gpus = dict.fromkeys(fabric.pool_mask, 0)
    for h in fabric.hosts:
        gpus[h.pool] += h.gpus
    share = gpus[TRAIN] * 3 // 4

    def queue(name: str, pool: str, nominal: int, **extra: object) -> QueueSpec:
        quota = PoolQuota(pool=pool, nominal={Resource.GPUS: nominal}, **extra)
        return QueueSpec(
            name=name, namespaces=(name,), cohort="all", quotas=(quota,), reclaim_within_s=120.0
        )

    lends = {"lending_limit": {Resource.GPUS: LENDS}}
    serving = queue("serving", ONLINE, gpus[ONLINE], **lends).model_copy(update={"default": True})
    return Teams(
        queues=(
            queue("a", TRAIN, share),
            queue("b", TRAIN, share, borrowing_limit={Resource.GPUS: 32}),
            serving,
        )
    )


LENDS = 64  # of online inference's 128 GPUs


def used_by_pool(fabric: Fabric, running: list[Running]) -> dict[tuple[str, str], int]:
    """(queue, pool) -> GPUs its gangs hold on the pool's hosts (tenant "": serving)."""
    used: dict[tuple[str, str], int] = {}
    for r in running:
        name = r.tenant or "serving"
        for pool, d in demand_by_pool(fabric.host_pool, r.gang, r.placement).items():
            used[(name, pool)] = used.get((name, pool), 0) + d[0]
    return used


class CheckedTeams(Checked):
    """Pool lending's promises and the teams' quota, per pool of the hosts a gang runs on (a
    training gang on lent hosts uses online inference's quota, borrowed from serving): a queue
    uses at most its nominal quota and what it may borrow of each pool, the cohort at most what
    its members lend of each, and a reclaim's victim used more than its queue's nominal quota of
    the pool its owner reclaims."""

    def _check_reclaim(self, before: dict[str, Running], e: Eviction, rules: dict) -> None:
        pool = self.by_key[e.preemptor].gang.pool
        if pool == ONLINE:  # lent hosts taken back (pool lending's or serving's reclaim)
            super()._check_reclaim(before, e, rules)
        victim = before[e.victim]
        queue = victim.tenant or "serving"
        used = used_by_pool(self.fabric, list(before.values())).get((queue, pool), 0)
        spec = self.config.teams.by_name[queue]
        assert used > spec.quota(pool).owned(Resource.GPUS), f"{e.victim}'s {queue} did not borrow"
        assert e.waited_s <= spec.reclaim_within_s + 1e-6

    def _cycle(self, now: float) -> None:
        before = {r.key for r in self.running}
        seen = len(self.result.evictions)
        super()._cycle(now)
        victims = [e.victim for _, e in self.result.evictions[seen:]]
        assert len(victims) == len(set(victims)), f"t={now:.0f}: a gang evicted twice"
        assert before.issuperset(victims)
        used = used_by_pool(self.fabric, list(self.running))
        for pool in (TRAIN, ONLINE):
            claims, lent = 0, 0
            for q in self.config.teams.queues:
                quota = q.quota(pool)
                top = quota.owned(Resource.GPUS) + (quota.may_borrow(Resource.GPUS) or 10**9)
                mine = used.get((q.name, pool), 0)
                assert mine <= top, f"t={now:.0f}: {q.name} uses {mine} of {pool}"
                claims += max(0, mine - quota.guaranteed(Resource.GPUS))
                lent += quota.lendable(Resource.GPUS)
            assert claims <= lent, f"t={now:.0f}: the cohort claims {claims} of {pool}'s {lent}"


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("lending", [LendingMode.TOPOLOGY, LendingMode.QUOTA])
def test_pool_lending_under_team_quotas_keeps_both_promises(seed, lending):
    """Pool lending and team queues at once: a gang starts on lent hosts only as the quota of
    each pool it runs on allows (the lender's borrowed through the cohort, within serving's
    lending limit); the reclaims (a lender's gang taking its hosts back, a team taking its
    quota back) never evict a gang twice or one whose queue does not borrow, nor oversubscribe
    a host."""
    scenario, base, spec = small(lending)
    fabric = Fabric(spec)
    rng = random.Random(seed)
    jobs = [
        j.model_copy(update={"tenant": rng.choice("ab"), "priority": rng.choice([0, 0, 5])})
        if j.pool == TRAIN
        else j
        for j in seed_jobs(scenario, base, spec, seed)
    ]
    config = scenario.sim_config(seed).model_copy(update={"teams": two_teams_and_serving(fabric)})
    sim = CheckedTeams(fabric, jobs, "rackwise", config)
    sim.lending = lending
    result = sim.run()
    assert len(result.starts) > 100
    assert sim.borrowed > 0
    assert sim.reclaims > 0
