"""A pool's running gangs in release order, pod by pod, as flat arrays: what EASY backfill's
reservation reads to find how many releases it takes before a gang could fit.

Contract. Takes gangs with what they take on one fabric (Snapshot's Usage), inserted and
removed one at a time at their place in release order (queue/running.py keeps that order).
Gives, for the gangs in order: each pod's host and (GPU, CPU, memory) row; each gang's
GPUs and the pods before its end. Promises: the arrays are exactly the concatenation of the
gangs' usages in release order (tests/unit/queue/test_running.py); inserting or removing a gang
costs a copy of the arrays (C speed), never a pass in Python over the other gangs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduler.placement.snapshot import Array, Usage
from scheduler.queue.arrays import cut, inserted


def _empty(*shape: int) -> Array:
    return np.zeros(shape or (0,), dtype=np.int64)


@dataclass
class Flat:
    hosts: Array = field(default_factory=_empty)  # per pod
    amounts: Array = field(default_factory=lambda: _empty(0, 3))  # per pod
    pods: Array = field(default_factory=_empty)  # per gang
    totals: Array = field(default_factory=_empty)  # per gang: its GPUs, every role's
    extended: int = 0  # gangs that take extended resources (read per gang, not from here)

    @classmethod
    def of(cls, usages: Sequence[tuple[Usage, int]]) -> Flat:
        """(usage, GPUs of the gang) per gang, in release order."""
        flat = cls()
        if usages:
            flat.hosts = np.concatenate([_empty(), *(u.at for u, _ in usages)])
            flat.amounts = np.concatenate([_empty(0, 3), *(u.amounts for u, _ in usages)])
            flat.pods = np.asarray([len(u.at) for u, _ in usages], dtype=np.int64)
            flat.totals = np.asarray([total for _, total in usages], dtype=np.int64)
            flat.extended = sum(1 for u, _ in usages if u.extended)
        return flat

    @property
    def gpus(self) -> Array:
        """GPUs per pod."""
        return self.amounts[:, 0]

    def ends(self) -> Array:
        """Pods released by the end of each gang."""
        return np.cumsum(self.pods)

    def insert(self, at: int, usage: Usage, total: int) -> None:
        """A gang at position `at` of the release order."""
        pod = int(self.pods[:at].sum())
        self.hosts = inserted(self.hosts, pod, usage.at)
        self.amounts = inserted(self.amounts, pod, usage.amounts)
        self.pods = inserted(self.pods, at, len(usage.at))
        self.totals = inserted(self.totals, at, total)
        self.extended += bool(usage.extended)

    def remove(self, at: int, usage: Usage) -> None:
        """The gang at position `at` of the release order (its usage, as inserted)."""
        pod = int(self.pods[:at].sum())
        end = pod + int(self.pods[at])
        self.hosts = cut(self.hosts, pod, end)
        self.amounts = cut(self.amounts, pod, end)
        self.pods = cut(self.pods, at, at + 1)
        self.totals = cut(self.totals, at, at + 1)
        self.extended -= bool(usage.extended)

    def copy(self) -> Flat:
        return Flat(
            self.hosts, self.amounts, self.pods, self.totals, self.extended
        )  # arrays are replaced, never written in place: sharing them is safe
