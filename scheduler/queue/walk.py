"""The walk of a cycle: every pool's queued gangs in queue order, merged across pools.

Contract. `walk` yields the entries a cycle looks at, pools merged by (priority, arrival, key).
Quiet cycles (`report_waits` off, no patience: the simulator) pass over the gangs whose look
could only report a wait: known blocked on the view they see (views.py, memo.py) or proven
so by counting (counts.py), past each
pool's first blocked gang while it has no reservation or blocker and, with joint placement or
moves on, its first two unplaceable ones; once tries are spent, every gang not known blocked;
behind a strict-order blocker, everyone. Gangs pinned, backing off or waiting for their victims
(`specials`) are always looked at; pools with held hosts are walked whole (views then differ gang
by gang). Promises: the same decisions as walking every gang (a test replays overloaded runs
both ways under every backfill rule)."""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from scheduler.model.policy import Backfill
from scheduler.placement.snapshot import Bools
from scheduler.queue.backoff import Backoff
from scheduler.queue.cycle import Cycle, View, first
from scheduler.queue.holds import Holds
from scheduler.queue.order import PoolOrder
from scheduler.queue.shapes import ShapeIds
from scheduler.queue.types import Entry, QueueConfig
from scheduler.queue.views import Views


@dataclass
class Walk:
    config: QueueConfig
    entries: dict[str, Entry]
    orders: dict[str, PoolOrder]  # pool -> its entries in queue order
    shapes: ShapeIds
    pins: Holds
    backoff: Backoff
    views: Views

    def walk(self, c: Cycle) -> Iterator[Entry]:
        heap: list[tuple[tuple[int, float, str, str], str, int]] = []
        for pool, order in self.orders.items():
            i = self._next(c, pool, order, 0)
            if i is not None:
                heap.append((order.orders[i], pool, i))
        heapq.heapify(heap)
        while heap:
            _, pool, i = heapq.heappop(heap)
            order = self.orders[pool]
            yield self.entries[order.keys[i]]
            j = self._next(c, pool, order, i + 1)
            if j is not None:
                heapq.heappush(heap, (order.orders[j], pool, j))

    def specials(self, owed: Iterable[str] = ()) -> dict[str, list[int]]:
        """Per pool, the positions of gangs that are looked at whatever is known of their
        shape: pinned by a move, backing off, waiting for their victims to go, or `owed` a
        reclaim whose deadline already runs (what a try may take back depends on the time
        left, which no other gang of the shape shares: teams/reclaim.py)."""
        out: dict[str, list[int]] = {}
        for key in {*self.pins.pins, *self.backoff.keys(), *self.pins.leaving, *owed}:
            entry = self.entries.get(key)
            if entry is None:
                continue
            i = self.orders[entry.gang.pool].index(entry)
            if i is not None:
                out.setdefault(entry.gang.pool, []).append(i)
        return {pool: sorted(found) for pool, found in out.items()}

    def _next(self, c: Cycle, pool: str, order: PoolOrder, i: int) -> int | None:
        """The next position from i whose look can decide something. Passed over: gangs known
        blocked on the view they see (they would only report it), past the pool's first
        blocked one while it has no reservation or blocker and, when joint placement or moves
        are on, its first two unplaceable ones; once tries are spent, every gang not known
        blocked (it would not be tried); behind a strict-order blocker, everyone."""
        if i >= len(order):
            return None
        if not c.quiet or self._held_in(c, pool):
            return i
        specials = c.specials.get(pool, [])
        s = bisect.bisect_left(specials, i)
        special = specials[s] if s < len(specials) else None
        p = c.pool(pool)
        if p.blocker is not None:
            return special
        if p.pending is not None and self._none_starts(c, pool, order, i):
            return special
        blocked, why = self._known_blocked(c, pool, order)
        held = self._quota_held(c, pool, order)
        need = np.zeros(len(order) - i, dtype=np.bool_)
        if p.attempts < self.config.policy.max_attempts:
            need |= ~(blocked[i:] | held[i:])
        # a gang its quota holds blocks no one and is not tried: the first blocked and the
        # first unplaceable ones are among the others
        blocked, why = blocked & ~held, why & ~held
        if p.reservation is None and self.config.policy.backfill is not Backfill.GREEDY:
            first(need, blocked[i:])
        wants_blocked = (
            self.config.policy.joint_gangs >= 2 or self.config.policy.defrag_moves_per_hour > 0
        )
        if wants_blocked and p.unplaceable < 2:
            first(need, why[i:])
        hits = np.flatnonzero(need)
        found = i + int(hits[0]) if len(hits) else None
        if special is None or (found is not None and found < special):
            return found
        return special

    def _none_starts(self, c: Cycle, pool: str, order: PoolOrder, i: int) -> bool:
        """Whether no gang from position i on can start, whatever the pool's reservation (not
        made yet) holds: each is held by its quota or proven blocked by counting on the pool's
        whole free capacity (a reservation only takes hosts away). Then the reservation is
        never made (`Cycle.lazy`: nothing after the walk reads it)."""
        if not c.lazy:
            return False
        full = self.views.view_for(c, pool, frozenset())
        counted, _ = self.views.count_blocked(c, full, order)
        held = self._quota_held(c, pool, order)
        return bool((counted[i:] | held[i:]).all())

    def _known_on(self, c: Cycle, v: View, order: PoolOrder) -> tuple[Bools, Bools]:
        """Per position, on one view: known blocked and known unplaceable, from the memo where
        it knows the gang's shape (a gang looks there first: consider.py), else by counting."""
        blocked, why = order.known_blocked(self.views.still_known(c, v), len(self.shapes))
        counted, unplaceable = self.views.count_blocked(c, v, order)
        return blocked | counted, np.where(blocked, why, unplaceable)

    def _quota_held(self, c: Cycle, pool: str, order: PoolOrder) -> Bools:
        """Per position: held by its queue's quota, as a gang of its shape with no more pods
        was this cycle (queue/teams/queues.py)."""
        known = c.quota_known.get(pool)
        if not known:
            return np.zeros(len(order), dtype=np.bool_)
        state = (c.quota_version, len(order))
        cached = c.quota_masks.get(pool)
        if cached is not None and cached[0] == state:
            return cached[1]
        held = order.reaching(known, len(self.shapes))
        c.quota_masks[pool] = (state, held)
        return held

    def _held_in(self, c: Cycle, pool: str) -> bool:
        """Whether a preemptor or a moved gang holds hosts of this pool (views then differ
        gang by gang: quiet cycles look at each)."""
        mask = c.work.fabric.pool_mask.get(pool)
        return mask is not None and self.pins.any_in(mask)

    def _known_blocked(self, c: Cycle, pool: str, order: PoolOrder) -> tuple[Bools, Bools]:
        """Per position: known blocked on the view that gang sees now, and known unplaceable.
        Views: the pool's free capacity, less its reservation for the gangs that do not end
        before it (no other hosts are held here: `_held_in`)."""
        r = c.pool(pool).reservation
        known = (c.version, self.views.memo.version, len(order))
        state = (*known, r)
        cached = c.masks.get(pool)
        if cached is not None and cached[0] == state:
            return cached[1], cached[2]
        blocked, why = self._on_free(c, pool, order, known)
        if r is not None:
            held = self.views.view_for(c, pool, r.hosts)
            sees = ~(c.now + order.estimates <= r.at)  # nan (no estimate): never ends before
            mine = order.index(self.entries[r.key]) if r.key in self.entries else None
            if mine is not None:
                sees[mine] = False
            b2, w2 = self._known_on(c, held, order)
            blocked, why = np.where(sees, b2, blocked), np.where(sees, w2, why)
        c.masks[pool] = (state, blocked, why)
        return blocked, why

    def _on_free(
        self, c: Cycle, pool: str, order: PoolOrder, known: tuple[int, int, int]
    ) -> tuple[Bools, Bools]:
        """`_known_on` the pool's whole free capacity, once per state: the walk asks again
        when the pool's reservation is made, on the same version (its first blocked gang
        sees no reservation; those behind it see one)."""
        cached = c.free_masks.get(pool)
        if cached is None or cached[0] != known:
            full = self.views.view_for(c, pool, frozenset())
            cached = c.free_masks[pool] = (known, *self._known_on(c, full, order))
        return cached[1], cached[2]
