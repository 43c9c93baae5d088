"""Simulation settings shared by the engine and the scenario file."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from scheduler.model.placement import PlaceConfig
from scheduler.model.policy import SchedulingPolicy
from scheduler.pools import PoolSpec
from scheduler.queue import QueueConfig
from scheduler.simulation.profiles import CommShare, FabricProfile, RestartCost
from scheduler.teams import Teams


class Failures(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    mtbf_hours: float = Field(gt=0, description="mean time between failures of one host")
    mttr_hours: float = Field(default=4.0, gt=0)

    @property
    def mtbf_s(self) -> float:
        return self.mtbf_hours * 3600

    @property
    def mttr_s(self) -> float:
        return self.mttr_hours * 3600


class SimConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)
    seed: int = 0
    # queue rules, rackwise's mechanisms, solver limits: the operator's definition and defaults
    scheduling: SchedulingPolicy = SchedulingPolicy()
    report_waits: bool = Field(
        default=False,
        description="look at every waiting gang each cycle, as the operator does (same decisions,"
        " slower on long queues)",
    )
    samples: int = Field(default=400, ge=10, description="fragmentation samples per run")
    failures: Failures | None = None
    # share of hosts fully taken for the whole run by work outside the trace (seeded), as on a
    # busy production cluster; counted in utilisation
    background_hosts: float = Field(default=0.0, ge=0, lt=1)
    # every job checkpoints this often: a preempted, moved or failed job keeps its work up to
    # its last checkpoint
    checkpoint_minutes: float = Field(default=30.0, gt=0)
    # the world the runs assume (simulation/profiles.py): how links are provisioned and
    # shared, each job's communication share, what a restart costs
    fabric: FabricProfile = FabricProfile()
    comm_share: CommShare = CommShare()
    restart: RestartCost = RestartCost()
    # jobs submitted before this are warm-up: run, but left out of the measures
    warmup_s: float = Field(default=0.0, ge=0)
    # each pool's objective and what it lends or borrows (pools.PoolSpec, as in the operator's
    # config); a pool not named here neither lends nor borrows
    pool_rules: tuple[PoolSpec, ...] = ()
    # the teams' queues, quotas and cohorts (teams.py; none: no quotas), as in the operator's
    # Queue objects; jobs belong to them by their tenant
    teams: Teams = Teams()
    # each policy told the segments its users state for a gang's shape (placement/hints.py);
    # False: not told (rows "<policy> untold" and the oracle, where a split costs nothing)
    hints: bool = True

    @classmethod
    def of(cls, **flat: Any) -> SimConfig:
        """A run's config from flat names (tests, benchmarks): the policy's go to the policy."""
        own = {k: v for k, v in flat.items() if k in cls.model_fields}
        rest = {k: v for k, v in flat.items() if k not in own}
        return cls(**own, scheduling=SchedulingPolicy.of(**rest))

    @property
    def checkpoint_s(self) -> float:
        return self.checkpoint_minutes * 60


# a simulation's solves stop on work (CP-SAT deterministic seconds) so that a seed repeats on a
# busy machine: this much unless the policy sets its own; the wall clock is only a safety net
WORK_LIMIT = 1.0
SAFETY_S = 60.0


def queue_config(config: SimConfig, policy: str) -> QueueConfig:
    """The queue a run drives, under the scheduling policy with the simulator's two documented
    differences: solves stop on work, not on the wall clock; and rackwise's own mechanisms
    (fragmentation share, joint placement, moves) are rackwise's policy, not queue rules, so
    baseline runs have them off. Baselines' distance to the bound is not a simulator metric, so
    it is not computed; one solver worker, so a seed repeats. Baselines that lend do so as a
    quota would (model/policy.py, `without_mechanisms`)."""
    ours = policy == "rackwise"
    rules = config.scheduling if ours else config.scheduling.without_mechanisms()
    solver = rules.solver.model_copy(
        update={
            "workers": 1,
            "work_limit": rules.solver.work_limit or WORK_LIMIT,
            "time_limit_s": SAFETY_S,
        }
    )
    place = PlaceConfig(
        scheduling=rules.model_copy(update={"solver": solver}),
        policy=policy,
        seed=config.seed,
        report_bound=ours,
        report_broken=False,  # the operator's status reads it; no simulator measure does
        hints=config.hints,
    )
    return QueueConfig(place, config.report_waits, config.pool_rules, config.teams)
