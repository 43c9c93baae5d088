"""Wait or split: whether a gang whose preferred slices no placement keeps now starts without
them or waits for a placement that keeps them, by what each costs.

Contract. Takes the cycle, a queued gang placed on its view without some of its preferred
slices (`Placement.unkept`: e.g. its expert-parallel block across NVLink domains) and the
queue's config. Where the policy reads those slices as priced (placement/hints.py: rackwise)
and the gang states its model and run time, decides by two figures: the split's cost, (s_split
- s_kept) x its run time, s being a placement's lone stretch (placement/stretch.py), and the
wait until a placement that keeps the slices can start: EASY's reservation for the gang with
them required, from the running gangs' expected ends (queue/reservation.py). Waits when the
wait is shorter; starts split otherwise, and wherever the wait cannot be priced (no model, no
run time, an end unknown, no placement keeps them even with every running gang ended).
Promises: a wait names both figures in its reason and carries the reservation it waits for;
the decision reads only the gang, its view and the running gangs' estimates, so a replay
decides the same. What it leaves out, stated: the gangs ahead that may take the freed domain
first (the wait is then longer than priced), and the cost a stretched job puts on others.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.model.gang import GangRequest
from scheduler.model.placement import Placement
from scheduler.placement import Snapshot, hints, stretch
from scheduler.placement.hints import Reading
from scheduler.queue.cycle import Cycle
from scheduler.queue.reservation import reserve
from scheduler.queue.types import Entry, QueueConfig, Reservation, Wait, WaitReason
from scheduler.topology.fabric import Fabric


@dataclass(frozen=True)
class Hold:
    """A priced wait: why, and the reservation of a placement that keeps the slices."""

    wait: Wait
    reservation: Reservation


def priced(config: QueueConfig, entry: Entry, placement: Placement) -> bool:
    """Is this start one the queue prices (a split of slices its policy reads as priced)?"""
    return (
        bool(placement.unkept)
        and hints.reading(config.place.policy) is Reading.PRICED
        and entry.gang.model is not None
        and bool(entry.estimate_s)
    )


def hold(
    c: Cycle, entry: Entry, view: Snapshot, split: Placement, cfg: QueueConfig, others: int
) -> Hold | None:
    """A wait for a placement that keeps the slices when it costs less than this split; None:
    start split. `others`: the gangs waiting in its pool besides it."""
    fabric, gang = view.fabric, entry.gang
    run = entry.estimate_s or 0.0
    split_s = stretch.lone(fabric, gang, split)
    if split_s is None or split_s <= 1.0:
        return None  # nothing lost by splitting
    kept = hints.kept(hints.told(fabric, gang, cfg.place.policy))
    found = reserve(entry.key, view, kept, c.index.releases(gang.pool, c.ending(gang.pool)), cfg)
    if found is None or found.placement is None:
        return None
    kept_s = stretch.lone(fabric, gang, found.placement) or 1.0
    own = (split_s - kept_s) * run
    waited, lost = found.at - c.now, own * borne(fabric, gang, others)
    if not waited < lost:  # an unknown end (inf) never waits
        return None
    level = split.unkept[0].level
    # the gangs it waits for may have overrun their estimated ends: no wait to say then
    when = f" ~{span(waited)}" if waited > 0 else " (the gangs it waits for are past their ends)"
    why = (
        f"waits{when} for a placement that keeps each slice inside one {level}: "
        f"splitting would stretch it {split_s / kept_s:.2f}x over {span(run)} (~{span(own)} "
        f"more; ~{span(lost)} counting the {others} gangs waiting in its pool)"
    )
    return Hold(Wait(WaitReason.PRICED, why), found)


def borne(fabric: Fabric, gang: GangRequest, others: int) -> float:
    """Who bears a split's extra time: the gang itself, and each gang waiting in its pool,
    whose start the extra GPU-time (its GPUs x the extra time) pushes back by that over the
    pool's GPUs, the pool being busy (a work-conserving pool's backlog clears that much
    later). A split costs this many times its own delay."""
    pool = fabric.pool_mask.get(gang.pool)
    gpus = int(fabric.gpus[pool].sum()) if pool is not None else 0
    return 1.0 + others * gang.all_gpus / gpus if gpus else 1.0


def span(seconds: float) -> str:
    """A duration as a person reads it: seconds, minutes or hours."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
