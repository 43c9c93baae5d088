"""One gang in a cycle: what the walk does with each gang it reaches.

Contract. Takes the cycle and a gang the walk reached (queue/walk.py), with the queue's holds,
backoff and views. Decides, in order: a pinned start (a preemptor's hosts are free), admission
by its team's quota (queue/teams), waiting behind its pool's blocker (no backfill), its backoff,
an unchanged view on which it was patient, a shape known unplaceable on this view or a gang
whose pods do not fit on it by counting (no solver call; queue/counts.py), else one placement
call (rackwise's told who asks for whole domains of its pool: `_demand`): a start, patience
(a compact placement later), preemption, a quota owed back, or a wait with its reason; a
blocking wait makes it its pool's blocker or gives it EASY's reservation. Promises: one
unexpected error fails this gang alone (`safely`); a start is applied to the cycle's capacity
at once, so the gangs after it see what is left; a borrower never blocks nor reserves.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from scheduler.model.placement import PlaceConfig, Placement, PlacementStatus, WholeDemand
from scheduler.model.policy import Backfill
from scheduler.placement import fragments, place_one
from scheduler.queue import split
from scheduler.queue.arrivals import Arrivals
from scheduler.queue.backoff import Backoff
from scheduler.queue.cycle import Cycle, Pool, View
from scheduler.queue.holds import Holds
from scheduler.queue.order import Known, PoolOrder
from scheduler.queue.preempting import Preempting
from scheduler.queue.reservation import reserve
from scheduler.queue.teams.queues import TeamQueues
from scheduler.queue.types import (
    Entry,
    QueueConfig,
    Reservation,
    Running,
    Wait,
    WaitReason,
)
from scheduler.queue.views import Views

# waits that hold back later gangs under strict order, or earn a reservation under EASY
BLOCKING = (WaitReason.UNPLACEABLE, WaitReason.RESERVED, WaitReason.PRICED)


class Consider:
    """The walk's step for one gang (the contract above); preemption and teams are bound
    after construction, since they report through this class's `wait` and `start`."""

    _preempting: Preempting
    _teams: TeamQueues

    def __init__(
        self,
        config: QueueConfig,
        entries: Mapping[str, Entry],
        pins: Holds,
        backoff: Backoff,
        views: Views,
        orders: Mapping[str, PoolOrder],
    ) -> None:
        self.config = config
        self._entries = entries
        self._orders = orders
        self.arrivals = Arrivals()  # each pool's recent arrivals: the queue tells it each cycle
        self._pins = pins
        self._backoff = backoff
        self._views = views

    def bind(self, preempting: Preempting, teams: TeamQueues) -> None:
        self._preempting = preempting
        self._teams = teams

    def safely(self, c: Cycle, entry: Entry) -> None:
        try:
            self.consider(c, entry)
        except Exception as exc:  # one gang's surprise must not stop the others
            c.out.failed[entry.key] = exc

    def consider(self, c: Cycle, entry: Entry) -> None:
        if entry.key in self._pins.pins and self._preempting.pinned_start(c, entry):
            return
        if not self._teams.admits(c, entry):
            return
        p = c.pool(entry.gang.pool)
        if p.blocker is not None:
            c.out.waiting[entry.key] = Wait(WaitReason.BEHIND, f"waiting behind {p.blocker}")
            return
        retry_at = self._backoff.retry_at(entry.key)
        if retry_at > c.now:
            c.out.wake(retry_at)
            return
        v = self._views.view(c, entry)
        if entry.recheck_at < math.inf and entry.failed_on == v.seen() and c.now < entry.recheck_at:
            self._still_patient(c, entry, p)
            return
        shape = entry.shape
        known = self._views.known_on(v).get(shape)
        if (
            known is not None
            and known.pods <= entry.gang.pods
            and self._views.holds(c, v, shape, known)
            and not self._teams.owed_clock(entry)
        ):
            self._known_unplaceable(c, entry, p, v, known)
            return
        counted = self._views.counted(c, v, entry)
        if counted is not None and c.quiet:
            self._counted(c, entry, p, v, counted)
            return
        if counted is None:  # a failure counting proves is no try: it uses none of the pool's
            if p.attempts >= self.config.policy.max_attempts:
                return
            p.attempts += 1
        self._attempt(c, entry, p, v)  # a proven failure still tried, for placement's words

    def _counted(self, c: Cycle, entry: Entry, p: Pool, v: View, k: Known) -> None:
        """Its pods do not fit on its view (counts.py): what a failed try would do, without
        the try."""
        entry.holding, entry.failed_on, entry.recheck_at = None, None, math.inf
        self._known_unplaceable(c, entry, p, v, k)

    def _known_unplaceable(self, c: Cycle, entry: Entry, p: Pool, v: View, k: Known) -> None:
        """This gang, or one of its shape and priority with no more pods, could not be placed
        on this very view, nor preempt: neither can this one, and nothing is solved again."""
        same = k.key == entry.key
        wait = Wait(k.reason, k.message) if same else self._views.kin_wait(c, entry, k)
        self.wait(c, entry, wait)
        if wait.reason in BLOCKING:
            self._block(c, entry, p, lambda: self._reserving(c, entry, v))

    def _attempt(self, c: Cycle, entry: Entry, p: Pool, v: View) -> None:
        view = v.snapshot
        placement = place_one(view, entry.gang, self._place_config(entry, c.now))
        c.out.tried.append(placement)
        entry.holding = None
        if placement.placed and split.priced(self.config, entry, placement):
            held = split.hold(c, entry, view, placement, self.config, self._behind(c, entry))
            if held is not None:
                self._hold(c, entry, p, v, held)
                return
        if placement.placed:
            if view is c.work:  # placed on the whole free capacity: joint placement may move it
                c.free_starts.append((entry.key, entry.gang, placement))
            self.start(c, entry, placement)
            return
        if placement.status is PlacementStatus.WAITING:
            entry.failed_on = v.seen()
            self._patient(c, entry, placement)
            return
        entry.failed_on, entry.recheck_at = None, math.inf
        if not c.borrowing and self._preempting.preempt(c, entry, view):
            return
        if self._teams.owed(c, entry):
            return
        wait = self._views.why(c, entry, view, placement.reason)
        if not c.borrowing:  # a borrower's failure says nothing of what one within quota can do
            self._views.remember(c, v, entry, wait)
        self.wait(c, entry, wait)
        if wait.reason in BLOCKING:
            self._block(c, entry, p, lambda: self._reserving(c, entry, v))

    def _still_patient(self, c: Cycle, entry: Entry, p: Pool) -> None:
        """Placeable but waiting for a compact placement, or for one that keeps its slices, on
        an unchanged view: same answer until its patience or its reservation ends, no solver
        call."""
        if entry.last is not None:
            c.out.waiting[entry.key] = entry.last
        c.out.wake(entry.recheck_at)
        if entry.holding is not None:
            self._block(c, entry, p, made(entry.holding))

    def _behind(self, c: Cycle, entry: Entry) -> split.Behind:
        pool = entry.gang.pool
        others = [e for e in self._entries.values() if e.gang.pool == pool and e is not entry]
        work = sum(e.work_gpu_s for e in others)
        gpus = split.pool_gpus(c.work.fabric, pool)
        arrivals = self.arrivals
        rate, load = arrivals.rate(pool, c.now), arrivals.load(pool, c.now, gpus)
        return split.Behind(len(others), work, rate, load, gpus)

    def _hold(self, c: Cycle, entry: Entry, p: Pool, v: View, held: split.Hold) -> None:
        """Waits for a placement that keeps its slices (queue/split.py): looked at again when
        its view changes or its reservation's time comes, and blocking meanwhile."""
        entry.failed_on, entry.recheck_at = v.seen(), held.reservation.at
        entry.holding = held.reservation
        c.out.wake(held.reservation.at)
        self.wait(c, entry, held.wait)
        self._block(c, entry, p, made(held.reservation))

    def _place_config(self, entry: Entry, now: float) -> PlaceConfig:
        place = self.config.place
        update: dict[str, object] = {}
        if place.scheduling.compact_wait_s:
            since = now if entry.placeable_since is None else entry.placeable_since
            update["waited_s"] = now - since
        # a one-pod gang sits on one host, where the trade never reads the count
        if entry.gang.pods > 1 and fragments.trades(place):
            update["demand"] = self._demand(entry, now)
        return place.model_copy(update=update) if update else place

    def _demand(self, entry: Entry, now: float) -> WholeDemand:
        """Who asks for whole domains of its pool: the other gangs queued there, and the
        pool's recent arrivals over its expected run."""
        pool, own = entry.gang.pool, entry.gang.all_gpus
        waiting = self._orders[pool].sizes
        others = ((g, n - (g == own)) for g, n in waiting.items())
        arrived, span = self.arrivals.sizes(pool, now)
        run = entry.estimate_s or 0.0
        return WholeDemand(
            waiting=tuple((g, n) for g, n in others if n), arrived=arrived, span_s=span, run_s=run
        )

    def start(self, c: Cycle, entry: Entry, placement: Placement) -> None:
        c.work.apply(entry.gang, placement)
        c.version += 1
        c.out.starts.append((entry.key, placement))
        self._teams.started(c, entry, placement)
        # a later reservation in this cycle must count it among the gangs that will end
        end = None if entry.estimate_s is None else c.now + entry.estimate_s
        started = Running.of(entry, placement, c.now, end, c.out.admitted.get(entry.key, ""))
        c.start(started)
        entry.placeable_since = None
        entry.failed_on = None
        entry.last = None
        entry.holding = None

    def _patient(self, c: Cycle, entry: Entry, placement: Placement) -> None:
        if entry.placeable_since is None:
            entry.placeable_since = c.now
        entry.recheck_at = entry.placeable_since + self.config.policy.compact_wait_s
        c.out.wake(entry.recheck_at)
        self.wait(c, entry, Wait(WaitReason.COMPACT, placement.reason))

    def wait(self, c: Cycle, entry: Entry, wait: Wait) -> None:
        entry.last = wait
        c.out.waiting[entry.key] = wait
        if wait.reason is WaitReason.UNPLACEABLE:
            c.pool(entry.gang.pool).unplaceable += 1

    def _block(self, c: Cycle, entry: Entry, p: Pool, reserving: Reserving) -> None:
        """A blocking wait: its pool's blocker under strict order; under EASY, the pool's
        reservation when none is held yet, made when first asked for (`Pool.reservation`)."""
        if c.borrowing:  # a borrower holds no reservation and blocks no one
            return
        if self.config.policy.backfill is Backfill.NONE:
            p.blocker = entry.gang.name
        elif self.config.policy.backfill is Backfill.EASY and p.reservation is None:
            p.pending = _reported(c, entry.gang.pool, reserving())

    def _reserving(self, c: Cycle, entry: Entry, v: View) -> Callable[[], Reservation | None]:
        """The gang's reservation on what it sees now, to be made later: its inputs are taken
        now (the cycle's work snapshot and starts change as the walk goes on)."""
        # what it depends on: the view, and which gangs will end when; the same free capacity
        # can hold other gangs (one ended and another took exactly its place). The view's
        # digest is taken only when the rest is unchanged (or a try took it already): nearly
        # every reservation follows an end or a start, which the pool's version shows
        pool = entry.gang.pool
        mine = c.ending(pool)
        made_on = (c.index.pool_versions.get(pool, 0), tuple(r.key for r in mine))
        kept, seen = entry.reserved, v.fingerprint
        if kept is not None and kept[0] == made_on:
            seen = v.seen()
            if kept[1] == seen:
                return made(kept[2])()
        # the work snapshot changes as the walk goes on: a copy now, changed only by `reserve`
        # (`make` runs once: Pool.make); a held view is a copy already, shared by its gangs
        owned = v.snapshot is c.work
        frozen = v.snapshot.copy() if owned else v.snapshot

        def make() -> Reservation | None:
            releases = c.index.releases(pool, mine)
            found = reserve(entry.key, frozen, entry.gang, releases, self.config, owned)
            entry.reserved = (made_on, seen, found)
            return found

        return make


Reserving = Callable[[], Callable[[], Reservation | None]]  # when asked: how to make it


def made(r: Reservation | None) -> Reserving:
    """A reservation made already, as `Consider._block` takes one."""
    return lambda: lambda: r


def _reported(
    c: Cycle, pool: str, make: Callable[[], Reservation | None]
) -> Callable[[], Reservation | None]:
    def reported() -> Reservation | None:
        found = make()
        if found is not None:
            c.out.reservations[pool] = found
        return found

    return reported
