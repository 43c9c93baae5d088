"""Placement results and solver configuration."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from scheduler.model.gang import Slice
from scheduler.model.policy import SchedulingPolicy, Solver


class PlacementStatus(StrEnum):
    PLACED = "placed"
    UNPLACEABLE = "unplaceable"
    # a placement exists but the policy chose to wait for a better one (patience)
    WAITING = "waiting"


class PodAssignment(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    rank: int = Field(ge=0)  # global: workers first, then each role in the gang's order
    host: str
    role: str = ""  # "" for the workers, else the role's name
    role_rank: int | None = None  # rank within the role (roles only; workers: `rank`)


class Placement(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    gang: str
    policy: str
    status: PlacementStatus
    pods: tuple[PodAssignment, ...] = ()
    # level -> number of distinct domains the gang spans
    domains: dict[str, int] = Field(default_factory=dict)
    # level -> GB crossing that level per training step (ring all-reduce, DFS rank order)
    traffic_gb: dict[str, float] = Field(default_factory=dict)
    # traffic-model cost (cost.traffic): GB crossing each level x the level's weight
    cost: float = 0.0
    # J, what rackwise minimises for training gangs (placement/scoring.py): weighted ring
    # crossings + preferred-level penalties + fresh racks broken; every policy is scored on it
    objective: float = 0.0
    # a valid lower bound on J over every feasible placement, and the relative gap to it; None
    # where none was computed or claimed (inference pools, report_bound off)
    bound: float | None = None
    gap: float | None = None
    optimal: bool = False
    solve_seconds: float = 0.0
    # what decided: "tree-dp", "cp-sat", "warm-start" or the baseline's name
    engine: str = ""
    reason: str = ""
    # level -> wholly free domains this placement breaks (placement/fragments.py)
    broken: dict[str, int] = Field(default_factory=dict)
    # J paid over the J-optimal placement to break less, as a share of it (0: none paid)
    premium: float = 0.0
    # the gang's preferred slices this placement does not keep: none that kept them could be
    # made now (placement/hints.py; rackwise's queue prices waiting for one: queue/split.py)
    unkept: tuple[Slice, ...] = ()

    @property
    def placed(self) -> bool:
        return self.status is PlacementStatus.PLACED

    def hosts(self, role: str | None = None) -> dict[str, int]:
        """host -> pods placed on it (of one role when given; "" for the workers)."""
        counts: dict[str, int] = {}
        for pod in self.pods:
            if role is None or pod.role == role:
                counts[pod.host] = counts.get(pod.host, 0) + 1
        return counts

    def roles(self) -> list[str]:
        return sorted({pod.role for pod in self.pods})


class WholeDemand(BaseModel):
    """What asks for whole switch domains of a pool while a gang would run, as the queue sees
    it (queue/consider.py): the GPUs of the other gangs waiting there and of the gangs that
    arrived over the last `span_s` seconds, each as (GPUs, gangs), and `run_s`, the placed
    gang's expected run time (0: unknown, only the waiting count)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    waiting: tuple[tuple[int, int], ...] = ()
    arrived: tuple[tuple[int, int], ...] = ()
    span_s: float = Field(default=0.0, ge=0)
    run_s: float = Field(default=0.0, ge=0)

    def domains(self, gpus: float) -> float:
        """Whole domains of `gpus` GPUs asked for while the gang runs: each waiting gang's
        whole domains, and those arriving at the window's rate over its run."""
        if gpus <= 0:
            return 0.0
        waiting = sum(n * (g // gpus) for g, n in self.waiting)
        arriving = sum(n * (g // gpus) for g, n in self.arrived)
        rate = arriving / self.span_s if self.span_s else 0.0
        return waiting + rate * self.run_s


class PlaceConfig(BaseModel):
    """One placement call's parameters: the scheduling policy, and what belongs to the call
    (which placement policy a run compares, the solver's seed, whether to prove a bound, how
    long the gang has waited so far on the caller's clock)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    scheduling: SchedulingPolicy = SchedulingPolicy()
    policy: str = "rackwise"
    seed: int = 0
    # compute the lower bound for decisions not already proven optimal (costs time at scale)
    report_bound: bool = True
    # count the whole domains a placement breaks (`broken`: the operator's status says it; a
    # pass over the pool's domains per placement, which no decision reads)
    report_broken: bool = True
    waited_s: float = Field(default=0.0, ge=0)
    # give the policy the segments a gang's parallel shape implies, read as its users state
    # them (placement/hints.py); False: the policy is not told (a row of its own, never a peer)
    hints: bool = True
    # choose which pod gets which rank by the gang's shape (placement/stages.py; rackwise's); a
    # trial that only asks where a gang would fit (EASY's reservation) keeps depth-first ranks
    stage_ranks: bool = True
    # who asks for whole domains (the queue's count; placement/fragments.py prices breaking
    # one by it); None: nothing counted, whole domains priced by their scarcity alone
    demand: WholeDemand | None = None

    @classmethod
    def of(cls, **flat: Any) -> PlaceConfig:
        """One placement's parameters from flat names (tests, benchmarks, the CLI): each name
        goes to the model that declares it (this one, else the policy: SchedulingPolicy.of)."""
        own = {k: v for k, v in flat.items() if k in cls.model_fields}
        rest = {k: v for k, v in flat.items() if k not in own}
        return cls(**own, scheduling=SchedulingPolicy.of(**rest))

    @property
    def solver(self) -> Solver:
        return self.scheduling.solver
