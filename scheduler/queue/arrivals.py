"""How fast gangs and their work arrive in each pool: how far a delay reaches.

Contract. Takes the gangs queued since the last cycle, at the cycle's clock (`seen`: each
gang's pool, key, and the GPU-seconds it asks for, its GPUs x expected run time, none when
unknown), and answers, per pool, over the arrivals of the last WINDOW_S seconds (or since the
first arrival, when that is more recent): the arrival rate (`rate`, gangs per second) and the
offered load (`load`, their work over that time and the pool's GPUs; 1.0: they asked for all
of it), and how many of them asked for each number of GPUs (`sizes`, with the window's time).
A day, because arrivals follow the day and job sizes are heavy-tailed: a window of a few hours
holds one long job or none, and its load swings past 1 with it. All fall when arrivals stop.
Stamped by the cycle, not by the gang's own arrival: that orders the queue and is not a time
for every driver (the simulator numbers jobs in submission order).
Promises: a gang is counted once while its arrival is in the window (one queued again after an
eviction or an edit is not a new arrival); the figures read only what was seen and the clock
given, so a replay answers the same. Not kept across a restart: the gangs queued then count as
arriving then, and the rate reads high for a day (a split's price errs toward waiting).
queue/split.py prices a split by the gangs a delay reaches: those waiting now and those these
figures bring while the pool stays busy; placement/fragments.py prices breaking a whole domain
by the gangs that will ask for whole ones (`sizes`).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from scheduler.queue.types import Entry

WINDOW_S = 86400.0


@dataclass
class _Pool:
    first: float  # the first arrival ever seen
    # (time, work, key, GPUs)
    kept: deque[tuple[float, float, str, int]] = field(default_factory=deque)
    work: float = 0.0  # of those kept
    sizes: Counter[int] = field(default_factory=Counter)  # GPUs -> gangs kept asking that many


class Arrivals:
    def __init__(self) -> None:
        self._pools: dict[str, _Pool] = {}
        self._keys: set[str] = set()  # of the arrivals kept

    def seen(self, now: float, queued: Iterable[Entry]) -> None:
        for e in queued:
            self.record(e.gang.pool, e.key, now, e.work_gpu_s, e.gang.all_gpus)

    def record(
        self, pool: str, key: str, at: float, work_gpu_s: float = 0.0, gpus: int = 0
    ) -> None:
        if key in self._keys:
            return
        p = self._pools.setdefault(pool, _Pool(at))
        p.kept.append((at, work_gpu_s, key, gpus))
        p.work += work_gpu_s
        p.sizes[gpus] += 1
        self._keys.add(key)
        self._let_go(p, at)

    def rate(self, pool: str, now: float) -> float:
        """Gangs per second over the window."""
        p, span = self._window(pool, now)
        return len(p.kept) / span if p and span else 0.0

    def load(self, pool: str, now: float, gpus: int) -> float:
        """The window's work over its time and the pool's GPUs."""
        p, span = self._window(pool, now)
        return p.work / span / gpus if p and span and gpus else 0.0

    def sizes(self, pool: str, now: float) -> tuple[tuple[tuple[int, int], ...], float]:
        """(GPUs, gangs) of the window's arrivals, and the window's time."""
        p, span = self._window(pool, now)
        return (tuple(p.sizes.items()), span) if p else ((), 0.0)

    def _window(self, pool: str, now: float) -> tuple[_Pool | None, float]:
        """The pool's arrivals with those older than the window let go, and the window's time."""
        p = self._pools.get(pool)
        if p is None:
            return None, 0.0
        self._let_go(p, now)
        return p, max(min(WINDOW_S, now - p.first), 0.0)

    def _let_go(self, p: _Pool, now: float) -> None:
        """Forget the arrivals older than the window (kept, they would only cost memory)."""
        while p.kept and p.kept[0][0] <= now - WINDOW_S:
            _, work, key, gpus = p.kept.popleft()
            p.work = max(p.work - work, 0.0)
            p.sizes[gpus] -= 1
            if not p.sizes[gpus]:
                del p.sizes[gpus]
            self._keys.discard(key)
