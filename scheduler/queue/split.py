"""Wait or split: whether a gang whose preferred slices no placement keeps now starts without
them or waits for a placement that keeps them, by what each costs.

Contract. Takes the cycle, a queued gang placed on its view without some of its preferred
slices (`Placement.unkept`: e.g. its expert-parallel block across NVLink domains), what waits
behind it in its pool (`Behind`) and the queue's config. Where the policy reads those slices
as priced (placement/hints.py: rackwise) and the gang states its model and run time, decides by
two figures: the split's cost, (s_split - s_kept) x its run time, s being a placement's lone
stretch (placement/stretch.py), times who bears it (the gang, and the gangs its extra GPU-time
pushes back: `Behind.reached`), and the wait until a placement that keeps the slices can start:
EASY's reservation for the gang with them required, from the running gangs' expected ends
(queue/reservation.py). Waits when the wait is shorter; starts split otherwise, and wherever
the wait cannot be priced (no model, no run time, an end unknown, no placement keeps them even
with every running gang ended).
Promises: a wait names both figures in its reason and carries the reservation it waits for;
the decision reads only the gang, its view, the queue and the running gangs' estimates, so a
replay decides the same. What it leaves out, stated: the gangs ahead that may take the freed
domain first (the wait is then longer than priced), and whether the pool stays busy while the
gang runs (`Behind.reached` assumes it does).
"""

from __future__ import annotations

import math
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


@dataclass(frozen=True)
class Behind:
    """What waits behind a gang in its pool: the other gangs queued there, the GPU-seconds of
    work they ask for (their GPUs x expected run times; an unknown run time counts none), and
    the pool's recent arrival rate in gangs per second and offered load (queue/arrivals.py)."""

    gangs: int
    work_gpu_s: float
    rate: float
    load: float
    pool_gpus: int  # the pool's GPUs (`pool_gpus`), read once per decision

    def reached(self, run_s: float) -> float:
        """The gangs a split's extra GPU-time pushes back, each by all of it over the pool's
        GPUs, in a pool that stays busy (work-conserving: its backlog clears that much later):
        those waiting now; those arriving while the split gang runs `run_s`, reached on average
        by half of it since it accrues evenly over the run; and those arriving after the run
        until the queued work has drained. Work w queued in a busy system at load p drains in
        w / (1 - p) on average, each unit of it lengthening the busy period by 1 / (1 - p) as
        the work arriving meanwhile queues too (the M/G/1 busy period: Kleinrock, Queueing
        Systems I, 1975, ch. 5); at a recent load of 1 or more it never drains: every gang
        arriving is reached (inf). A fluid, first-order estimate."""
        if not self.rate:
            return float(self.gangs)
        if self.load >= 1.0:
            return math.inf
        gpus = self.pool_gpus
        drain = self.work_gpu_s / gpus / (1.0 - self.load) if gpus else 0.0
        return self.gangs + self.rate * (run_s / 2 + max(0.0, drain - run_s))


def hold(
    c: Cycle, entry: Entry, view: Snapshot, split: Placement, cfg: QueueConfig, behind: Behind
) -> Hold | None:
    """A wait for a placement that keeps the slices when it costs less than this split; None:
    start split."""
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
    if own <= 0:
        return None  # the placement that keeps the slices is no faster
    reached = behind.reached(run * split_s)
    waited, lost = found.at - c.now, own * borne(behind.pool_gpus, gang, reached)
    if not waited < lost:  # an unknown end (inf) never waits
        return None
    level = split.unkept[0].level
    # the gangs it waits for may have overrun their estimated ends: no wait to say then
    when = f" ~{span(waited)}" if waited > 0 else " (the gangs it waits for are past their ends)"
    why = (
        f"waits{when} for a placement that keeps each slice inside one {level}: "
        f"splitting would stretch it {split_s / kept_s:.2f}x over {span(run)} (~{span(own)} "
        f"more; {_counting(behind, reached, lost)})"
    )
    return Hold(Wait(WaitReason.PRICED, why), found)


def _counting(behind: Behind, reached: float, lost: float) -> str:
    """Who the split's cost counts, as the reason says it."""
    waiting = f"the {behind.gangs} gangs waiting in its pool"
    if math.isinf(reached):
        return (
            f"more than any wait, counting {waiting} and every gang arriving while its "
            "recent load exceeds its GPUs"
        )
    due = reached - behind.gangs
    return (
        f"~{span(lost)} counting {waiting} and ~{due:.0f} arriving while it runs or their "
        "work drains"
    )


def borne(gpus: int, gang: GangRequest, reached: float) -> float:
    """Who bears a split's extra time: the gang itself, and the `reached` gangs of its pool
    (`Behind.reached`), each pushed back by the extra GPU-time (its GPUs x the extra time) over
    the pool's `gpus`. A split costs this many times its own delay."""
    return 1.0 + reached * gang.all_gpus / gpus if gpus else 1.0


def pool_gpus(fabric: Fabric, pool: str) -> int:
    mask = fabric.pool_mask.get(pool)
    return fabric.gpus_in_service(mask) if mask is not None else 0


def span(seconds: float) -> str:
    """A duration as a person reads it: seconds, minutes or hours."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
