"""Preemption as the queue drives it, and the start of a gang pinned to hosts it was given.

Contract. `preempt` takes a gang that cannot start and the running gangs: only strictly lower
priorities of its pool, of its tenant unless `cross_tenant`, and none already evicted this
cycle; the chooser (queue/preemption.py) picks the victims and the placement; the victims are
evicted in the cycle's work snapshot and the gang is nominated, pinned to its new hosts
(holds.py), which are held against every gang of every tenant until it starts there.
`pinned_start` starts such a gang (or one a move made room for) once the gangs it waits for
have left the running list and its hosts are free; it waits meanwhile, preempting nothing more,
and its pin lapses `PIN_PATIENCE_S` after the hosts were first found not free. `settle` forgets
the victims that have left. Promises: a gang preempts only once per hold; a pinned gang starts
on exactly the placement it was given."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scheduler.model.placement import Placement
from scheduler.model.policy import Preemption
from scheduler.placement import InvalidPlacementError, Snapshot, validate
from scheduler.queue import preemption
from scheduler.queue.cycle import Cycle
from scheduler.queue.holds import Holds
from scheduler.queue.types import (
    Entry,
    Eviction,
    QueueConfig,
    Running,
    Wait,
    WaitReason,
)
from scheduler.queue.views import Views

CHOOSERS = {
    Preemption.TOPOLOGY: preemption.topology,
    Preemption.LOWEST_FIRST: preemption.lowest_first,
}


@dataclass
class Preempting:
    config: QueueConfig
    entries: dict[str, Entry]
    pins: Holds
    views: Views
    wait: Callable[[Cycle, Entry, Wait], None]
    start: Callable[[Cycle, Entry, Placement], None]

    def settle(self, c: Cycle) -> None:
        """Forget the victims that have left; their preemptor keeps its hosts (it is pinned
        to them) until it starts or `PIN_PATIENCE_S` has passed."""
        if self.pins.leaving:
            self.pins.settle({r.key for r in c.running}, self.entries)

    def pinned_start(self, c: Cycle, entry: Entry) -> bool:
        """A gang given hosts by a preemption or a move starts there once they are free; until
        then (the victims' or moved gangs' pods still going, `PIN_PATIENCE_S` at most once they
        have left) it waits, and preempts nothing more."""
        n = self.pins.waiting_for(entry.key)
        if n:
            wait = Wait(WaitReason.PREEMPTING, f"waiting for {n} gangs to leave its hosts")
            self.wait(c, entry, wait)
            return True
        pinned = self.pins.pins[entry.key]
        view = self.views.view(c, entry).snapshot
        try:
            validate(view, entry.gang, pinned)
        except InvalidPlacementError:
            if not self.pins.lapsed(entry.key, c.now):
                c.out.wake(self.pins.lapses_at(entry.key))
                self.wait(c, entry, Wait(WaitReason.PREEMPTING, "waiting for its hosts"))
                return True
            self.pins.release(entry.key)
            return False
        self.pins.release(entry.key)
        self.start(c, entry, pinned)
        return True

    def preempt(self, c: Cycle, entry: Entry, view: Snapshot) -> bool:
        if self.config.policy.preemption is Preemption.OFF:
            return False
        if entry.gang.priority <= c.lowest(entry.gang.pool):
            return False
        candidates = [r for r in c.running if self._may_preempt(c, entry, r)]
        if not candidates:
            return False
        found = CHOOSERS[self.config.policy.preemption](
            view, entry.gang, candidates, c.now, self.config
        )
        if found is None:
            return False
        self._nominate(c, entry, found)
        return True

    def _may_preempt(self, c: Cycle, entry: Entry, r: Running) -> bool:
        return (
            r.key not in c.evicted
            and r.gang.pool == entry.gang.pool
            and r.gang.priority < entry.gang.priority
            and (self.config.policy.cross_tenant or r.tenant == entry.tenant)
        )

    def _nominate(self, c: Cycle, entry: Entry, found: preemption.Victims) -> None:
        for r in found.running:
            c.out.evictions.append(Eviction(r.key, entry.key, r.lost_gpu_s(c.now)))
            c.evicted.add(r.key)
            c.work.release(r.gang, r.placement)
        c.work.apply(entry.gang, found.placement)
        c.version += 1
        c.out.nominated[entry.key] = found.placement
        index = c.work.fabric.host_index
        # held, and pinned, until it starts: a driver's victims leave its list of running gangs
        # before their pods are gone (the operator's cache lags its deletes), and hosts released
        # then would go to whoever comes first, and the preemptor would preempt again
        hosts = frozenset(index[h] for h in found.placement.hosts())
        self.pins.hold(entry.key, found.placement, hosts, frozenset(r.key for r in found.running))
        victims = ", ".join(r.gang.name for r in found.running)
        self.wait(c, entry, Wait(WaitReason.PREEMPTING, f"preempting {victims}"))
