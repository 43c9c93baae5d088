"""What the scheduling queue takes and gives: its rules, its entries, the running gangs it may
reserve around or preempt, and one cycle's decisions."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any

from scheduler.model.gang import GangRequest, objective_of
from scheduler.model.placement import PlaceConfig, Placement
from scheduler.model.policy import SchedulingPolicy
from scheduler.pools import PoolSpec
from scheduler.teams import Teams


@dataclass(frozen=True)
class QueueConfig:
    """What a queue runs with: the placement calls' parameters (the scheduling policy in them)
    and how much it reports. `report_waits`: every waiting gang each cycle (the operator writes
    them as conditions); off, only the gangs a cycle looked at, so that a cycle can pass over
    gangs it knows cannot start without looking at each (the simulator): the same decisions."""

    place: PlaceConfig = field(default_factory=PlaceConfig)
    report_waits: bool = True
    # the pools' rules: what each lends and whether it borrows (pools.PoolSpec)
    pools: tuple[PoolSpec, ...] = ()
    # the teams' queues, quotas and cohorts (teams.py; none: no quota holds anyone)
    teams: Teams = field(default_factory=Teams)

    @classmethod
    def of(cls, report_waits: bool = True, **knobs: Any) -> QueueConfig:
        """A queue's parameters from flat names (PlaceConfig.of; tests, benchmarks)."""
        return cls(PlaceConfig.of(**knobs), report_waits)

    @property
    def policy(self) -> SchedulingPolicy:
        return self.place.scheduling

    @cached_property  # the config never changes: one copy, not one per reservation
    def trial(self) -> PlaceConfig:
        """Placement as it would be once hosts are freed: no patience, no bound to compute."""
        trial = {
            "scheduling": self._impatient,
            "report_bound": False,
            "report_broken": False,
            "stage_ranks": False,
        }
        return self.place.model_copy(update=trial)

    @cached_property
    def at_once(self) -> PlaceConfig:
        """Placement for gangs that start or move in this cycle (joint placement, moves at
        checkpoints): the queue's, less patience."""
        return self.place.model_copy(update={"scheduling": self._impatient})

    @property
    def _impatient(self) -> SchedulingPolicy:
        return self.policy.model_copy(update={"compact_wait_s": 0.0})


@dataclass(frozen=True)
class Reservation:
    """Hosts held for a pool's first blocked gang, from now until `at` (inf: unknown)."""

    key: str
    gang: str  # its name, for messages
    hosts: frozenset[int]
    at: float
    # the placement on those hosts (what a priced wait compares a split with: queue/split.py)
    placement: Placement | None = field(default=None, compare=False)


class WaitReason(StrEnum):
    UNPLACEABLE = "Unplaceable"
    # patience: a more compact placement is expected soon
    COMPACT = "WaitingForCompactPlacement"
    # strict order: an earlier gang of the pool cannot start
    BEHIND = "WaitingBehind"
    # it would fit on hosts held for an earlier gang (EASY reservation or a preemptor)
    RESERVED = "WaitingForReservation"
    # its preferred slices kept by waiting: the wait costs less than the split (queue/split.py)
    PRICED = "WaitingToKeepSlices"
    # preemption chose victims; their hosts are not free yet
    PREEMPTING = "WaitingForPreemption"
    # larger than any part of the fabric its constraints allow, even with every host free:
    # waiting cannot help (it holds no reservation and blocks no one)
    NEVER_FITS = "NeverFits"
    # its queue's quota, with what it may borrow, cannot cover it (queue/teams/quotas.py)
    QUOTA_EXCEEDED = "QuotaExceeded"
    # it may borrow, but the cohort's lendable capacity is in use, or borrowers ahead of it
    # by fair share go first
    WAITING_TO_BORROW = "WaitingToBorrow"


@dataclass(frozen=True)
class Wait:
    reason: WaitReason
    message: str


@dataclass
class Entry:
    """A queued gang. `arrival` orders equal priorities; a re-queued gang keeps its own."""

    key: str
    gang: GangRequest
    arrival: float
    tenant: str = ""
    estimate_s: float | None = None  # run time the submitter expects (EASY backfill)
    queue: str = ""  # the queue its job names ("": its namespace's; teams.Teams.queue_of)
    # False: its driver never evicts it (a pod group: rackwise only binds its pods), so it may
    # not borrow a quota nothing could take back, nor be a preemption or reclaim victim
    evictable: bool = True
    placeable_since: float | None = None  # patience counts from here
    # patience: the view fingerprint it was found placeable on, and when to look again
    failed_on: bytes | None = None
    recheck_at: float = math.inf
    last: Wait | None = None  # why it waited last time it was tried
    # a priced wait's reservation (queue/split.py): held again while its view is unchanged
    holding: Reservation | None = None
    # the reservation computed for it: on which pool version and starts of the cycle, and
    # view (its digest; None when not taken: consider.py's `_reserving`)
    reserved: tuple[tuple[int, tuple[str, ...]], bytes | None, Reservation | None] | None = None
    # queue order: priority (higher first), arrival, name, key; with teams, a place in line
    # dealt within its team queue (queue/teams/ranks.py), otherwise fixed for the entry's life
    order: tuple[int, float, str, str] = field(init=False, default=(0, 0.0, "", ""))
    shape: int = field(init=False, default=-1)  # its shape id while queued (queue/shapes.py)
    # what it asks of its queue's quota: GPUs, millicores, MiB (queue/quotas.demand), once
    demand: tuple[int, int, int] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.order = (-self.gang.priority, self.arrival, self.gang.name, self.key)

    @property
    def work_gpu_s(self) -> float:
        """The work it asks for: its GPUs x its expected run time (none when unknown)."""
        return self.gang.all_gpus * (self.estimate_s or 0.0)


@dataclass(frozen=True)
class Running:
    """A gang holding hosts: what preemption may take back and what a reservation waits for."""

    key: str
    gang: GangRequest
    placement: Placement
    started_s: float
    tenant: str = ""
    checkpoint_s: float | None = None  # checkpoint interval; None: nothing kept on eviction
    end_s: float | None = None  # estimated end; None: unknown
    # when the gang last said it checkpointed (the operator reads the job's signal); None:
    # every checkpoint_s from started_s (the simulator)
    checkpointed_s: float | None = None
    queue: str = ""  # the queue its job names ("": its namespace's; teams.Teams.queue_of)
    # the team queue that admitted it, charged until it ends whatever becomes of the Queues
    # ("": not recorded, so found as for a queued gang)
    admitted: str = ""

    @classmethod
    def of(
        cls, entry: Entry, placement: Placement, now: float, end: float | None, admitted: str
    ) -> Running:
        """The queued gang, started now on `placement`, admitted by that team queue."""
        g = entry.gang
        return cls(
            entry.key, g, placement, now, entry.tenant, None, end, None, entry.queue, admitted
        )

    @cached_property
    def movable(self) -> bool:
        """A placed training-like ("pack") gang that checkpoints: defragmentation may move it.
        Cached: a queue cycle asks it of every running gang."""
        return (
            bool(self.checkpoint_s) and self.placement.placed and objective_of(self.gang) == "pack"
        )

    def last_checkpoint(self, now: float) -> float | None:
        if self.checkpointed_s is not None:
            return self.checkpointed_s
        if not self.checkpoint_s or now < self.started_s + self.checkpoint_s * (1 - 1e-12):
            return None
        return self.started_s + self._checkpoints(now) * self.checkpoint_s

    def next_checkpoint(self, now: float) -> float:
        """When the next periodic checkpoint falls (inf when none is declared or the gang
        signals its own: its signal wakes the operator)."""
        if not self.checkpoint_s or self.checkpointed_s is not None:
            return math.inf
        return self.started_s + (self._checkpoints(now) + 1) * self.checkpoint_s

    def _checkpoints(self, now: float) -> int:
        """Periodic checkpoints taken by `now`; a wake set at one counts it despite rounding."""
        assert self.checkpoint_s
        return math.floor(max(0.0, now - self.started_s) / self.checkpoint_s + 1e-9)

    def lost_gpu_s(self, now: float) -> float:
        """GPU-seconds of work an eviction now throws away (back to the last checkpoint)."""
        ran = max(0.0, now - self.started_s)
        if self.checkpoint_s:
            ran -= math.floor(ran / self.checkpoint_s) * self.checkpoint_s
        return ran * self.gang.gpus


@dataclass(frozen=True)
class Eviction:
    victim: str
    preemptor: str  # the gang it makes room for
    lost_gpu_s: float
    reclaimed: bool = False  # a borrowed gang taken off hosts its lender needs (lending.py)
    waited_s: float = 0.0  # a reclaim: seconds from when its owner was first owed it


@dataclass(frozen=True)
class Move:
    """A running gang moved at its checkpoint: its new placement, the waiting gang it made
    room for (None: for its own J), and the seconds since that checkpoint (work the driver
    loses; 0 when the move falls on the checkpoint)."""

    key: str
    placement: Placement
    waiting: str | None
    since_checkpoint_s: float


@dataclass
class Decisions:
    starts: list[tuple[str, Placement]] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    # preemptor -> the placement it gets once its victims are gone (the simulator starts it at
    # once; the operator waits for the victims' pods to go)
    nominated: dict[str, Placement] = field(default_factory=dict)
    waiting: dict[str, Wait] = field(default_factory=dict)
    # gangs whose handling raised something unexpected: skipped, the others go on; the driver
    # logs the stack (the queue holds no logger)
    failed: dict[str, Exception] = field(default_factory=dict)
    # every placement the cycle computed (solve times and gaps for metrics)
    tried: list[Placement] = field(default_factory=list)
    reservations: dict[str, Reservation] = field(default_factory=dict)
    # earliest time a waiting gang should be looked at again (patience or backoff ends)
    wake_at: float = math.inf
    # joint placement: the J it saved over one-by-one on the same starts, the starts it placed
    # differently, and the blocked gangs it started beside them
    joint_gain: float = 0.0
    joint_moved: list[str] = field(default_factory=list)
    joint_joined: list[str] = field(default_factory=list)
    # defragmentation: gangs moved now (before the starts: a start may use the room a move
    # made), and every gang marked to move at its next checkpoint (key -> when it falls; inf:
    # when the gang signals one)
    moves: list[Move] = field(default_factory=list)
    marked: dict[str, float] = field(default_factory=dict)
    # lending (queue/lending.py): starts on hosts lent to their pool; borrowed gangs being
    # reclaimed -> their deadline (evicted then, or at their checkpoint before); GPUs each
    # lending pool lends after this cycle
    borrowed: set[str] = field(default_factory=set)
    reclaiming: dict[str, float] = field(default_factory=dict)
    lent: dict[str, int] = field(default_factory=dict)
    # teams (queue/teams/queues.py): starts beyond their queue's nominal quota, borrowed from its
    # cohort (reclaimable; their reclaims are in `reclaiming` too)
    beyond_quota: set[str] = field(default_factory=set)
    # teams: each start's queue, charged until it ends (Running.admitted)
    admitted: dict[str, str] = field(default_factory=dict)

    def wake(self, at: float) -> None:
        self.wake_at = min(self.wake_at, at)
