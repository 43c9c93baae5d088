"""Priority within a team: each team queue's gangs take the places in line their arrivals
earned, in their own priority order.

Contract. Active while teams are on. Takes the queued gangs as they come and go, each with its
team queue (None: no queue takes it). Decides each gang's queue order (`Entry.order`): within
one team queue and pool, the gangs sorted by priority (then arrival, name, key) take, in that
order, the places of that group's arrivals sorted by time; a place carries no priority. So a
gang's priority reorders its own team's gangs and nothing else: across teams the line is by
arrival (and borrowing by fair share, queue/teams/queues.py), as Kueue orders within a ClusterQueue
and KAI within a queue, and a tenant who raises its priority takes no earlier place, nor the
EASY reservation that goes with it, from another team. Promises: the orders of the queued gangs
are a permutation of their (arrival, name, key) places with priority 0; with teams off every
gang has its own (priority, arrival, name, key); a group whose gangs share one priority is
never re-ranked (each keeps its own place), so a workload of one priority per team is ordered
exactly as by arrival, with no work per change."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.queue.order import PoolOrder
from scheduler.queue.types import Entry

Group = tuple[str | None, str]  # team queue, pool
Order = tuple[int, float, str, str]


def natural(entry: Entry) -> Order:
    return (-entry.gang.priority, entry.arrival, entry.gang.name, entry.key)


def place(entry: Entry) -> Order:
    """Its own place in line, with no priority."""
    return (0, entry.arrival, entry.gang.name, entry.key)


@dataclass
class Ranks:
    entries: dict[str, Entry]
    orders: dict[str, PoolOrder]
    team_of: Callable[[Entry], str | None]
    on: bool = False
    groups: dict[Group, set[str]] = field(default_factory=dict)
    of: dict[str, Group] = field(default_factory=dict)  # key -> its group while queued
    priorities: dict[Group, dict[int, int]] = field(default_factory=dict)  # -> gangs each
    dealt: set[Group] = field(default_factory=set)  # groups whose places are dealt by rank

    def added(self, entry: Entry) -> None:
        """Before it joins its pool's order: its order set, its group re-ranked if mixed."""
        if not self.on:
            return
        entry.order = place(entry)
        self._join(entry)
        self._rerank(self.of[entry.key], skip=entry.key)

    def dropped(self, entry: Entry) -> None:
        """After it left its pool's order."""
        group = self.of.pop(entry.key, None)
        if group is None:
            return
        self.groups[group].discard(entry.key)
        counts = self.priorities[group]
        counts[entry.gang.priority] -= 1
        if not counts[entry.gang.priority]:
            del counts[entry.gang.priority]
        if not self.groups[group]:
            del self.groups[group], self.priorities[group]
            self.dealt.discard(group)
            return
        self._rerank(group)

    def reset(self, on: bool) -> None:
        """Teams came, went or changed: every gang's group and order made again."""
        self.on, self.groups, self.of, self.priorities, self.dealt = on, {}, {}, {}, set()
        for entry in self.entries.values():
            entry.order = place(entry) if on else natural(entry)
            if on:
                self._join(entry)
        for group, counts in self.priorities.items():
            if len(counts) > 1:
                self.dealt.add(group)
                for entry, spot in self._by_rank(group):
                    entry.order = spot
        for pool in list(self.orders):  # made again whole: the old orders no longer find gangs
            self.orders[pool] = PoolOrder()
        for entry in self.entries.values():
            self.orders.setdefault(entry.gang.pool, PoolOrder()).add(entry)

    def _join(self, entry: Entry) -> None:
        group = (self.team_of(entry), entry.gang.pool)
        self.groups.setdefault(group, set()).add(entry.key)
        self.of[entry.key] = group
        counts = self.priorities.setdefault(group, {})
        counts[entry.gang.priority] = counts.get(entry.gang.priority, 0) + 1

    def _rerank(self, group: Group, skip: str | None = None) -> None:
        """The group's places dealt again in priority order when its priorities differ; when
        they do not, each gang keeps its own place (put back if they were dealt). `skip`: a
        gang not in its pool's order yet."""
        mixed = len(self.priorities.get(group, {})) > 1
        if not mixed and group not in self.dealt:
            return
        if not mixed:
            self.dealt.discard(group)
            members = [self.entries[k] for k in self.groups.get(group, ())]
            self._deal([(e, place(e)) for e in members], skip)
            return
        self.dealt.add(group)
        self._deal(self._by_rank(group), skip)

    def _by_rank(self, group: Group) -> list[tuple[Entry, Order]]:
        """The group's gangs in priority order, each with the place it takes."""
        members = sorted((self.entries[k] for k in self.groups[group]), key=natural)
        return list(zip(members, sorted(place(e) for e in members), strict=True))

    def _deal(self, dealt: list[tuple[Entry, Order]], skip: str | None) -> None:
        """Each gang its new order: all that change leave their pool's order first, then join
        it again (a new order may equal one not yet dealt, and the pool finds gangs by it)."""
        moved = [(e, o) for e, o in dealt if e.order != o]
        for entry, _ in moved:
            if entry.key != skip:
                self.orders[entry.gang.pool].remove(entry)
        for entry, order in moved:
            entry.order = order
            if entry.key != skip:
                self.orders[entry.gang.pool].add(entry)
