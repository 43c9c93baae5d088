"""Idle hosts lent across pools, and taken back within the lender's deadline.

Contract. Runs once a cycle, after the walk, when some pool declares `lend` (pools.Lending) and
another `borrow`, and the policy's `lending` is not off. Takes the pools' rules, the running
gangs and the cycle's work snapshot. Decides:
- what each lending pool lends. `topology` (rackwise): whole racks whose every host is up, held
  for no one and has run none of the pool's own gangs for `idle_after_s`, the highest racks
  first; with `unit: host`, then its other hosts idle as long, from the racks with
  the most of them; always while the pool keeps at least `reserve_hosts` idle hosts unlent.
  `quota` (the baseline, as Kueue's cohort borrowing): every idle host beyond the reserve, at
  once, in any rack;
- borrowed starts: a borrowing pool's gangs that waited this cycle (its own hosts, or its own
  pool's team quota, could not start them), in queue order, placed by their own objective on
  their pool's free hosts plus the fewest lent racks that hold them (one rack: the tightest
  that does; `quota`: every lent host), no host held for another gang, and started when their
  team queue's quota allows that placement (`allows_on`: what it uses of lent hosts is charged
  to the lender pool's quota, borrowed through its cohort);
- reclaims (queue/teams/reclaim.py, the mechanism team queues use too): a lending pool's first gang
  that cannot start, when borrowed gangs hold its hosts: the victims, evicted at their
  checkpoints or at `reclaim_within_s` (`topology`: one that would lose work is not chosen
  before that deadline, the owner taking what frees meanwhile); while its gang waits for that,
  a pool lends nothing new.
Promises: a pinned host is lent to no one; a borrowed gang being reclaimed is evicted no later
than its deadline; a borrowed gang runs only on hosts lent to its pool when it started; every
eviction names the lending pool's gang it makes room for and the work it loses.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from scheduler.model.gang import GangRequest
from scheduler.model.placement import Placement
from scheduler.model.policy import LendingMode
from scheduler.model.topology import Tier
from scheduler.placement import Snapshot, place_one
from scheduler.pools import Lending as Rules
from scheduler.pools import LendUnit
from scheduler.queue.cycle import Cycle
from scheduler.queue.holds import Holds
from scheduler.queue.order import PoolOrder
from scheduler.queue.teams.quotas import Verdict
from scheduler.queue.teams.reclaim import Reclaims, free_gpus, pods_by_pool
from scheduler.queue.types import Entry, QueueConfig, Running, Wait, WaitReason
from scheduler.queue.views import Views
from scheduler.topology.fabric import Fabric

BORROW_TRIES = 8  # borrowed placements tried per borrowing pool per cycle
# waits that say the gang's own pool could not start it now (NeverFits: not even empty)
BLOCKED = (
    WaitReason.UNPLACEABLE,
    WaitReason.BEHIND,
    WaitReason.RESERVED,
    WaitReason.NEVER_FITS,
)
QUOTA_WAITS = (WaitReason.QUOTA_EXCEEDED, WaitReason.WAITING_TO_BORROW)  # its own pool's quota
STARTABLE = (Verdict.FITS, Verdict.BORROWS)  # what team queues' quota allows to start now


@dataclass
class Lending:
    config: QueueConfig
    entries: dict[str, Entry]
    orders: dict[str, PoolOrder]  # pool -> its queued gangs in queue order (the queue's)
    pins: Holds
    views: Views
    wait: Callable[[Cycle, Entry, Wait], None]
    start: Callable[[Cycle, Entry, Placement], None]
    allows: Callable[[Cycle, Entry], Verdict]  # what its team's quota says (queue/teams/queues.py)
    # the same, once placed: what it uses of lent hosts charged to the lender pool's quota
    allows_on: Callable[[Cycle, Entry, Placement], Verdict]
    idle_since: dict[int, float] = field(default_factory=dict)  # lender's host -> idle from
    failed: dict[tuple[str, int], bytes] = field(default_factory=dict)  # (pool, shape) -> view
    reclaim: Reclaims = field(init=False)  # taking lent hosts back (queue/teams/reclaim.py)

    def __post_init__(self) -> None:
        self.reclaim = Reclaims(
            self.config,
            self.entries,
            self.pins,
            self.views,
            self.wait,
            lambda: self.lenders,
            self._waiting,
        )

    def refit(self, old: Fabric | None, new: Fabric) -> None:
        """The cluster's hosts changed: each lender's host keeps when it became idle, by name
        (a host new to the fabric is idle from when it is first seen)."""
        if old is None:
            return
        names = {h: old.hosts[h].name for h in self.idle_since}
        index = new.host_index
        self.idle_since = {index[n]: self.idle_since[h] for h, n in names.items() if n in index}

    @cached_property
    def lenders(self) -> dict[str, Rules]:
        return {p.name: p.lend for p in self.config.pools if p.lend is not None}

    @cached_property
    def borrowers(self) -> frozenset[str]:
        return frozenset(p.name for p in self.config.pools if p.borrow)

    @property
    def mode(self) -> LendingMode:
        return self.config.policy.lending

    def active(self) -> bool:
        return self._lends

    @cached_property
    def _lends(self) -> bool:  # the config is frozen: asked twice a cycle, read once
        return pools_lend(self.config)

    def run(self, c: Cycle) -> None:
        if not self.active():
            return
        owned = owner_busy(c)
        self._track_idle(c, owned)
        borrowed = [r for r in c.running if r.key not in c.evicted and is_borrowed(c.work, r)]
        self.reclaim.forget_gone()
        self.reclaim.start(c, borrowed)
        self.reclaim.due(c, {r.key: r for r in borrowed})
        self._borrow(c, self._lent(c, owned))

    # what is lent
    def _track_idle(self, c: Cycle, owned: set[int]) -> None:
        fabric = c.work.fabric
        for pool in self.lenders:
            mask = fabric.pool_mask.get(pool)
            for h in [] if mask is None else np.flatnonzero(mask).tolist():
                if h in owned or h in c.work.down:
                    self.idle_since.pop(h, None)
                else:
                    self.idle_since.setdefault(h, c.now)

    def _lent(self, c: Cycle, owned: set[int]) -> dict[str, frozenset[int]]:
        held = frozenset().union(*self.pins.hosts.values())
        owed = self.reclaim.owed_pools()  # a pool whose own gang waits for its hosts back
        out: dict[str, frozenset[int]] = {}
        for pool, rules in self.lenders.items():
            hosts = frozenset() if pool in owed else self._lendable(c, pool, rules, owned, held)
            c.out.lent[pool] = int(c.work.fabric.gpus[sorted(hosts)].sum())
            for borrower in self.borrowers - {pool}:
                out[borrower] = out.get(borrower, frozenset()) | hosts
        return {pool: hosts for pool, hosts in out.items() if hosts}

    def _lendable(
        self, c: Cycle, pool: str, rules: Rules, owned: set[int], held: frozenset[int]
    ) -> frozenset[int]:
        mine = self._hosts(c, pool)
        idle = [h for h in mine if h not in owned and h not in held]
        spare = len(idle) - rules.reserve_hosts
        if spare <= 0:
            return frozenset()
        if self.mode is LendingMode.QUOTA:
            return frozenset(idle[-spare:])
        racks: dict[int, list[int]] = {}
        for h in mine:
            racks.setdefault(int(c.work.fabric.columns[Tier.RACK][h]), []).append(h)
        free = set(idle)
        whole = self._whole_racks(c, rules, racks, free, spare)
        if rules.unit is LendUnit.RACK:
            return whole
        return whole | self._idle_hosts(c, rules, racks, free - whole, spare - len(whole))

    def _whole_racks(
        self, c: Cycle, rules: Rules, racks: dict[int, list[int]], idle: set[int], spare: int
    ) -> frozenset[int]:
        """Racks whose every host is idle and was for `idle_after_s`, the highest first."""
        ready = c.now - rules.idle_after_s
        out: set[int] = set()
        for rack in sorted(racks, reverse=True):
            hosts = racks[rack]
            since = [self.idle_since.get(h, math.inf) for h in hosts]
            if not idle.issuperset(hosts) or len(out) + len(hosts) > spare:
                continue
            if max(since) <= ready + 1e-9:
                out.update(hosts)
            elif max(since) < math.inf:
                c.out.wake(max(since) + rules.idle_after_s)
        return frozenset(out)

    def _idle_hosts(
        self, c: Cycle, rules: Rules, racks: dict[int, list[int]], idle: set[int], room: int
    ) -> frozenset[int]:
        """Hosts idle for `idle_after_s` outside the whole racks lent (mostly in racks the lender
        still uses), from the racks with the most of them first (a borrowed gang then needs the
        fewest racks), up to `room`."""
        ready = c.now - rules.idle_after_s
        since = {h: self.idle_since.get(h, math.inf) for h in idle}
        later = [s for s in since.values() if ready + 1e-9 < s < math.inf]
        if later:
            c.out.wake(min(later) + rules.idle_after_s)
        found = {
            r: [h for h in hs if h in idle and since[h] <= ready + 1e-9] for r, hs in racks.items()
        }
        out: list[int] = []
        for rack in sorted(found, key=lambda r: (len(found[r]), r), reverse=True):
            out.extend(sorted(found[rack], reverse=True)[: max(0, room - len(out))])
        return frozenset(out)

    def _hosts(self, c: Cycle, pool: str) -> list[int]:
        mask = c.work.fabric.pool_mask.get(pool)
        if mask is None:
            return []
        return [h for h in np.flatnonzero(mask).tolist() if h not in c.work.down]

    # borrowing
    def _borrow(self, c: Cycle, lent: dict[str, frozenset[int]]) -> None:
        for pool, hosts in lent.items():
            tries = 0
            for entry in self._waiting(c, pool, to_borrow=True):
                if tries >= BORROW_TRIES:
                    break
                view = self.views.view(c, entry).snapshot.copy()
                view.lent = {pool: frozenset(h for h in hosts if h not in view.down)}
                seen = lent_fingerprint(view, pool)
                if self.failed.get((pool, entry.shape)) == seen:
                    continue
                tries += 1
                placement = self._fewest_racks(c, view, entry.gang)
                if placement is None:
                    self.failed[(pool, entry.shape)] = seen
                    continue
                placement, verdict = self._by_quota(c, entry, view, placement)
                if placement is None:  # the quotas of the pools it would use do not cover it
                    continue
                c.out.waiting.pop(entry.key, None)
                c.out.borrowed.add(entry.key)
                self._start(c, entry, placement, verdict)

    def _by_quota(
        self, c: Cycle, entry: Entry, view: Snapshot, placement: Placement
    ) -> tuple[Placement | None, Verdict]:
        """The placement and what team quotas say of it (`allows_on`). When they refuse one that
        uses the gang's own pool's hosts, the gang is placed again on lent hosts alone: its own
        pool's quota may be what is spent (other queues own those free hosts) while the lender's
        still lends, as Kueue tries a workload's next flavor."""
        verdict = self.allows_on(c, entry, placement)
        if verdict in STARTABLE:
            return placement, verdict
        fabric, pool = view.fabric, entry.gang.pool
        if all(fabric.host_pool[h] != pool for h in placement.hosts()):
            return None, verdict
        alone = view.copy()
        alone.down |= set(np.flatnonzero(fabric.pool_mask[pool]).tolist())
        again = self._fewest_racks(c, alone, entry.gang)
        if again is None:
            return None, verdict
        verdict = self.allows_on(c, entry, again)
        return (again, verdict) if verdict in STARTABLE else (None, verdict)

    def _start(self, c: Cycle, entry: Entry, placement: Placement, verdict: Verdict) -> None:
        """A start beyond its queue's nominal quota counts as borrowing quota, as one the teams'
        borrowing phase makes (queue/teams/queues.py, `started`)."""
        c.borrowing = verdict is Verdict.BORROWS
        try:
            self.start(c, entry, placement)
        finally:
            c.borrowing = False

    def _fewest_racks(self, c: Cycle, view: Snapshot, gang: GangRequest) -> Placement | None:
        """Placed on its own hosts and the fewest lent racks that hold it: lent hosts its own
        could have served would be taken back for nothing. One rack: the one with the least lent
        room that holds it (a borrowed gang's leftovers are filled before a whole rack is
        broken); more: the roomiest. Quota lending offers every lent host at once, as a quota
        knows no racks."""
        lent = view.lent[gang.pool]
        if self.mode is LendingMode.QUOTA:
            return self._try(c, view, gang, lent)
        column = view.fabric.columns[Tier.RACK]
        room: dict[int, int] = {}
        for h in lent:
            room[int(column[h])] = room.get(int(column[h]), 0) + int(view.free_gpus[h])
        need = gang.gpus - free_gpus(view, gang.pool)
        for racks in rack_sets(room, need):
            placement = self._try(c, view, gang, frozenset(h for h in lent if column[h] in racks))
            if placement is not None:
                return placement
        return None

    def _try(
        self, c: Cycle, view: Snapshot, gang: GangRequest, hosts: frozenset[int]
    ) -> Placement | None:
        trial = view.copy()
        trial.lent = {gang.pool: hosts}
        placement = place_one(trial, gang, self.config.at_once)
        c.out.tried.append(placement)
        return placement if placement.placed else None

    def _waiting(self, c: Cycle, pool: str, to_borrow: bool = False) -> list[Entry]:
        """The pool's gangs its own hosts did not start this cycle, in queue order: those that
        waited for capacity, and those a quiet cycle passed over as known to be blocked; each
        one its team queue's quota allows to start on its own pool's hosts. `to_borrow`: also
        those its own pool's quota held, the quota asked once the gang is placed on lent hosts
        (what it uses there is charged to the lender pool's quota: `allows_on`)."""
        order = self.orders.get(pool)
        started = {k for k, _ in c.out.starts}
        waits = (*BLOCKED, *QUOTA_WAITS) if to_borrow else BLOCKED
        found = []
        for key in [] if order is None else order.keys:
            if key in started or key in self.pins.pins:
                continue
            wait = c.out.waiting.get(key)
            if wait is not None and wait.reason not in waits:
                continue
            if to_borrow or self.allows(c, self.entries[key]) in STARTABLE:
                found.append(self.entries[key])
        return found


def pools_lend(config: QueueConfig) -> bool:
    """Whether some pool lends to another that borrows, with lending on."""
    lenders = {p.name for p in config.pools if p.lend is not None}
    others = any(p.borrow and lenders - {p.name} for p in config.pools)
    return config.policy.lending is not LendingMode.OFF and others


def rack_sets(room: dict[int, int], need: int) -> Iterable[frozenset[int]]:
    """The lent racks to offer a gang that needs `need` GPUs beyond its own pool's, fewest
    first: the tightest single rack that holds them, then the k roomiest for k = 2, 3, ...
    (equal rooms: the highest racks first)."""
    fits = [r for r in room if room[r] >= need]
    if fits:
        yield frozenset([min(fits, key=lambda r: (room[r], -r))])
    roomiest = sorted(room, key=lambda r: (room[r], r), reverse=True)
    for k in range(2, len(roomiest) + 1):
        if sum(room[r] for r in roomiest[:k]) >= need:
            yield frozenset(roomiest[:k])


def owner_busy(c: Cycle) -> set[int]:
    """Hosts running a gang of their own pool (now, or started this cycle)."""
    fabric = c.work.fabric
    index = fabric.host_index
    placed: Iterable[tuple[GangRequest, Placement]] = [
        (r.gang, r.placement) for r in c.running if r.key not in c.evicted
    ]
    out: set[int] = set()
    for gang, placement in placed:
        out.update(index[h] for h in placement.hosts() if fabric.host_pool[h] == gang.pool)
    for _, placement in c.out.starts:
        out.update(index[h] for h in placement.hosts())
    return out


def is_borrowed(view: Snapshot, r: Running) -> bool:
    return any(pool != r.gang.pool for pool in pods_by_pool(view.fabric, r.placement))


def lent_fingerprint(view: Snapshot, pool: str) -> bytes:
    """The free capacity a borrowing gang sees: its pool's hosts and those lent to it."""
    mask = view.pool_up(pool)
    digest = hashlib.blake2b(digest_size=16)
    digest.update(np.flatnonzero(mask).tobytes())
    for free in (view.free_gpus, view.free_cpu, view.free_mem, view.free_pods):
        digest.update(free[mask].tobytes())
    return digest.digest()
