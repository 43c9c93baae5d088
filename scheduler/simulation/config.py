"""Simulation settings shared by the engine and the scenario file."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from scheduler.model.placement import PlaceConfig
from scheduler.queue import Backfill, Preemption, QueueConfig
from scheduler.simulation.profiles import CommShare, FabricProfile, RestartCost


class Failures(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    mtbf_hours: float = Field(gt=0, description="mean time between failures of one host")
    mttr_hours: float = Field(default=4.0, gt=0)
    checkpoint_minutes: float = Field(default=30.0, gt=0)

    @property
    def mtbf_s(self) -> float:
        return self.mtbf_hours * 3600

    @property
    def mttr_s(self) -> float:
        return self.mttr_hours * 3600

    @property
    def checkpoint_s(self) -> float:
        return self.checkpoint_minutes * 60


class SimConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)
    seed: int = 0
    # the solver's work limit per gang (CP-SAT deterministic seconds): a seed gives the same
    # decisions on a busy machine; the wall-clock limit is only a safety net far above it
    work_limit: float = Field(default=1.0, gt=0)
    time_limit_s: float = Field(default=60.0, gt=0)
    max_attempts: int = Field(default=64, ge=1, description="placement tries per pool per cycle")
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
    # queue rules, the same for every policy (the fair protocol reports them apart):
    # patience, seconds a gang may wait for a one-spine placement (PlaceConfig.compact_wait_s)
    compact_wait_s: float = Field(default=0.0, ge=0)
    # backfill (queue/types.py): none (strict order), greedy, or EASY with reservations
    backfill: Backfill = Backfill.EASY
    # preemption of lower-priority gangs (queue/preemption.py); nothing happens when every job
    # has the same priority
    preemption: Preemption = Preemption.TOPOLOGY
    # what a preempted job keeps: its work up to its last checkpoint (failures has its own)
    checkpoint_minutes: float = Field(default=30.0, gt=0)
    # the world the runs assume (simulation/profiles.py): how links are provisioned and
    # shared, each job's communication share, what a restart costs
    fabric: FabricProfile = FabricProfile()
    comm_share: CommShare = CommShare()
    restart: RestartCost = RestartCost()
    # jobs submitted before this are warm-up: run, but left out of the measures
    warmup_s: float = Field(default=0.0, ge=0)
    # rackwise's own mechanisms: its policy, not queue rules, so baselines never get them (the
    # fair protocol reports rackwise with each switched off as rows of their own)
    # - J traded for breaking fewer whole domains (PlaceConfig.fragmentation_share)
    fragmentation_share: float = Field(default=0.05, ge=0, le=1)
    # - joint placement of a cycle's starts and blocked gangs (QueueConfig.joint_gangs)
    joint_gangs: int = Field(default=8, ge=0)
    # - moves at checkpoints per hour (QueueConfig.defrag_moves_per_hour); off by default, as
    #   in the operator: under the fabric model a move pays its restart and, on the protocol's
    #   workloads, bought nothing measurable (README, "Benchmarks"); every job
    #   checkpoints every checkpoint_s here
    defrag_moves_per_hour: float = Field(default=0.0, ge=0)

    @property
    def checkpoint_s(self) -> float:
        return (self.failures.checkpoint_minutes if self.failures else self.checkpoint_minutes) * 60


def queue_config(config: SimConfig, policy: str) -> QueueConfig:
    """The queue a run drives. Queue rules (patience, backfill, preemption) are the same for
    every policy; rackwise's own mechanisms only for rackwise; baselines' distance to the bound
    is not a simulator metric, so it is not computed; nothing reads waits, so cycles pass over
    gangs known to be blocked."""
    ours = policy == "rackwise"
    place = PlaceConfig(
        policy=policy,
        time_limit_s=config.time_limit_s,
        deterministic_time=config.work_limit,
        seed=config.seed,
        workers=1,
        report_bound=ours,
        compact_wait_s=config.compact_wait_s,
        fragmentation_share=config.fragmentation_share if ours else 0.0,
    )
    return QueueConfig(
        place=place,
        backfill=config.backfill,
        preemption=config.preemption,
        max_attempts=config.max_attempts,
        cross_tenant=True,
        joint_gangs=config.joint_gangs if ours else 0,
        defrag_moves_per_hour=config.defrag_moves_per_hour if ours else 0.0,
        report_waits=config.report_waits,
    )
