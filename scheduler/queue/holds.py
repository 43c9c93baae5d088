"""Hosts held for the gangs that will start on them: a preemptor on the hosts its victims
free, a gang a move made room for, a moved gang on its new hosts.

Contract. `hold` pins a gang to a placement and holds its hosts until it starts there: the
gangs it waits for (`leaving`: victims, moved gangs) go first, then the hosts must be free.
`settle` forgets the waited-for gangs that have left the driver's running list (a driver's
victims leave it before their pods are gone: the hold stays), and every hold of a gang no
longer queued or running. Promises: held hosts are off limits to every other gang
(`others`); a pin lapses (`lapsed`) `PIN_PATIENCE_S` after the first cycle its hosts were found
not free once its gangs had left; `release` ends a hold (the gang started, lapsed or left)."""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass, field

from scheduler.model.placement import Placement
from scheduler.placement.snapshot import Bools

PIN_PATIENCE_S = 60.0  # how long hosts a preemption or a move freed wait for the pods to go


@dataclass
class Holds:
    pins: dict[str, Placement] = field(default_factory=dict)  # gang -> where it will start
    hosts: dict[str, frozenset[int]] = field(default_factory=dict)  # gang -> its held hosts
    leaving: dict[str, frozenset[str]] = field(default_factory=dict)  # gang -> gangs it waits for
    since: dict[str, float] = field(default_factory=dict)  # first cycle its hosts were not free

    def hold(
        self,
        key: str,
        placement: Placement,
        hosts: frozenset[int],
        leaving: frozenset[str] = frozenset(),
    ) -> None:
        self.pins[key] = placement
        self.hosts[key] = hosts
        if leaving:
            self.leaving[key] = leaving

    def settle(self, alive: set[str], queued: Container[str]) -> None:
        """Forget the waited-for gangs that left; a gang no longer queued waits for none."""
        for key, victims in list(self.leaving.items()):
            left = victims & alive
            if left and key in queued:
                self.leaving[key] = left
            else:
                self.leaving.pop(key)

    def waiting_for(self, key: str) -> int:
        """How many gangs this one still waits for."""
        return len(self.leaving.get(key, ()))

    def lapsed(self, key: str, now: float) -> bool:
        """Its hosts are not free this cycle: has its patience run out (counted from the first
        such cycle)?"""
        return now - self.since.setdefault(key, now) >= PIN_PATIENCE_S

    def lapses_at(self, key: str) -> float:
        return self.since[key] + PIN_PATIENCE_S

    def release(self, key: str) -> None:
        self.pins.pop(key, None)
        self.since.pop(key, None)
        self.hosts.pop(key, None)

    def drop(self, key: str) -> None:
        """Everything kept for the gang (it left the queue)."""
        self.release(key)
        self.leaving.pop(key, None)

    def refit(self, index: Mapping[str, int]) -> None:
        """The cluster's hosts changed (the operator's nodes, relabelled or replaced): each
        hold keeps its hosts by name, renumbered; a hold on a host that is gone ends (its gang
        is placed again)."""
        for key, placement in list(self.pins.items()):
            names = placement.hosts()
            if all(n in index for n in names):
                self.hosts[key] = frozenset(index[n] for n in names)
            else:
                self.release(key)

    def keys(self) -> set[str]:
        return {*self.pins, *self.hosts, *self.leaving}

    def others(self, key: str) -> dict[str, frozenset[int]]:
        """The hosts held for every gang but this one."""
        return {k: h for k, h in self.hosts.items() if k != key}

    def any_in(self, mask: Bools) -> bool:
        """Is a held host among those `mask` marks (a pool's)?"""
        return any(mask[h] for held in self.hosts.values() for h in held)

    def stopping(self) -> set[str]:
        """Running gangs on their way out or in: waited for, or pinned."""
        return set().union(*self.leaving.values(), self.pins)
