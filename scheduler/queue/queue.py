"""The scheduling queue: the one object the operator and the simulator both drive.

Contract. A cycle takes the driver's clock `now`, the free capacity (a Snapshot, left
unchanged) and the gangs running now. It decides which queued gangs start and where, which
running gangs are evicted and for whom, why each tried gang waits, which hosts are held for a
blocked gang, and when the queue wants to be called again. It promises:
- order: priority (higher first), then arrival (earlier first), then key; a gang put back
  (preempted, failed start) keeps its arrival, so it keeps its place; with teams, priority
  orders gangs within their own team queue only (queue/teams/ranks.py);
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
- bounded work: at most `max_attempts` placement tries per pool per cycle, a gang whose pods
  outnumber what its view's hosts can take (counts.py) using none; a gang is not tried
  on a view (free capacity and held hosts of its pool, on the same fabric) on which a gang of
  its shape and priority with no more pods was found unplaceable, in this cycle or an earlier
  one, while the gangs it may preempt are the same (the larger needs at least as much); with
  `report_waits` off, a cycle passes over such gangs without looking at each (queue/order.py),
  to the same decisions;
- joint placement (checkpoints/joint.py, `joint_gangs`): the cycle's starts made on the whole free
  capacity are placed again together with each pool's first unplaceable gang when that starts
  more gangs or costs less J; hosts held for reservations and preemptors stay theirs;
- defragmentation (checkpoints/defrag.py, `defrag_moves_per_hour`): a running training gang that
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
what is known unplaceable, wait reasons), counts.py (what counting proves cannot start),
holds.py and preempting.py (pins, preemption),
reservation.py, after.py (joint placement, moves), backoff.py; cycle.py is a cycle's state.
Drivers apply the decisions through one port (effects.py): the simulator at once, the operator
through the API server."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from scheduler.model.gang import GangRequest
from scheduler.model.placement import Placement
from scheduler.model.policy import Preemption
from scheduler.placement import Snapshot, spares
from scheduler.placement.api import RACKWISE
from scheduler.placement.snapshot import Array
from scheduler.placement.uplinks import Crossings
from scheduler.queue.backoff import Backoff
from scheduler.queue.checkpoints.after import AfterWalk
from scheduler.queue.checkpoints.defrag import Defrag
from scheduler.queue.consider import Consider
from scheduler.queue.cycle import Cycle
from scheduler.queue.holds import Holds
from scheduler.queue.lending import Lending
from scheduler.queue.order import PoolOrder
from scheduler.queue.preempting import Preempting
from scheduler.queue.running import RunningGangs
from scheduler.queue.shapes import ShapeIds, Tenancy, shape_keys
from scheduler.queue.teams.queues import TeamQueues
from scheduler.queue.teams.ranks import Ranks
from scheduler.queue.teams.use import Charge, Numbers
from scheduler.queue.types import (
    Decisions,
    Entry,
    QueueConfig,
    Running,
)
from scheduler.queue.views import Views
from scheduler.queue.walk import Walk
from scheduler.teams import Teams
from scheduler.topology import Fabric


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
        # the gangs queued since the last cycle: each cycle tells `_gang.arrivals` of them
        self._fresh: list[Entry] = []
        # one gang in a cycle: admitted, placed, patient or blocked (queue/consider.py), with
        # each pool's recent arrivals (queue/arrivals.py)
        self._gang = Consider(
            self.config, self._entries, self._pins, self._backoff, self._views, self._orders
        )
        wait, start = self._gang.wait, self._gang.start
        self._preempting = Preempting(
            self.config, self._entries, self._pins, self._views, wait, start
        )
        self._teams = TeamQueues(self.config, self._entries, self._pins, self._views, wait)
        self._gang.bind(self._preempting, self._teams)
        # priority within a team (queue/teams/ranks.py)
        self._ranks = Ranks(self._entries, self._orders, self._teams.team_of, self._teams.on)
        self._lending = Lending(
            self.config,
            self._entries,
            self._orders,
            self._pins,
            self._views,
            wait,
            start,
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
            wait,
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
            self._fresh.append(entry)

    def _shape(self, entry: Entry) -> None:
        key, family = shape_keys(entry, self._tenancy)
        shape, reused = self._shapes.take(key, (entry.gang.priority, entry.tenant), family)
        if reused:  # freed by a shape no gang has any more: what was known goes with it
            self._views.memo.forget_shape(shape)
        self._views.fits.shape(shape, entry.gang.pool, entry.gang)
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
        quota beside the running list (queue/teams/use.py, `use`)."""
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
        self._gang.arrivals.seen(now, self._fresh)
        self._fresh.clear()
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
        c = self._new_cycle(now, spares.hold_back(snapshot), running)
        c.leaving = list(leaving)
        self._teams.begin(c)
        if self.config.place.policy == RACKWISE and self.config.policy.contention:
            c.work.uplinks = self._uplinks(snapshot, c)  # J prices the uplinks' load
        self._preempting.settle(c)
        c.quiet = not self.config.report_waits and not self.config.policy.compact_wait_s
        policy = self.config.policy
        after = policy.joint_gangs >= 2 or policy.defrag_moves_per_hour > 0
        c.lazy = c.quiet and not (after or self._lending.active() or self._teams.on)
        c.specials = self._walker.specials(self._teams.reclaim.owed_since)
        for entry in self._walker.walk(c):
            self._gang.safely(c, entry)
        if not c.lazy:
            c.settle()
        self._teams.borrow(c, self._gang.safely)
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
