"""The scheduling policy: every queue rule, rackwise mechanism and solver limit, declared once.

The operator's config nests it as `scheduling:` and a simulation scenario as `scheduling:`; the
queue and the placement engines read it from there. One set of defaults serves both drivers, so
the simulator predicts what the operator does. The drivers differ in two documented places only:
- a simulation's solves stop on a work limit (`Solver.work_limit`, 1.0 deterministic seconds when
  the policy leaves it unset) so that a seed repeats on a busy machine (simulation/config.py);
- a comparison's baseline rows run without rackwise's own mechanisms (fragmentation share,
  joint placement, moves), which are rackwise's policy, not queue rules (simulation/config.py).
Per-call state (how long a gang has waited, which placement policy a run compares) is not here.
Names are snake_case; each also has the camelCase alias a Kubernetes config uses.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Backfill(StrEnum):
    # nothing passes a gang that cannot start in its pool (strict order)
    NONE = "none"
    # any later gang that fits starts now; large gangs can starve behind a stream of small ones
    GREEDY = "greedy"
    # EASY: the first gang of a pool that cannot start reserves the hosts it will get once enough
    # running gangs end; later gangs start outside them, or inside when their estimate says they
    # end before that time
    EASY = "easy"


class Preemption(StrEnum):
    OFF = "off"
    # free the most compact domain at the least loss (queue/preemption.py)
    TOPOLOGY = "topology"
    # the baseline: lowest priority first, most recently started first, until the gang fits
    LOWEST_FIRST = "lowest-priority-first"


class PreemptionScope(StrEnum):
    # a gang evicts lower priorities of its own tenant only (a namespace in the operator; as
    # Kueue's withinClusterQueue: LowerPriority): one tenant's priority field cannot reach others
    TENANT = "tenant"
    CLUSTER = "cluster"


class LendingMode(StrEnum):
    # pools never lend (static isolation)
    OFF = "off"
    # rackwise (queue/lending.py): whole racks idle for a while (and idle hosts, where the
    # lender lends by the host), taken back at the borrowers' checkpoints within the lender's
    # deadline, the fewest borrowed gangs that make room
    TOPOLOGY = "topology"
    # the baseline, as quota borrowing (Kueue cohorts): any idle host beyond the reserve, at
    # once; taken back by evicting the newest borrowed gangs at once until the owner fits
    QUOTA = "quota"


class _Knobs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class Solver(_Knobs):
    """How long a placement may search. `work_limit` (CP-SAT deterministic seconds) makes a
    decision repeat whatever the machine's load; `time_limit_s` is the wall-clock limit."""

    # "auto": exact tree DP where the objective decomposes along the tree, CP-SAT elsewhere;
    # "cp-sat": the CP-SAT model always, warm-started from the best baseline
    engine: Literal["auto", "cp-sat"] = "auto"
    time_limit_s: float = Field(default=1.0, gt=0, alias="timeLimitSeconds")
    work_limit: float | None = Field(default=None, gt=0, alias="workLimit")
    workers: int = Field(default=2, ge=1)
    # a gap at or under this fraction counts as good enough to stop early
    relative_gap: float = Field(default=0.0, ge=0, alias="relativeGap")


class SchedulingPolicy(_Knobs):
    # --- queue rules: a comparison gives every policy the same ones ---
    backfill: Backfill = Backfill.EASY
    preemption: Preemption = Preemption.TOPOLOGY
    preemption_scope: PreemptionScope = Field(
        default=PreemptionScope.TENANT, alias="preemptionScope"
    )
    # patience: a gang that would fit inside one spine of its empty pool waits up to this long
    # for such a placement rather than take one that spans spines now (0: never waits)
    compact_wait_s: float = Field(default=0.0, ge=0, alias="compactWaitSeconds")
    # placement tries per pool per cycle: a long queue cannot make one cycle unbounded
    max_attempts: int = Field(default=64, ge=1, alias="maxAttemptsPerCycle")
    # domains examined per level when choosing victims (the freest first)
    preemption_domains: int = Field(default=32, ge=1, alias="preemptionDomains")
    # --- rackwise's own mechanisms (docs/design.md) ---
    # the most J a training gang pays over its optimum to break fewer whole domains
    # (placement/fragments.py), as a share of that optimum (0: off); and the weight of
    # breaking a wholly free rack in J, as a share of one host crossing
    fragmentation_share: float = Field(default=0.05, ge=0, le=1, alias="fragmentationShare")
    fragmentation_weight: float = Field(default=0.01, ge=0, le=0.5, alias="fragmentationWeight")
    # J prices each oversubscribed uplink a training gang crosses by the running gangs already
    # crossing it (placement/scoring.py, its load term); off by default: measured no better
    # than the ring weight alone (docs/design.md, "What the objective sees of it")
    contention: bool = False
    # joint placement (checkpoints/joint.py): the first this many training gangs a cycle starts are
    # placed again together when that lowers their total J; below 2 switches it off
    joint_gangs: int = Field(default=8, ge=0, alias="jointGangs")
    # moves at checkpoints (checkpoints/defrag.py): carried out per hour at most (0: off; in the
    # operator a job moves only after it signals a checkpoint), the share of its own J a move
    # for a gang's own sake must save, the running gangs tried per waiting gang
    defrag_moves_per_hour: float = Field(default=0.0, ge=0, alias="defragMovesPerHour")
    defrag_min_gain: float = Field(default=0.3, gt=0, le=1, alias="defragMinGain")
    defrag_candidates: int = Field(default=8, ge=1, alias="defragCandidates")
    # how pools that declare `lend` lend their idle hosts (pools.Lending); nothing is lent to a
    # pool that does not declare `borrow`
    lending: LendingMode = LendingMode.TOPOLOGY
    solver: Solver = Solver()

    @classmethod
    def of(cls, **flat: Any) -> SchedulingPolicy:
        """A policy from flat names (tests, benchmarks): the solver's go to the solver."""
        solver = {k: v for k, v in flat.items() if k in Solver.model_fields}
        rest = {k: v for k, v in flat.items() if k not in solver}
        return cls(**rest, solver=Solver(**solver))

    @property
    def queue_rules(self) -> str:
        """The rules every policy of a comparison shares, as reports print them."""
        return (
            f"backfill {self.backfill}, preemption {self.preemption}, "
            f"patience {self.compact_wait_s:g} s"
        )

    @property
    def cross_tenant(self) -> bool:
        return self.preemption_scope is PreemptionScope.CLUSTER

    def without_mechanisms(self) -> SchedulingPolicy:
        """The same queue rules with rackwise's own mechanisms off (a baseline's policy): pools
        that lend do so as a quota does (Kueue's cohorts), not by racks and checkpoints."""
        lending = LendingMode.QUOTA if self.lending is LendingMode.TOPOLOGY else self.lending
        return self.model_copy(
            update={
                "fragmentation_share": 0.0,
                "contention": False,
                "joint_gangs": 0,
                "defrag_moves_per_hour": 0.0,
                "lending": lending,
            }
        )
