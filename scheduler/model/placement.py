"""Placement results and solver configuration."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


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


class PlaceConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    policy: str = "rackwise"
    time_limit_s: float = Field(default=1.0, gt=0)
    workers: int = Field(default=2, ge=1)
    seed: int = 0
    # a gap at or under this fraction counts as good enough to stop early
    relative_gap: float = Field(default=0.0, ge=0)
    # deterministic time budget (CP-SAT "deterministic seconds") for reproducible tests
    deterministic_time: float | None = Field(default=None, gt=0)
    # weight of breaking a fully free rack, as a share of one host crossing
    fragmentation_weight: float = Field(default=0.01, ge=0, le=0.5)
    # the most J a training gang pays over its optimum to break less of the fabric
    # (placement/fragments.py), as a share of that optimum; 0 switches it off
    fragmentation_share: float = Field(default=0.05, ge=0, le=1)
    # compute the lower bound for decisions not already proven optimal (costs time at scale)
    report_bound: bool = True
    # patience: a gang that would fit inside one spine of its empty pool waits up to this long
    # for a placement inside one spine rather than take one that spans spines now (0: never)
    compact_wait_s: float = Field(default=0.0, ge=0)
    # how long this gang has waited so far (the caller's clock)
    waited_s: float = Field(default=0.0, ge=0)
    # "auto": exact tree DP where the objective decomposes along the tree, CP-SAT elsewhere;
    # "cp-sat": the CP-SAT model always, warm-started from the best baseline
    engine: Literal["auto", "cp-sat"] = "auto"
