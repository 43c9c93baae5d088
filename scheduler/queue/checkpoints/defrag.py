"""Defragmentation at checkpoints: a running gang is moved, when it checkpoints, if that lets a
waiting gang start or cuts the moved gang's own J.

Contract. `Defrag.cycle` takes the time, the capacity the cycle left (`work`, changed in place
when a move is carried out), the running gangs, each pool's first unplaceable gang, the hosts
held for others and the rules. It decides which running gangs to mark (to be moved at their
next checkpoint) and which marked gangs to move now, with their new placement, and the
placement of the waiting gang in the room a move makes (the queue nominates it). It
promises:
- only training gangs that declare a checkpoint interval are marked or moved, and a move is
  carried out only once the gang has checkpointed since it was marked (the driver tells:
  `Running.checkpointed_s`, or the interval counted from its start), so it loses only the
  work since that checkpoint (none in the simulator, which wakes at it) and its restart time;
- a move for a waiting gang is carried out only when, on the capacity with the moved gang
  released, the waiting gang is placed and then the moved gang is placed again (both valid,
  off hosts held for others), on the capacity as it is now;
- a move for the gang's own sake is carried out only when its new J is at most
  (1 - `defrag_min_gain`) of its J where it runs;
- at most `defrag_moves_per_hour` moves are carried out in any hour (marks count against it
  until they are carried out or dropped); 0 switches defragmentation off;
- a mark whose reason is gone (the waiting gang started or left, the gang ended, the plan no
  longer works at the checkpoint) is dropped, never carried out on stale grounds.
Each examined blocked gang tries at most `defrag_candidates` running gangs, those with the most
free room for it around them first."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.model.gang import GangRequest
from scheduler.model.placement import PlaceConfig, Placement
from scheduler.model.topology import Tier
from scheduler.placement import Snapshot, place_one
from scheduler.placement.api import j_floor, j_value
from scheduler.placement.capacity import Capacity
from scheduler.queue.types import Move, QueueConfig, Running

HOUR = 3600.0


@dataclass
class Mark:
    at: float  # when it was marked: a checkpoint after this makes the move safe
    waiting: str | None  # the waiting gang it makes room for; None: for its own J


@dataclass
class Defrag:
    config: QueueConfig
    marks: dict[str, Mark] = field(default_factory=dict)
    done: list[float] = field(default_factory=list)  # times of moves carried out
    looked: dict[str, float] = field(default_factory=dict)  # own-J checks: key -> when
    place: PlaceConfig = field(init=False)  # the queue's placement, less patience

    def __post_init__(self) -> None:
        self.place = self.config.at_once

    def cycle(
        self,
        now: float,
        work: Snapshot,
        running: Sequence[Running],
        blocked: Sequence[tuple[str, GangRequest]],
        forbidden: frozenset[int],
        own: Mapping[str, frozenset[int]],
    ) -> tuple[list[Move], list[tuple[str, Placement]], dict[str, float]]:
        """(moves carried out, the placements of the waiting gangs they make room for, marks
        outstanding: key -> its next checkpoint, inf when the gang signals its own).
        `forbidden`: hosts held for anyone; `own`: those of them held for a waiting gang
        itself (its EASY reservation), which a plan for that gang may use."""
        if self.config.policy.defrag_moves_per_hour <= 0:
            return [], [], {}
        live = {r.key: r for r in running if r.movable}
        waiting = dict(blocked)
        self._forget(now, live, waiting)
        moves, starts = self._carry_out(now, work, live, waiting, forbidden, own)
        self._mark(now, work, live, blocked, forbidden, own)
        marked = {k: live[k].next_checkpoint(now) for k in self.marks}
        return moves, starts, marked

    def _forget(
        self, now: float, live: dict[str, Running], waiting: dict[str, GangRequest]
    ) -> None:
        self.done = [t for t in self.done if t > now - HOUR]
        for key, mark in list(self.marks.items()):
            gone = key not in live or (mark.waiting is not None and mark.waiting not in waiting)
            if gone:
                del self.marks[key]

    def _budget(self) -> int:
        return int(self.config.policy.defrag_moves_per_hour) - len(self.done) - len(self.marks)

    def _carry_out(
        self,
        now: float,
        work: Snapshot,
        live: dict[str, Running],
        waiting: dict[str, GangRequest],
        forbidden: frozenset[int],
        own: Mapping[str, frozenset[int]],
    ) -> tuple[list[Move], list[tuple[str, Placement]]]:
        moves: list[Move] = []
        starts: list[tuple[str, Placement]] = []
        for key, mark in list(self.marks.items()):
            r = live[key]
            checkpoint = r.last_checkpoint(now)
            if checkpoint is None or checkpoint < mark.at:
                continue
            del self.marks[key]
            if mark.waiting is None:
                plan = own_plan(work, r, forbidden, self.place, self.config.policy.defrag_min_gain)
                started = None
            else:
                off = forbidden - own.get(mark.waiting, frozenset())
                found = room_plan(work, waiting[mark.waiting], r, off, self.place)
                plan, started = (None, None) if found is None else found
            if plan is None:
                continue
            work.release(r.gang, r.placement)
            work.apply(r.gang, plan)
            moves.append(Move(key, plan, mark.waiting, now - checkpoint))
            self.done.append(now)
            if started is not None and mark.waiting is not None:
                work.apply(waiting[mark.waiting], started)
                starts.append((mark.waiting, started))
                del waiting[mark.waiting]
        return moves, starts

    def _mark(
        self,
        now: float,
        work: Snapshot,
        live: dict[str, Running],
        blocked: Sequence[tuple[str, GangRequest]],
        forbidden: frozenset[int],
        own: Mapping[str, frozenset[int]],
    ) -> None:
        served = {m.waiting for m in self.marks.values()}
        for key, gang in blocked:
            if self._budget() <= 0:
                return
            if key in served:
                continue
            found = self._room_for(work, gang, live, forbidden - own.get(key, frozenset()))
            if found is not None:
                self.marks[found.key] = Mark(now, key)
        for r in self._own_candidates(now, live, work.fabric.levels[Tier.RACK]):
            if self._budget() <= 0:
                return
            self.looked[r.key] = now
            if (
                own_plan(work, r, forbidden, self.place, self.config.policy.defrag_min_gain)
                is not None
            ):
                self.marks[r.key] = Mark(now, None)

    def _room_for(
        self,
        work: Snapshot,
        gang: GangRequest,
        live: dict[str, Running],
        forbidden: frozenset[int],
    ) -> Running | None:
        if Capacity.of(work, gang).total < gang.pods:
            return None  # not fragmentation: too little free room in all, moving cannot help
        pool = [r for r in live.values() if r.gang.pool == gang.pool and r.key not in self.marks]
        for r in nearest(work, gang, pool, self.config.policy.defrag_candidates):
            if room_plan(work, gang, r, forbidden, self.place) is not None:
                return r
        return None

    def _own_candidates(self, now: float, live: dict[str, Running], rack: str) -> list[Running]:
        """The costliest running gangs spanning racks, each looked at once an hour at most."""
        fresh = [
            r
            for r in live.values()
            if r.placement.domains.get(rack, 1) > 1
            and r.key not in self.marks
            and now - self.looked.get(r.key, -HOUR) >= HOUR
        ]
        fresh.sort(key=lambda r: (-r.placement.objective, r.key))
        self.looked = {k: t for k, t in self.looked.items() if k in live}
        return fresh[: self.config.policy.defrag_candidates]


def nearest(work: Snapshot, gang: GangRequest, pool: Iterable[Running], n: int) -> list[Running]:
    """Running gangs with the most free room for `gang` in their racks, smallest first at a tie."""
    fabric = work.fabric
    rack = Tier.RACK
    room = Capacity.of(work, gang).per_domain[rack]
    index = fabric.host_index

    def score(r: Running) -> tuple[int, int, str]:
        racks = {fabric.domain[rack][index[h]] for h in r.placement.hosts()}
        return (-sum(room.get(d, 0) for d in racks), r.gang.all_gpus, r.key)

    return sorted(pool, key=score)[:n]


def _off(work: Snapshot, r: Running, forbidden: frozenset[int]) -> Snapshot:
    """The capacity with `r` released, less hosts held for others (`r`'s own stay usable)."""
    out = work.copy()
    out.release(r.gang, r.placement)
    index = work.fabric.host_index
    out.down |= set(forbidden) - {index[h] for h in r.placement.hosts()}
    return out


def room_plan(
    work: Snapshot, gang: GangRequest, r: Running, forbidden: frozenset[int], config: PlaceConfig
) -> tuple[Placement, Placement] | None:
    """(r's new placement, gang's placement) when releasing r lets gang start and r fit again."""
    view = _off(work, r, forbidden)
    placed = place_one(view, gang, config)
    if not placed.placed:
        return None
    view.apply(gang, placed)
    again = place_one(view, r.gang, config)
    if not again.placed:
        return None
    return again, placed


def own_plan(
    work: Snapshot, r: Running, forbidden: frozenset[int], config: PlaceConfig, min_gain: float
) -> Placement | None:
    """r's new placement when it costs at most (1 - min_gain) of its J where it runs, both
    counted on the same capacity (r released): the J a driver stored at placement time may be
    stale or, in the operator, unknown."""
    view = _off(work, r, forbidden)
    index = work.fabric.host_index
    counts = {index[h]: n for h, n in r.placement.hosts("").items() if h in index}
    capacity = Capacity.of(view, r.gang)
    here = j_value(capacity, counts, config)
    if here <= 0 or j_floor(capacity) > (1 - min_gain) * here:
        return None  # no placement can save enough (most gangs): nothing to solve
    again = place_one(view, r.gang, config)
    if not again.placed or again.objective > (1 - min_gain) * here:
        return None
    return again
