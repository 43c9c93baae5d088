"""The state one cycle of the queue works on: what each pool has done this cycle, the views
gangs see (free capacity less the hosts held from them, fingerprinted once), and the decisions
being made. Made anew by every `SchedulingQueue.cycle`; the queue's parts read and write it."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from scheduler.placement import Snapshot
from scheduler.placement.snapshot import Array, Bools
from scheduler.queue.checkpoints.joint import Start
from scheduler.queue.running import RunningGangs, key_hash
from scheduler.queue.teams.quotas import Ledger
from scheduler.queue.types import Decisions, Entry, Reservation, Running


@dataclass
class Pool:
    attempts: int = 0
    blocker: str | None = None  # strict order: the first gang that could not start
    # EASY: the reservation of the pool's first blocked gang, made when first asked for (a
    # quiet walk that proves no later gang can start never asks: walk.py)
    pending: Callable[[], Reservation | None] | None = None
    made: Reservation | None = None
    unplaceable: int = 0  # gangs found unplaceable this cycle (joint placement wants the first)

    @property
    def reservation(self) -> Reservation | None:
        return self.make()

    def make(self) -> Reservation | None:
        """Its reservation, made now if it is still pending."""
        if self.pending is not None:
            make, self.pending = self.pending, None
            self.made = make()
        return self.made


@dataclass
class Free:
    """A pool's free resources on one version of the cycle's work snapshot, digested once and
    shared by every view made on that version (held views differ only in their down hosts)."""

    snapshot: Snapshot
    pool: str
    version: int  # of the cycle's work snapshot: `snapshot` shows it while the cycle's is this
    digest: bytes | None = None
    # per plain request of the pool and host, the pods it takes, and their sum (counts.py)
    pods: Array | None = None
    room: Array | None = None

    def seen(self) -> bytes:
        if self.digest is None:
            self.digest = free_digest(self.snapshot, self.pool)
        return self.digest


@dataclass
class View:
    """What a gang sees, and its fingerprint (computed once, when first asked for)."""

    snapshot: Snapshot
    pool: str
    held: frozenset[int]  # hosts of the pool held from the gangs that see this view
    free: Free  # the pool's free resources, shared with the other views of this version
    fingerprint: bytes | None = None
    room: Array | None = None  # per plain request of the pool, the pods it fits (counts.py)
    # per gang of the pool's order (as long as it was): proven blocked here, and unplaceable
    counted: tuple[int, Bools, Bools] | None = None

    def seen(self) -> bytes:
        if self.fingerprint is None:
            self.fingerprint = fingerprint(self.snapshot, self.pool, self.free.seen())
        return self.fingerprint


@dataclass
class Cycle:
    now: float
    work: Snapshot
    # the driver's running gangs listed, then the cycle's starts; None: listed from `index`
    # when first asked (most cycles never ask: listing thousands of gangs each cycle was 4%)
    given: list[Running] | None
    index: RunningGangs  # the driver's, indexed (queue/running.py)
    started: list[Running] = field(default_factory=list)  # this cycle's starts
    # gangs whose pods still hold hosts while they go (their job deleted, or its pods being
    # deleted), each ending now: a reservation counts on their release, nothing else sees them
    leaving: list[Running] = field(default_factory=list)
    out: Decisions = field(default_factory=Decisions)
    pools: dict[str, Pool] = field(default_factory=dict)
    evicted: set[str] = field(default_factory=set)
    # views are shared by the gangs that see the same thing; `version` moves with `work`
    version: int = 0
    views: dict[tuple[str, frozenset[int], int], View] = field(default_factory=dict)
    free: dict[tuple[str, int], Free] = field(default_factory=dict)  # (pool, version)
    # (pool, priority, tenant, running, evicted) -> digest of the gangs it may preempt
    victims: dict[tuple[str, int, str, int, int], bytes] = field(default_factory=dict)
    # starts made on the whole free capacity (no hosts held from them): joint placement's
    free_starts: list[Start] = field(default_factory=list)
    # pass over gangs known to be blocked (report_waits off, no patience); per pool, the
    # positions that must be looked at whatever is known (pinned, backing off, preempting),
    # and the last known-blocked arrays with the state they were computed for
    quiet: bool = False
    # quiet, and nothing after the walk reads a reservation (no joint placement, moves,
    # lending or teams): a pool's reservation is made only when a gang's look needs it
    lazy: bool = False
    specials: dict[str, list[int]] = field(default_factory=dict)
    masks: dict[str, tuple[tuple[object, ...], Bools, Bools]] = field(default_factory=dict)
    # per pool: the same on the whole free capacity alone, with the (version, memo version,
    # order length) they were read for: kept when the pool's reservation arrives (walk.py)
    free_masks: dict[str, tuple[tuple[int, int, int], Bools, Bools]] = field(default_factory=dict)
    # per pool: whether each gang of the order may preempt no one (views.py), with the state
    # (gangs running, gangs evicted) and the order's shapes it was read for
    preempt_none: dict[str, tuple[tuple[int, int], Array, Bools]] = field(default_factory=dict)
    _lowest_seen: int | None = None  # starts made before `lowest` was first asked
    # teams (queue/teams/queues.py): what each queue uses (None: no quotas), the gangs set aside to
    # borrow after the walk, whether that is under way, the gangs admitted within their quota,
    # and the gangs holding hosts whose quota the ledger counts already
    ledger: Ledger | None = None
    borrowers: list[Entry] = field(default_factory=list)
    borrowing: bool = False
    within_quota: set[str] = field(default_factory=set)
    quota_held: set[str] = field(default_factory=set)
    # per pool: shape -> the fewest pods of a gang of it held by quota this cycle (a quiet walk
    # passes over the rest), changed with `quota_version`; per (queue, pool): gangs set aside
    quota_known: dict[str, dict[int, int]] = field(default_factory=dict)
    quota_version: int = 0
    set_aside: dict[tuple[str, str], int] = field(default_factory=dict)
    quota_masks: dict[str, tuple[tuple[int, int], Bools]] = field(default_factory=dict)
    # per pool, the running gangs beyond their queue's quota; (queue, pool) that reclaimed
    beyond: dict[str, list[Running]] = field(default_factory=dict)
    reclaimed: dict[tuple[str, str], int] = field(default_factory=dict)
    positions: dict[str, int] = field(default_factory=dict)  # queue -> its gangs looked at

    @property
    def running(self) -> list[Running]:
        """The driver's running gangs, then the cycle's starts."""
        if self.given is None:
            self.given = [*self.index, *self.started]
        return self.given

    def counted(self) -> int:
        """How many gangs `running` holds, without listing them."""
        return len(self.index) + len(self.started) if self.given is None else len(self.given)

    def start(self, r: Running) -> None:
        """A gang started this cycle runs from now on."""
        self.started.append(r)
        if self.given is not None:
            self.given.append(r)

    def ending(self, pool: str) -> list[Running]:
        """The pool's gangs a reservation counts on beside the driver's: those leaving, then
        this cycle's starts."""
        return [r for r in (*self.leaving, *self.started) if r.gang.pool == pool]

    def settle(self) -> None:
        """Every pool's reservation made (what follows the walk reads them)."""
        for p in self.pools.values():
            p.make()

    def pool(self, name: str) -> Pool:
        found = self.pools.get(name)
        if found is None:
            found = self.pools[name] = Pool()
        return found

    def lowest(self, pool: str) -> float:
        """The lowest priority running in a pool (inf when none): who can preempt at all.
        Fixed at the first question of the cycle: the starts made after it do not count."""
        if self._lowest_seen is None:
            self._lowest_seen = len(self.started)
        mine = (r.gang.priority for r in self.started[: self._lowest_seen] if r.gang.pool == pool)
        return min(self.index.lowest(pool), *mine, math.inf)

    def below(self, pool: str, priority: int, tenant: str | None) -> tuple[int, int]:
        """RunningGangs.below over what runs now: the driver's gangs and this cycle's starts,
        less the gangs evicted this cycle."""
        xor, n = self.index.below(pool, priority, tenant)
        for r in self.started:
            if _counted(r, pool, priority, tenant):
                xor, n = xor ^ key_hash(r.key), n + 1
        for gone in self.gone():
            if _counted(gone, pool, priority, tenant):
                xor, n = xor ^ key_hash(gone.key), n - 1
        return xor, n

    def gone(self) -> list[Running]:
        """The gangs evicted this cycle, whether they ran before it or started in it."""
        if not self.evicted:  # most cycles: `below` asks on every look at who may be preempted
            return []
        started = {r.key: r for r in self.started}
        found = (started.get(key) or self.index.gangs.get(key) for key in self.evicted)
        return [r for r in found if r is not None]


def _counted(r: Running, pool: str, priority: int, tenant: str | None) -> bool:
    return r.gang.pool == pool and r.gang.priority < priority and tenant in (None, r.tenant)


def unreserve(c: Cycle, key: str) -> None:
    """A gang that got its room this cycle holds no reservation any more."""
    c.out.reservations = {pool: r for pool, r in c.out.reservations.items() if r.key != key}


def first(need: Bools, among: Bools) -> None:
    """Mark the first position of `among` in `need`."""
    hits = np.flatnonzero(among)
    if len(hits):
        need[hits[0]] = True


def ends_before(entry: Entry, now: float, r: Reservation) -> bool:
    return entry.estimate_s is not None and now + entry.estimate_s <= r.at


def fingerprint(view: Snapshot, pool: str, free: bytes) -> bytes:
    """What a gang of this pool can see: its free resources (`free_digest` of the view's) and
    its unavailable hosts."""
    mask = view.fabric.pool_mask.get(pool)
    if mask is None:
        return b""
    digest = hashlib.blake2b(free, digest_size=16)
    digest.update((~view.up_mask() & mask).tobytes())
    return digest.digest()


def free_digest(view: Snapshot, pool: str) -> bytes:
    """A digest of the free resources on the pool's hosts. SHA-256: the one hash of hashlib
    that today's CPUs compute in hardware (SHA extensions), at half BLAKE2's time here; every
    cycle digests each pool's columns at least once (4% of a whole-trace replay)."""
    span = view.fabric.pool_span.get(pool)
    if span is None:
        return b""
    digest = hashlib.sha256()
    extended = [view.free_ext[name] for name in sorted(view.free_ext)]
    for column in (view.free_gpus, view.free_cpu, view.free_mem, view.free_pods, *extended):
        digest.update(np.ascontiguousarray(column[span]).data)
    return digest.digest()
