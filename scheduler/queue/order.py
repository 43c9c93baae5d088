"""The queue's order, pool by pool, kept sorted as gangs come and go, with what a cycle needs
to pass over gangs it knows cannot start.

Contract. Takes the entries of one pool, added and removed one at a time. Keeps them in queue
order (`Entry.order`: priority, arrival, name, key) and, in that order, as arrays: pods, shape
(an id the queue gives each shape and priority) and estimated run time (nan: none), and how many
gangs ask for each number of GPUs (`sizes`: what waits, for the price of a whole domain). Promises:
`keys[i]` is the i-th entry in queue order; `index` finds an entry in O(log n); `known_blocked`
marks an entry only when a gang of its shape and priority with no more pods was found
unplaceable on the view it sees (`Known`, kept per view by the queue)."""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass

import numpy as np

from scheduler.placement.snapshot import Bools
from scheduler.queue.arrays import cut, inserted
from scheduler.queue.types import Entry, WaitReason

NEVER = np.iinfo(np.int64).max  # a threshold no gang reaches


@dataclass(frozen=True)
class Known:
    """The fewest pods of one shape and priority found unplaceable on one view, and why."""

    pods: int
    reason: WaitReason
    message: str
    key: str  # the gang that was tried
    # who it could have preempted then (queue._victims): with others, it may preempt now
    victims: bytes = b""


class PoolOrder:
    def __init__(self) -> None:
        self.orders: list[tuple[int, float, str, str]] = []
        self.keys: list[str] = []
        self.pods = np.zeros(0, dtype=np.int64)
        self.shapes = np.zeros(0, dtype=np.int64)
        self.estimates = np.zeros(0, dtype=np.float64)
        self.sizes: Counter[int] = Counter()  # GPUs -> gangs of the pool asking for that many

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, entry: Entry) -> None:
        i = bisect.bisect_left(self.orders, entry.order)
        self.orders.insert(i, entry.order)
        self.keys.insert(i, entry.key)
        estimate = np.nan if entry.estimate_s is None else entry.estimate_s
        self.pods = inserted(self.pods, i, entry.gang.pods)
        self.shapes = inserted(self.shapes, i, entry.shape)
        self.estimates = inserted(self.estimates, i, estimate)
        self.sizes[entry.gang.all_gpus] += 1

    def remove(self, entry: Entry) -> None:
        i = self.index(entry)
        if i is None:
            return
        del self.orders[i], self.keys[i]
        self.pods = cut(self.pods, i, i + 1)
        self.shapes = cut(self.shapes, i, i + 1)
        self.estimates = cut(self.estimates, i, i + 1)
        self.sizes[entry.gang.all_gpus] -= 1
        if not self.sizes[entry.gang.all_gpus]:
            del self.sizes[entry.gang.all_gpus]

    def reshape(self, entries: dict[str, Entry]) -> None:
        """Each entry's shape id read again (the queue gave every gang a new one)."""
        self.shapes = np.array([entries[k].shape for k in self.keys], dtype=np.int64)

    def index(self, entry: Entry) -> int | None:
        i = bisect.bisect_left(self.orders, entry.order)
        return i if i < len(self.keys) and self.keys[i] == entry.key else None

    def reaching(self, fewest: dict[int, int], shapes: int) -> Bools:
        """Per entry: whether its shape has a threshold in `fewest` and it has at least that
        many pods (`shapes`: how many shape ids there are)."""
        at = np.full(shapes, NEVER, dtype=np.int64)
        for shape, pods in fewest.items():
            at[shape] = pods
        return self.pods >= at[self.shapes]

    def known_blocked(
        self, known: dict[int, Known], shapes: int, among: Bools | None = None
    ) -> tuple[Bools, Bools]:
        """Per entry (those marked in `among`, default all): blocked by what is `known` of its
        shape on one view, and whether that is for want of room (Unplaceable)."""
        unplaceable = np.zeros(shapes, dtype=np.bool_)
        for shape, k in known.items():
            unplaceable[shape] = k.reason is WaitReason.UNPLACEABLE
        blocked = self.reaching({shape: k.pods for shape, k in known.items()}, shapes)
        why = unplaceable[self.shapes]
        if among is not None:
            blocked &= among
            why &= among
        return blocked, why
