"""Creating a TrainingJob's pods, unbound, within a budget of creations in flight.

Contract. A TrainingJob's pods are made before it is placed, as a Job controller makes a Job's:
unbound, `schedulerName` the operator's, one per rank. From then on the gang goes the way of
any pod group (podgroup/runner.py): queued once all its pods exist, bound where the queue places it.
A creation is all-or-nothing: a creation that fails deletes exactly the pods it made, once
none of its calls is in flight. The budget (creations in flight at once) is shared by every
creation in progress, smallest remaining work first, so a huge gang advances every cycle
without holding back the small ones behind it. Calls run on the API threads while the cycle
that sent them ends and the next one starts; the caller collects their results
(`Launch.collect`) before it steps again.
Pods that are not bound hold no capacity, so nothing is reserved while they are made."""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from scheduler.controller.runtime.gateway import ApiError
from scheduler.controller.trainingjob.pods import pod_name
from scheduler.controller.trainingjob.translate import JobView

Obj = dict[str, Any]


@dataclass
class Launch:
    view: JobView
    ranks: tuple[int, ...]  # the ranks to make: all of a new gang, the missing ones of a repair
    created: set[int] = field(default_factory=set)
    inflight: dict[int, Future[ApiError | None]] = field(default_factory=dict)  # rank -> call
    error: tuple[str, ApiError] | None = None  # (pod, what the API server said)

    @property
    def size(self) -> int:
        return len(self.ranks)

    @property
    def work_left(self) -> int:
        return self.size - len(self.created)

    @property
    def to_send(self) -> list[int]:
        """Ranks neither made nor being made; none once a creation failed."""
        if self.error is not None:
            return []
        return [r for r in self.ranks if r not in self.created and r not in self.inflight]

    def collect(self) -> None:
        """Take in the calls that have finished: made, or the first failure."""
        for rank, call in list(self.inflight.items()):
            if call.done():
                del self.inflight[rank]
                error = call.result()
                if error is None:
                    self.created.add(rank)
                elif self.error is None:
                    self.error = (self.pod_name(rank), error)

    def pod_name(self, rank: int) -> str:
        return pod_name(self.view, rank)

    @property
    def finished(self) -> bool:
        return self.error is None and len(self.created) == self.size


Call = Callable[..., None]
Submit = Callable[[Callable[[], ApiError | None]], Future[ApiError | None]]


@dataclass
class Launcher:
    create: Call  # (namespace, body)
    build: Callable[[Launch, int], Obj]  # the pod body for (launch, rank)
    submit: Submit  # runs a call on the API thread pool
    budget: int

    def step(self, launches: list[Launch]) -> None:
        """Send more creations while fewer than the budget are in flight, smallest remaining
        work first (the caller collects what finished first: `Launch.collect`)."""
        left = self.budget - sum(len(launch.inflight) for launch in launches)
        for launch in sorted(launches, key=lambda launch: launch.work_left):
            for rank in launch.to_send[: max(left, 0)]:
                left -= 1
                launch.inflight[rank] = self.submit(functools.partial(self._create, launch, rank))

    def _create(self, launch: Launch, rank: int) -> ApiError | None:
        try:
            self.create(launch.view.namespace, self.build(launch, rank))
        except ApiError as exc:
            return exc
        return None
