"""The running gangs, indexed for the questions a queue cycle asks of them.

Contract. Takes the running gangs one change at a time (`add`, `discard`: the simulator's
starts and ends) or a driver's whole list each cycle (`sync`: only the difference is applied).
Answers, per pool, without looking at every running gang: the lowest running priority; a
digest of the gangs that a gang of some priority and tenant may preempt; and EASY backfill's
release order (estimated end, unknown ends last, then start, then key), read in place, and
the same gangs pod by pod as flat arrays (queue/released.py). Why: a cycle that walked every
running gang for these made a whole-trace replay quadratic (issue "Replays at the speed of the
question"). Promises: every answer is the one a computation from scratch over the same gangs
gives (the digest: equal exactly when the sets of gangs are equal, but for a 128-bit hash
collision); tests/unit/queue/test_running.py checks each against it over seeded sequences of
changes."""

from __future__ import annotations

import bisect
import hashlib
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from scheduler.placement.snapshot import Usage, usage_of
from scheduler.queue.released import Flat
from scheduler.queue.teams.quotas import demand
from scheduler.queue.types import Running
from scheduler.topology.fabric import Fabric

Release = tuple[float, float, str]  # estimated end (inf: unknown), start, key
Bucket = tuple[str, int, str]  # pool, priority, tenant
Owner = tuple[str, str, str, str]  # pool, tenant, queue named, queue that admitted it


def release_key(r: Running) -> Release:
    return (math.inf if r.end_s is None else r.end_s, r.started_s, r.key)


def key_hash(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=16).digest(), "big")


class RunningGangs:
    def __init__(self, running: Iterable[Running] = ()) -> None:
        self.gangs: dict[str, Running] = {}
        self._releases: dict[str, list[Release]] = {}  # pool -> its gangs in release order
        self._priorities: dict[str, dict[int, int]] = {}  # pool -> priority -> gangs
        self._sets: dict[Bucket, list[int]] = {}  # -> [xor of key hashes, gangs]
        self._usages: dict[str, tuple[Running, Fabric, Usage]] = {}  # read once per gang
        # pool -> its gangs' pods in release order (queue/released.py), on `_fabric`, made
        # when first asked for and then kept up to date with every change
        self._flats: dict[str, Flat] = {}
        self._fabric: Fabric | None = None
        # what each owner uses (GPUs, millicores, MiB: queue/teams/quotas.py), for quotas
        self._demands: dict[Owner, list[int]] = {}
        self.version = 0  # moves with every change
        self.pool_versions: dict[str, int] = {}  # pool -> moves with every change in it
        # each owner's gangs in start order (quotas: the latest started borrow first)
        self._starts: dict[Owner, list[tuple[float, str]]] = {}
        for r in running:
            self.add(r)

    def __len__(self) -> int:
        return len(self.gangs)

    def __iter__(self) -> Iterator[Running]:
        return iter(self.gangs.values())

    def add(self, r: Running) -> None:
        """A gang starts (or changes: the old entry is replaced)."""
        self.discard(r.key)
        self.version += 1
        self.gangs[r.key] = r
        pool, priority = r.gang.pool, r.gang.priority
        self.pool_versions[pool] = self.pool_versions.get(pool, 0) + 1
        releases, key = self._releases.setdefault(pool, []), release_key(r)
        at = bisect.bisect_left(releases, key)
        releases.insert(at, key)
        counts = self._priorities.setdefault(pool, {})
        counts[priority] = counts.get(priority, 0) + 1
        self._toggle((pool, priority, r.tenant), r.key, 1)
        self._count((pool, r.tenant, r.queue, r.admitted), r, 1)
        flat = self._kept(pool, r)  # last: the counts are whole whatever happens to it
        if flat is not None and self._fabric is not None:
            flat.insert(at, self.usage(r, self._fabric), r.gang.all_gpus)

    def discard(self, key: str) -> None:
        """A gang ends (no-op when not running)."""
        r = self.gangs.pop(key, None)
        if r is None:
            return
        self.version += 1
        pool, priority = r.gang.pool, r.gang.priority
        self.pool_versions[pool] += 1
        releases = self._releases[pool]
        at = bisect.bisect_left(releases, release_key(r))
        del releases[at]
        counts = self._priorities[pool]
        counts[priority] -= 1
        if not counts[priority]:
            del counts[priority]
        self._toggle((pool, priority, r.tenant), key, -1)
        self._count((pool, r.tenant, r.queue, r.admitted), r, -1)
        flat = self._kept(pool, r)
        if flat is not None and self._fabric is not None:
            flat.remove(at, self.usage(r, self._fabric))
        self._usages.pop(key, None)

    def _kept(self, pool: str, r: Running) -> Flat | None:
        """The pool's release arrays, when they are kept and the gang's hosts are on their
        fabric. A gang on hosts that fabric lacks (the operator's nodes changed since they
        were made) drops them all: they are made again, on the fabric asked for, when next
        asked for."""
        flat = self._flats.get(pool)
        if flat is None or self._fabric is None:
            return None
        index = self._fabric.host_index
        if all(p.host in index for p in r.placement.pods):
            return flat
        self._flats.clear()
        return None

    def _count(self, owner: Owner, r: Running, sign: int) -> None:
        starts = self._starts.setdefault(owner, [])
        if sign > 0:
            bisect.insort(starts, (r.started_s, r.key))
        else:
            del starts[bisect.bisect_left(starts, (r.started_s, r.key))]
            if not starts:
                del self._starts[owner]
        found = self._demands.setdefault(owner, [0, 0, 0])
        for i, v in enumerate(demand(r.gang)):
            found[i] += sign * v
        if not any(found):
            del self._demands[owner]

    def latest(self, owner: Owner) -> Iterator[tuple[float, str]]:
        """The owner's gangs, the latest started first: (start, key)."""
        return reversed(self._starts.get(owner, []))

    def demands(self) -> dict[Owner, list[int]]:
        """What the running gangs of each (pool, tenant, queue named, queue admitted) use: GPUs,
        millicores, MiB."""
        return self._demands

    def _toggle(self, bucket: Bucket, key: str, step: int) -> None:
        found = self._sets.setdefault(bucket, [0, 0])
        found[0] ^= key_hash(key)
        found[1] += step
        if not found[1]:
            del self._sets[bucket]

    def sync(self, running: Iterable[Running]) -> None:
        """Become the driver's list: gangs gone are dropped, new or changed ones added."""
        now = {r.key: r for r in running}
        for key in self.gangs.keys() - now.keys():
            self.discard(key)
        for key, r in now.items():
            old = self.gangs.get(key)
            if old is not r and old != r:
                self.add(r)

    def lowest(self, pool: str) -> float:
        """The lowest priority running in the pool (inf when none)."""
        counts = self._priorities.get(pool)
        return min(counts) if counts else math.inf

    def below(self, pool: str, priority: int, tenant: str | None) -> tuple[int, int]:
        """The xor of the key hashes, and the number, of the pool's gangs of lower priority
        (of this tenant; None: of any)."""
        xor, n = 0, 0
        for (p, prio, t), (h, count) in self._sets.items():
            if p == pool and prio < priority and (tenant is None or t == tenant):
                xor, n = xor ^ h, n + count
        return xor, n

    def releases(self, pool: str, extra: Sequence[Running] = ()) -> ReleaseOrder:
        """The pool's gangs and `extra` (gangs started this cycle) in release order."""
        return ReleaseOrder(self, pool, self._releases.get(pool, []), extra)

    def flat(self, pool: str, fabric: Fabric) -> Flat:
        """The pool's gangs, pod by pod, in release order, on this fabric."""
        if fabric is not self._fabric:
            self._flats.clear()
            self._fabric = fabric
        if pool not in self._flats:
            gangs = [self.gangs[key] for _, _, key in self._releases.get(pool, [])]
            self._flats[pool] = Flat.of([(self.usage(r, fabric), r.gang.all_gpus) for r in gangs])
        return self._flats[pool]

    def usage(self, r: Running, fabric: Fabric) -> Usage:
        """What the gang takes on this fabric (Snapshot.apply_usages), read once."""
        found = self._usages.get(r.key)
        if found is None or found[0] is not r or found[1] is not fabric:
            found = self._usages[r.key] = (r, fabric, usage_of(fabric, r.gang, r.placement))
        return found[2]


class ReleaseOrder(Sequence[Running]):
    """Gangs in release order: the index's, with a few more (this cycle's starts) standing among
    them at positions found once; read in place, nothing copied."""

    def __init__(
        self, index: RunningGangs, pool: str, keys: list[Release], extra: Sequence[Running]
    ) -> None:
        self._index = index
        self._pool = pool
        self._keys = keys
        self._extra = sorted(extra, key=release_key)
        # where each extra gang stands in the merged order (each after those before it)
        self._at = [bisect.bisect_left(keys, release_key(r)) + j for j, r in enumerate(self._extra)]
        self._flat: Flat | None = None

    def __len__(self) -> int:
        return len(self._keys) + len(self._extra)

    @overload
    def __getitem__(self, at: int) -> Running: ...

    @overload
    def __getitem__(self, at: slice) -> Sequence[Running]: ...

    def __getitem__(self, at: int | slice) -> Running | Sequence[Running]:
        if isinstance(at, slice):
            return [self[i] for i in range(*at.indices(len(self)))]
        if at < 0:
            at += len(self)
        if not 0 <= at < len(self):
            raise IndexError(at)
        j = bisect.bisect_left(self._at, at)  # extra gangs before this position
        if j < len(self._at) and self._at[j] == at:
            return self._extra[j]
        return self._index.gangs[self._keys[at - j][2]]

    def usage(self, at: int, fabric: Fabric) -> Usage:
        """What the gang at this position takes (read once for the index's own gangs)."""
        r = self[at]
        if self._index.gangs.get(r.key) is r:
            return self._index.usage(r, fabric)
        return usage_of(fabric, r.gang, r.placement)

    def flat(self, fabric: Fabric) -> Flat:
        """Every gang of the order, pod by pod (queue/released.py)."""
        if self._flat is None:
            flat = self._index.flat(self._pool, fabric)
            if self._extra:
                flat = flat.copy()
                for at, r in zip(self._at, self._extra, strict=True):
                    flat.insert(at, usage_of(fabric, r.gang, r.placement), r.gang.all_gpus)
            self._flat = flat
        return self._flat
