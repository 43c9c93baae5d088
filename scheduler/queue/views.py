"""What a gang sees, and what is known of it: the views and the memo behind the queue's walk.

Contract. A gang's view is the free capacity less the hosts held from it (preemptors' and moved
gangs' pins, its pool's reservation unless it ends before it), made once per cycle, pool,
held hosts and version of the work snapshot, with its fingerprint. The memo (memo.py) keeps,
per view, the shapes found unplaceable and who they could have taken hosts from (a digest of the
running gangs of the pool, lower priority, same tenant unless cross-tenant; where quotas lend,
of the running set too, since a gang within its quota reclaims from borrowers); what is known
holds while that digest is the same. `why` names a wait: NeverFits (reasons.never_fits, once
per shape and size on a fabric), Unplaceable, or WaitingForReservation naming the holders.
Promises: a view never shows a host held for another gang; nothing known is used on another
fabric (`forget_fabric`)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from scheduler.model.policy import LendingMode, Preemption
from scheduler.placement import Snapshot
from scheduler.placement.capacity import Capacity
from scheduler.placement.reasons import never_fits
from scheduler.placement.snapshot import Array, Bools
from scheduler.queue import counts
from scheduler.queue.counts import NOT_PLAIN, Fits
from scheduler.queue.cycle import Cycle, Free, View, ends_before
from scheduler.queue.holds import Holds
from scheduler.queue.memo import Memo
from scheduler.queue.order import Known, PoolOrder
from scheduler.queue.shapes import ShapeIds, shape_of
from scheduler.queue.types import Entry, QueueConfig, Wait, WaitReason


@dataclass
class Views:
    config: QueueConfig
    entries: dict[str, Entry]
    pins: Holds
    shapes: ShapeIds
    memo: Memo = field(default_factory=Memo)  # what is known unplaceable, per view
    never: dict[tuple[object, ...], str | None] = field(default_factory=dict)  # never fits
    fits: Fits = field(default_factory=Fits)  # the plain requests of the shapes (counts.py)
    # per pool: the order's shapes, the requests' version, and what `_plain` read of them
    _plains: dict[str, tuple[Array, int, Bools, Array]] = field(default_factory=dict)

    def forget_fabric(self) -> None:
        """Labels, taints and pools are not in a fingerprint: another fabric knows nothing."""
        self.memo.clear()
        self.never.clear()

    def view(self, c: Cycle, entry: Entry) -> View:
        return self.view_for(c, entry.gang.pool, self.held_from(c, entry))

    def view_for(self, c: Cycle, pool: str, held: frozenset[int]) -> View:
        key = (pool, held, c.version)
        if key not in c.views:
            view = c.work
            if held:  # place_one and the choosers never change the view
                view = c.work.copy()
                view.down |= held
            mask = c.work.fabric.pool_mask.get(pool)
            mine = frozenset(h for h in held if mask is not None and mask[h])
            free = c.free.get((pool, c.version))
            if free is None:
                free = c.free[(pool, c.version)] = Free(c.work, pool, c.version)
            c.views[key] = View(view, pool, mine, free)
        return c.views[key]

    def held_from(self, c: Cycle, entry: Entry) -> frozenset[int]:
        r = c.pool(entry.gang.pool).reservation
        if not self.pins.hosts:  # the common cases, on the hot path: no preemptor holds hosts
            if r is None or r.key == entry.key or ends_before(entry, c.now, r):
                return frozenset()
            return r.hosts
        return frozenset().union(*self.held_by(c, entry).values())

    def held_by(self, c: Cycle, entry: Entry) -> dict[str, frozenset[int]]:
        """Gang name -> hosts held for it that this entry may not use: preemptors' nominated
        hosts, and its pool's reservation unless the entry ends before it."""
        held = {self.entries[k].gang.name: h for k, h in self.pins.others(entry.key).items()}
        r = c.pool(entry.gang.pool).reservation
        if r is not None and r.key != entry.key and not ends_before(entry, c.now, r):
            held[r.gang] = r.hosts
        return held

    def victims(self, c: Cycle, pool: str, priority: int, tenant: str) -> bytes:
        """A digest of what a failed try could still take hosts from (empty when nothing):
        the running gangs a gang of this priority and tenant may preempt in the pool now and,
        where quotas lend, the running gangs themselves, since a gang within its quota takes
        hosts back from borrowers (teams/owed.py) and any start, end or eviction can change
        who borrows. The free capacity alone says neither: the same free capacity can come
        back with a borrower on it that was not there when a try failed."""
        return self._preemptible(c, pool, priority, tenant) + self._reclaimable(c)

    def _reclaimable(self, c: Cycle) -> bytes:
        if c.ledger is None or self.config.policy.lending is LendingMode.OFF:
            return b""
        # the running set: the driver's version, then this cycle's starts and evictions. Not
        # the clock: a failed try's reclaim found no victims that make room, which the time
        # does not change; a gang whose deadline runs is tried whatever is known (owed_clock)
        return struct.pack(">3Q", c.index.version, c.counted(), len(c.evicted))

    def _preemptible(self, c: Cycle, pool: str, priority: int, tenant: str) -> bytes:
        if self.config.policy.preemption is Preemption.OFF:
            return b""  # nothing is ever preempted: no need to look at what runs
        at = (pool, priority, tenant, c.counted(), len(c.evicted))
        if at not in c.victims:
            who = None if self.config.policy.cross_tenant else tenant
            xor, n = c.below(pool, priority, who)
            c.victims[at] = xor.to_bytes(16, "big") if n else b""
        return c.victims[at]

    def still_known(self, c: Cycle, v: View) -> dict[int, Known]:
        """What is known unplaceable on this view, per shape, that still holds: found when the
        gangs it could preempt were the ones it could preempt now."""
        known = self.known_on(v)
        # shapes far outnumber their owners (priority, tenant): each owner's victims read once
        victims: dict[tuple[int, str], bytes] = {}
        out: dict[int, Known] = {}
        for shape, k in known.items():
            owner = self.shapes.owners[shape]
            found = victims.get(owner)
            if found is None:
                found = victims[owner] = self.victims(c, v.pool, *owner)
            if k.victims == found:
                out[shape] = k
        return out

    def known_on(self, v: View) -> dict[int, Known]:
        """The memo's findings on this view, per shape. An empty memo (no try has failed on
        a recent view: on Philly's first 20,000 jobs, always) knows nothing of any view, and
        the view's digest is not computed to look that up."""
        if not self.memo.known:
            return {}
        return self.memo.at((v.seen(), v.held))

    def holds(self, c: Cycle, v: View, shape: int, k: Known) -> bool:
        """Whether what is known still holds: the gangs it could preempt are the same."""
        return k.victims == self.victims(c, v.pool, *self.shapes.owners[shape])

    def remember(self, c: Cycle, v: View, entry: Entry, wait: Wait) -> None:
        """What this failure says of the view: its shape and priority, with this many pods or
        more, cannot start there nor preempt the gangs it may preempt now. The most recent
        views are kept."""
        victims = self.victims(c, v.pool, entry.gang.priority, entry.tenant)
        found = Known(entry.gang.pods, wait.reason, wait.message, entry.key, victims)
        self.memo.learn((v.seen(), v.held), entry.shape, found)
        for kin in self.shapes.kin_of(entry.shape) - {entry.shape}:
            # placement does not ask who owns a gang: a kin that may preempt the same gangs
            # (none) fails too; others keep what they knew (`holds` would refuse this anyway)
            if self.victims(c, v.pool, *self.shapes.owners[kin]) == victims:
                self.memo.learn((v.seen(), v.held), kin, found)

    def why(self, c: Cycle, entry: Entry, view: Snapshot, reason: str) -> Wait:
        """Never fits on this fabric, unplaceable now, or only kept off hosts held for earlier
        gangs (it would fit on them)."""
        never = self.never_fits_once(c, entry)
        if never is not None:
            return Wait(WaitReason.NEVER_FITS, never)
        if view is c.work or Capacity.of(c.work, entry.gang).total < entry.gang.pods:
            return Wait(WaitReason.UNPLACEABLE, reason)
        holders = sorted(self.holders(c, entry))
        return Wait(WaitReason.RESERVED, f"hosts are held for {', '.join(holders)}; {reason}")

    def kin_wait(self, c: Cycle, entry: Entry, k: Known) -> Wait:
        """Why it waits, learnt from a smaller gang of its shape, in its own words: never
        fitting by its own proof (it may, where the smaller did not), else the smaller's
        failure said without that gang's numbers."""
        never = self.never_fits_once(c, entry)
        if never is not None:
            return Wait(WaitReason.NEVER_FITS, never)
        return Wait(
            k.reason, f"a gang of {k.pods} such pods could not be placed on this free capacity"
        )

    def never_fits_once(self, c: Cycle, entry: Entry) -> str | None:
        """Whether the gang can never fit on this fabric (reasons.never_fits), once per shape
        and size while the fabric is the same."""
        key = (*shape_of(entry), entry.gang.pods)
        if key not in self.never:
            self.never[key] = never_fits(c.work.fabric, entry.gang)
        return self.never[key]

    def room(self, c: Cycle, v: View) -> Array:
        """Per plain request of the view's pool, the pods that fit on it (once per view): its
        version's, less what the hosts held from it (down in it, up in the version) take
        (counts.held_room)."""
        fits = self.fits.by_pool.get(v.pool, [])
        if v.room is None or len(v.room) != len(fits):
            free = v.free
            table = self.fits.table(v.pool, v.snapshot.fabric)
            if free.version != c.version:  # the work snapshot has moved on: this view alone
                v.room = counts.room(v.snapshot, v.pool, fits, table)
                return v.room
            if free.pods is None or free.room is None or len(free.room) != len(fits):
                free.pods = counts.per_host(free.snapshot, v.pool, fits, table)
                free.room = free.pods.sum(axis=1)
            # every host held from it, not only the pool's own (`v.held`): a lent one counts
            held = frozenset(v.snapshot.down - free.snapshot.down)
            v.room = counts.held_room(free.pods, free.room, held)
        return v.room

    def counted(self, c: Cycle, v: View, entry: Entry) -> Known | None:
        """What counting proves of this gang on its view: unplaceable, in the words a try would
        give (NeverFits; Unplaceable when it does not fit on the pool's whole free capacity
        either; else WaitingForReservation), as this gang's own finding; None when counting
        proves nothing or a try could do more than fail (preempt, reclaim)."""
        fit = int(self.fits.of_shape[entry.shape])
        pods = entry.gang.pods
        if fit == NOT_PLAIN or c.ledger is not None or c.borrowing or pods <= self.room(c, v)[fit]:
            return None
        if self.victims(c, v.pool, entry.gang.priority, entry.tenant):
            return None
        never = self.never_fits_once(c, entry)
        if never is not None:  # as `why` says it first
            return Known(pods, WaitReason.NEVER_FITS, never, entry.key)
        g, room = entry.gang, self.room(c, v)[fit]
        said = f"needs {pods} pods x {g.gpus_per_pod} GPUs in pool {g.pool}; room for {room}"
        full = self.view_for(c, v.pool, frozenset())
        if v.snapshot is c.work or pods > self.room(c, full)[fit]:
            return Known(pods, WaitReason.UNPLACEABLE, said, entry.key)
        holders = ", ".join(sorted(self.holders(c, entry)))
        return Known(pods, WaitReason.RESERVED, f"hosts are held for {holders}; {said}", entry.key)

    def count_blocked(self, c: Cycle, v: View, order: PoolOrder) -> tuple[Bools, Bools]:
        """`counted` for every gang of the order at once: proven blocked on this view, and
        whether for want of room (Unplaceable). Once per view and length of the order."""
        if c.ledger is not None or c.borrowing or not len(order):
            none = np.zeros(len(order), dtype=np.bool_)
            return none, none
        if v.counted is None or v.counted[0] != len(order):
            v.counted = (len(order), *self._count_blocked(c, v, order))
        return v.counted[1], v.counted[2]

    def _count_blocked(self, c: Cycle, v: View, order: PoolOrder) -> tuple[Bools, Bools]:
        plain, at = self._plain(v.pool, order)
        if not plain.any():
            return plain, plain
        blocked = plain & (order.pods > self.room(c, v)[at])
        if self.config.policy.preemption is not Preemption.OFF:
            blocked &= self._preempt_none(c, v.pool, order)
        if v.snapshot is c.work:
            return blocked, blocked
        full = self.view_for(c, v.pool, frozenset())
        return blocked, blocked & (order.pods > self.room(c, full)[at])

    def _plain(self, pool: str, order: PoolOrder) -> tuple[Bools, Array]:
        """Per gang of the order: whether its shape is plain, and its request's index (0 where
        not). Kept while the order's shapes (an array replaced, never written, as gangs come
        and go) and the shapes' requests are the same: every view of a cycle reads them."""
        kept = self._plains.get(pool)
        if kept is None or kept[0] is not order.shapes or kept[1] != self.fits.version:
            fit = self.fits.of_shape[order.shapes]
            plain = fit != NOT_PLAIN
            at = np.where(plain, fit, 0)
            kept = self._plains[pool] = (order.shapes, self.fits.version, plain, at)
        return kept[2], kept[3]

    def _preempt_none(self, c: Cycle, pool: str, order: PoolOrder) -> Bools:
        """Per gang of the order: whether it may preempt no one now. The same for every view
        of the pool while the same gangs run and the order's shapes are the same."""
        state = (c.counted(), len(c.evicted))
        kept = c.preempt_none.get(pool)
        if kept is None or kept[0] != state or kept[1] is not order.shapes:
            kept = c.preempt_none[pool] = (state, order.shapes, self._preempting(c, pool, order))
        return kept[2]

    def _preempting(self, c: Cycle, pool: str, order: PoolOrder) -> Bools:
        everyone = np.ones(len(order), dtype=np.bool_)
        top = max(priority for priority, _ in self.shapes.owners)
        if not c.below(pool, top, None)[1]:  # nothing runs below the highest priority queued
            return everyone
        # shapes far outnumber their owners (priority, tenant): each owner's victims read once
        owners: dict[tuple[int, str], bool] = {}
        for owner in self.shapes.owners:
            if owner not in owners:
                owners[owner] = not self.victims(c, pool, *owner)
        empty = np.array([owners[o] for o in self.shapes.owners], dtype=np.bool_)
        return empty[order.shapes]

    def holders(self, c: Cycle, entry: Entry) -> set[str]:
        return set(self.held_by(c, entry))
