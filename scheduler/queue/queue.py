"""The scheduling queue: the one object the operator and the simulator both drive.

Contract. A cycle takes the driver's clock `now`, the free capacity (a Snapshot, left
unchanged) and the gangs running now. It decides which queued gangs start and where, which
running gangs are evicted and for whom, why each tried gang waits, which hosts are held for a
blocked gang, and when the queue wants to be called again. It promises:
- order: priority (higher first), then arrival (earlier first), then key; a gang put back
  (preempted, failed start) keeps its arrival, so it keeps its place; with teams, priority
  orders gangs within their own team queue only (queue/ranks.py);
- all-or-nothing: a start is a whole placement that fits the capacity left by the cycle's
  earlier starts and evictions, off the hosts held for others;
- patience: a gang whose best placement spans spines while one spine of its pool could hold it
  waits up to `compact_wait_s`, counted from the first cycle it could have started;
- backfill (types.Backfill): none, greedy, or EASY: the first blocked gang of a pool holds the
  hosts it will get (queue/reservation.py) and later gangs of the pool use them only when their
  estimate ends before it can start;
- preemption (queue/preemption.py): only running gangs of strictly lower priority, the same
  pool, and the same tenant unless `cross_tenant`; the preemptor's hosts are held for it, against
  every gang of every tenant, until it starts there (or, its victims gone, `PIN_PATIENCE_S`
  passes without them coming free), and it does not preempt again meanwhile;
- bounded work: at most `max_attempts` placement tries per pool per cycle; a gang is not tried
  on a view (free capacity and held hosts of its pool, on the same fabric) on which a gang of
  its shape and priority with no more pods was found unplaceable, in this cycle or an earlier
  one, while the gangs it may preempt are the same (the larger needs at least as much); with
  `report_waits` off, a cycle passes over such gangs without looking at each (queue/order.py),
  to the same decisions;
- joint placement (queue/joint.py, `joint_gangs`): the cycle's starts made on the whole free
  capacity are placed again together with each pool's first unplaceable gang when that starts
  more gangs or costs less J; hosts held for reservations and preemptors stay theirs;
- defragmentation (queue/defrag.py, `defrag_moves_per_hour`): a running training gang that
  declares checkpoints is marked, then moved after its next checkpoint, when that lets a pool's
  first unplaceable gang start or cuts its own J (budgeted). A move is carried out as a
  preemption: the driver stops the gang and queues it again, its new hosts held for it
  (pinned), and the waiting gang is nominated to the room it leaves;
- never fits: a gang no placement can hold even with every host of the fabric up and free
  (placement/reasons.never_fits, a proof by counting) waits as NEVER_FITS, holds no
  reservation and blocks no one;
- isolation: an unexpected error while handling one gang skips that gang (Decisions.failed),
  never the cycle.
This module keeps the order and dispatches; each mechanism is a part that owns its state, its
contract at its top: walk.py (the walk, quiet cycles), views.py and memo.py (what a gang sees,
what is known unplaceable, wait reasons), holds.py and preempting.py (pins, preemption),
reservation.py, after.py (joint placement, moves), backoff.py; cycle.py is a cycle's state.
Drivers apply the decisions through one port (effects.py): the simulator at once, the operator
through the API server."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

from scheduler.model.gang import GangRequest
from scheduler.model.placement import PlaceConfig, Placement, PlacementStatus
from scheduler.model.policy import Backfill, Preemption
from scheduler.placement import Snapshot, place_one
from scheduler.placement.api import RACKWISE
from scheduler.placement.snapshot import Array
from scheduler.placement.uplinks import Crossings
from scheduler.queue.after import AfterWalk
from scheduler.queue.backoff import Backoff
from scheduler.queue.cycle import Cycle, Pool, View
from scheduler.queue.defrag import Defrag
from scheduler.queue.holds import Holds
from scheduler.queue.lending import Lending
from scheduler.queue.order import Known, PoolOrder
from scheduler.queue.preempting import Preempting
from scheduler.queue.ranks import Ranks
from scheduler.queue.reservation import reserve
from scheduler.queue.running import RunningGangs
from scheduler.queue.shapes import ShapeIds, Tenancy, shape_keys
from scheduler.queue.team_use import Charge, Numbers
from scheduler.queue.teams import TeamQueues
from scheduler.queue.types import (
    Decisions,
    Entry,
    QueueConfig,
    Reservation,
    Running,
    Wait,
    WaitReason,
)
from scheduler.queue.views import Views
from scheduler.queue.walk import Walk
from scheduler.teams import Teams
from scheduler.topology import Fabric

# waits that hold back later gangs under strict order, or earn a reservation under EASY
BLOCKING = (WaitReason.UNPLACEABLE, WaitReason.RESERVED)


class SchedulingQueue:
    def __init__(self, config: QueueConfig | None = None) -> None:
        self.config = config or QueueConfig()
        self._entries: dict[str, Entry] = {}
        self._orders: dict[str, PoolOrder] = {}  # pool -> its entries in queue order
        self._shapes = ShapeIds()  # shape and priority -> id, while a queued gang has it
        self._fabric: Fabric | None = None  # what is known holds for this fabric only
        self._backoff = Backoff()
        # hosts held for preemptors, moved gangs and the gangs moves made room for (holds.py)
        self._pins = Holds()
        self._crossings: Crossings | None = None  # placement/uplinks.py, for rackwise
        self._running = RunningGangs()  # a driver's list of running gangs, indexed
        # views and what is known unplaceable on them (views.py, memo.py)
        self._views = Views(self.config, self._entries, self._pins, self._shapes)
        self._walker = Walk(
            self.config,
            self._entries,
            self._orders,
            self._shapes,
            self._pins,
            self._backoff,
            self._views,
        )
        self._preempting = Preempting(
            self.config, self._entries, self._pins, self._views, self._wait, self._start
        )
        self._teams = TeamQueues(self.config, self._entries, self._pins, self._views, self._wait)
        # priority within a team (queue/ranks.py)
        self._ranks = Ranks(self._entries, self._orders, self._teams.team_of, self._teams.on)
        self._lending = Lending(
            self.config,
            self._entries,
            self._orders,
            self._pins,
            self._views,
            self._wait,
            self._start,
            self._teams.allows,
            self._teams.allows_on,
        )
        self._tenancy = self._tenancy_now()
        self._after = AfterWalk(
            self.config,
            self._entries,
            self._pins,
            Defrag(self.config),
            self.config.at_once,
            self._wait,
            self._teams.admitted,
        )

    # membership
    def add(
        self,
        key: str,
        gang: GangRequest,
        arrival: float,
        tenant: str = "",
        estimate_s: float | None = None,
        queue: str = "",
        evictable: bool = True,
    ) -> None:
        """Queue a gang (no-op when queued already). `queue`: the queue its job names ("": its
        tenant's, teams.Teams.queue_of); `evictable`: False for a gang its driver never evicts
        (it is then admitted within its queue's nominal quota only)."""
        if key not in self._entries:
            entry = Entry(key, gang, arrival, tenant, estimate_s, queue, evictable)
            self._entries[key] = entry
            self._shape(entry)
            self._ranks.added(entry)
            self._orders.setdefault(gang.pool, PoolOrder()).add(entry)

    def _shape(self, entry: Entry) -> None:
        key, family = shape_keys(entry, self._tenancy)
        shape, reused = self._shapes.take(key, (entry.gang.priority, entry.tenant), family)
        if reused:  # freed by a shape no gang has any more: what was known goes with it
            self._views.memo.forget_shape(shape)
        entry.shape = shape

    def _tenancy_now(self) -> Tenancy:
        policy = self.config.policy
        within = policy.preemption is not Preemption.OFF and not policy.cross_tenant
        return Tenancy.of(self._teams.on, within)

    def _reshape(self) -> None:
        """Teams came or went: owners enter or leave every shape, so every gang is given its
        shape again and what was known under the old ids is forgotten."""
        self._tenancy = self._tenancy_now()
        self._shapes.clear()
        self._views.memo.clear()
        self._teams.failed.clear()
        self._lending.failed.clear()
        for entry in self._entries.values():
            self._shape(entry)
        for order in self._orders.values():
            order.reshape(self._entries)

    def remove(self, key: str) -> None:
        self._drop(key)
        self._pins.drop(key)

    def _uplinks(self, snapshot: Snapshot, c: Cycle) -> Callable[[], dict[int, Array]]:
        """The running gangs crossing each domain's uplink, kept between cycles and brought up
        to date only in a cycle that asks (what runs is listed only then), then with each of
        the cycle's starts."""
        if self._crossings is None or self._crossings.fabric is not snapshot.fabric:
            self._crossings = Crossings(snapshot.fabric)
        return self._crossings.of(
            lambda: {r.key: r.placement for r in c.running},
            lambda: {r.key: r.placement for r in c.started},
        )

    # teams
    def use_teams(
        self, teams: Teams, charged: Sequence[Charge] = (), leaving: Sequence[Charge] = ()
    ) -> None:
        """The teams' queues as they are now (the operator reads them every cycle) and what holds
        quota beside the running list (queue/team_use.py, `use`)."""
        if self._teams.use(teams, charged, leaving):
            self._ranks.reset(self._teams.on)
        if self._tenancy_now() is not self._tenancy:
            self._reshape()

    def team_numbers(self) -> dict[str, Numbers]:
        """Per team queue: what its running gangs use per pool (GPUs, millicores, MiB), its
        gangs waiting and running, as of the last cycle's running gangs, and when its
        longest-waiting gang arrived."""
        return self._teams.numbers(self._running, self._entries.values())

    def team_of(self, key: str) -> str | None:
        """The team queue of a queued gang (None: no teams, no such gang, or no queue)."""
        entry = self._entries.get(key)
        return self._teams.team_of(entry) if entry is not None else None

    def beyond_quota(self) -> dict[str, str]:
        """Running gangs (of the last cycle's list) beyond their queue's nominal quota, each
        with its queue: those a reclaim may take."""
        return self._teams.beyond_all(self._running)

    def held(self) -> dict[str, Placement]:
        """Queued gangs holding hosts while they wait (for victims, a move, a reclaim): each
        with the placement it will start on."""
        return {k: p for k, p in self._pins.pins.items() if k in self._entries}

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._orders[entry.gang.pool].remove(entry)
            self._ranks.dropped(entry)
            self._shapes.release(entry.shape)

    def keys(self) -> set[str]:
        return set(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    # backoff after a start the driver could not carry out
    def backoff(self, key: str, now: float, long: bool = False) -> None:
        """Exponential (queue/backoff.py)."""
        self._backoff.failed(key, now, long)

    def backing_off(self, key: str, now: float) -> bool:
        return self._backoff.retry_at(key) > now

    def succeeded(self, key: str) -> None:
        self._backoff.succeeded(key)

    def forget(self, alive: set[str]) -> None:
        """Drop what is kept of keys that no longer exist (deleted jobs), the hosts held for
        them included: a moved gang is no entry while its pods are remade, so a job deleted
        then would otherwise hold its new hosts for as long as the queue lives."""
        for key in set(self._entries) - alive:
            self.remove(key)
        for key in self._pins.keys() - alive:
            self.remove(key)
        self._backoff.forget(alive)

    # the cycle
    def cycle(
        self,
        now: float,
        snapshot: Snapshot,
        running: RunningGangs | Iterable[Running],
        leaving: Sequence[Running] = (),
    ) -> Decisions:
        """One cycle. `running`: the driver's own RunningGangs, kept as gangs start and end
        (the simulator), or its whole list, indexed here by difference (the operator).
        `leaving`: gangs whose pods still hold hosts while they go (the operator's deleted
        jobs), released first by a reservation and otherwise left alone."""
        idle = not self._entries and not self._lending.reclaim.pending
        idle = idle and not self._teams.reclaim.pending
        if idle and self.config.policy.defrag_moves_per_hour <= 0:
            if not isinstance(running, RunningGangs):  # its teams' numbers stay current
                self._running.sync(running)
            return Decisions()
        if snapshot.fabric is not self._fabric:  # labels, taints, pools: not in a fingerprint
            old, self._fabric = self._fabric, snapshot.fabric
            self._views.forget_fabric()
            self._pins.refit(snapshot.fabric.host_index)  # host numbers change with it
            self._lending.refit(old, snapshot.fabric)
        c = self._new_cycle(now, snapshot, running)
        c.leaving = list(leaving)
        self._teams.begin(c)
        if self.config.place.policy == RACKWISE and self.config.policy.contention:
            c.work.uplinks = self._uplinks(snapshot, c)  # J prices the uplinks' load
        self._preempting.settle(c)
        c.quiet = not self.config.report_waits and not self.config.policy.compact_wait_s
        c.specials = self._walker.specials()
        for entry in self._walker.walk(c):
            self._consider_safely(c, entry)
        self._teams.borrow(c, self._consider_safely)
        self._teams.due(c)
        self._lending.run(c)
        self._after.run(c)
        self._teams.admit_joined(c)
        for key, _ in c.out.starts:
            self._drop(key)
        return c.out

    def _new_cycle(
        self, now: float, snapshot: Snapshot, running: RunningGangs | Iterable[Running]
    ) -> Cycle:
        if isinstance(running, RunningGangs):
            return Cycle(now, snapshot.copy(), None, running)
        given = list(running)
        self._running.sync(given)
        return Cycle(now, snapshot.copy(), given, self._running)

    def _consider_safely(self, c: Cycle, entry: Entry) -> None:
        try:
            self._consider(c, entry)
        except Exception as exc:  # one gang's surprise must not stop the others
            c.out.failed[entry.key] = exc

    def _consider(self, c: Cycle, entry: Entry) -> None:
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
            self._still_patient(c, entry)
            return
        shape = entry.shape
        known = self._views.memo.at((v.seen(), v.held)).get(shape)
        if (
            known is not None
            and known.pods <= entry.gang.pods
            and self._views.holds(c, v, shape, known)
        ):
            self._known_unplaceable(c, entry, p, v, known)
            return
        if p.attempts >= self.config.policy.max_attempts:
            return
        p.attempts += 1
        self._attempt(c, entry, p, v)

    def _known_unplaceable(self, c: Cycle, entry: Entry, p: Pool, v: View, k: Known) -> None:
        """This gang, or one of its shape and priority with no more pods, could not be placed
        on this very view, nor preempt: neither can this one, and nothing is solved again."""
        same = k.key == entry.key
        wait = Wait(k.reason, k.message) if same else self._views.kin_wait(c, entry, k)
        self._wait(c, entry, wait)
        if wait.reason in BLOCKING:
            self._block(c, entry, p, v.snapshot, v.seen())

    def _attempt(self, c: Cycle, entry: Entry, p: Pool, v: View) -> None:
        view = v.snapshot
        placement = place_one(view, entry.gang, self._place_config(entry, c.now))
        c.out.tried.append(placement)
        if placement.placed:
            if view is c.work:  # placed on the whole free capacity: joint placement may move it
                c.free_starts.append((entry.key, entry.gang, placement))
            self._start(c, entry, placement)
            return
        seen = v.seen()
        if placement.status is PlacementStatus.WAITING:
            entry.failed_on = seen
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
        self._wait(c, entry, wait)
        if wait.reason in BLOCKING:
            self._block(c, entry, p, view, seen)

    def _still_patient(self, c: Cycle, entry: Entry) -> None:
        """Placeable but waiting for a compact placement, on an unchanged view: same answer
        until its patience ends, no solver call."""
        if entry.last is not None:
            c.out.waiting[entry.key] = entry.last
        c.out.wake(entry.recheck_at)

    def _place_config(self, entry: Entry, now: float) -> PlaceConfig:
        place = self.config.place
        if not place.scheduling.compact_wait_s:
            return place
        since = now if entry.placeable_since is None else entry.placeable_since
        return place.model_copy(update={"waited_s": now - since})

    def _start(self, c: Cycle, entry: Entry, placement: Placement) -> None:
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

    def _patient(self, c: Cycle, entry: Entry, placement: Placement) -> None:
        if entry.placeable_since is None:
            entry.placeable_since = c.now
        entry.recheck_at = entry.placeable_since + self.config.policy.compact_wait_s
        c.out.wake(entry.recheck_at)
        self._wait(c, entry, Wait(WaitReason.COMPACT, placement.reason))

    def _wait(self, c: Cycle, entry: Entry, wait: Wait) -> None:
        entry.last = wait
        c.out.waiting[entry.key] = wait
        if wait.reason is WaitReason.UNPLACEABLE:
            c.pool(entry.gang.pool).unplaceable += 1

    def _block(self, c: Cycle, entry: Entry, p: Pool, view: Snapshot, seen: bytes) -> None:
        if c.borrowing:  # a borrower holds no reservation and blocks no one
            return
        if self.config.policy.backfill is Backfill.NONE:
            p.blocker = entry.gang.name
        elif self.config.policy.backfill is Backfill.EASY and p.reservation is None:
            p.reservation = self._reservation(c, entry, view, seen)
            if p.reservation is not None:
                c.out.reservations[entry.gang.pool] = p.reservation

    def _reservation(
        self, c: Cycle, entry: Entry, view: Snapshot, seen: bytes
    ) -> Reservation | None:
        # what it depends on: the view, and which gangs will end when; the same free capacity
        # can hold other gangs (one ended and another took exactly its place)
        pool = entry.gang.pool
        mine = [r for r in (*c.leaving, *c.started) if r.gang.pool == pool]
        made_on = (seen, c.index.pool_versions.get(pool, 0), tuple(r.key for r in mine))
        if entry.reserved is None or entry.reserved[0] != made_on:
            ordered = c.index.releases(pool, mine)
            entry.reserved = (made_on, reserve(entry.key, view, entry.gang, ordered, self.config))
        return entry.reserved[1]
