"""Creating a TrainingJob's pods, unbound, within a budget of API writes per cycle.

Contract. A TrainingJob's pods are made before it is placed, as a Job controller makes a Job's:
unbound, `schedulerName` the operator's, one per rank. From then on the gang goes the way of
any pod group (grouprun.py): queued once all its pods exist, bound where the queue places it.
A creation is all-or-nothing: a creation that fails deletes exactly the pods it made. The
budget is shared by every creation in progress, smallest remaining work first, so a huge gang
advances every cycle without holding back the small ones behind it. Pods that are not bound
hold no capacity, so nothing is reserved while they are made."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scheduler.controller.gateway import ApiError
from scheduler.controller.jobs import JobView
from scheduler.controller.pods import pod_name

Obj = dict[str, Any]


@dataclass
class Launch:
    view: JobView
    ranks: tuple[int, ...]  # the ranks to make: all of a new gang, the missing ones of a repair
    created: set[int] = field(default_factory=set)
    error: tuple[str, ApiError] | None = None  # (pod, what the API server said)

    @property
    def size(self) -> int:
        return len(self.ranks)

    @property
    def work_left(self) -> int:
        return self.size - len(self.created)

    def pod_name(self, rank: int) -> str:
        return pod_name(self.view, rank)

    @property
    def finished(self) -> bool:
        return self.error is None and len(self.created) == self.size


Call = Callable[..., None]
Mapper = Callable[[Callable[[Any], ApiError | None], list[Any]], list[ApiError | None]]


@dataclass
class Launcher:
    create: Call  # (namespace, body)
    build: Callable[[Launch, int], Obj]  # the pod body for (launch, rank)
    run: Mapper  # runs calls on the API thread pool
    budget: int

    def step(self, launches: list[Launch]) -> None:
        """Advance every creation as far as the budget allows, smallest first; failures land
        in `error`."""
        left = self.budget
        creates: list[tuple[Launch, int]] = []
        for launch in sorted(launches, key=lambda launch: launch.work_left):
            missing = [r for r in launch.ranks if r not in launch.created][:left]
            left -= len(missing)
            creates += [(launch, r) for r in missing]
        for (launch, rank), error in zip(creates, self.run(self._create, creates), strict=True):
            if error is None:
                launch.created.add(rank)
            elif launch.error is None:
                launch.error = (launch.pod_name(rank), error)

    def _create(self, item: tuple[Launch, int]) -> ApiError | None:
        launch, rank = item
        try:
            self.create(launch.view.namespace, self.build(launch, rank))
        except ApiError as exc:
            return exc
        return None
