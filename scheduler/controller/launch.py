"""Launching placed gangs: create every pod (each annotated with its node, which reserves the
capacity), then bind them all, within a budget of API writes per cycle.

Contract. A launch is all-or-nothing: no pod of a gang is bound before all its pods exist, and
a launch that fails at any step deletes exactly the pods it created. The budget is shared by
every launch in progress, smallest remaining work first, so a huge gang advances every cycle
without holding back the small ones behind it; ranks not yet created stay reserved in the
snapshot (`reserve`), so nothing else is placed onto them meanwhile."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scheduler.controller.expect import charge_unseen
from scheduler.controller.gateway import ApiError
from scheduler.controller.jobs import JobView
from scheduler.controller.pods import pod_name
from scheduler.model import Placement
from scheduler.placement import Snapshot

Obj = dict[str, Any]


@dataclass
class Launch:
    view: JobView
    todo: Placement  # the ranks to create: every rank of a new gang, the lost ones of a repair
    whole: Placement  # the gang as it will stand (for status)
    repair: bool = False
    created: set[int] = field(default_factory=set)
    bound: set[int] = field(default_factory=set)
    error: tuple[str, ApiError] | None = None  # (pod, what the API server said)

    @property
    def size(self) -> int:
        return len(self.todo.pods)

    @property
    def work_left(self) -> int:
        return 2 * self.size - len(self.created) - len(self.bound)

    def pod_name(self, rank: int) -> str:
        return pod_name(self.view, rank)

    def reserve(self, snapshot: Snapshot, present: set[tuple[str, str]]) -> None:
        """Charge the ranks whose pods are not `present` (namespace, name) in what the cycle
        read: those are charged from their pods (their intended node)."""
        namespace = self.view.namespace
        unseen = (p for p in self.todo.pods if (namespace, self.pod_name(p.rank)) not in present)
        charge_unseen(snapshot, self.view.gang, unseen)

    @property
    def finished(self) -> bool:
        return self.error is None and len(self.bound) == self.size


Call = Callable[..., None]
Mapper = Callable[[Callable[[Any], ApiError | None], list[Any]], list[ApiError | None]]


@dataclass
class Launcher:
    create: Call  # (namespace, body)
    bind: Call  # (namespace, pod, node)
    build: Callable[[Launch, int, str], Obj]  # the pod body for (launch, rank, host)
    run: Mapper  # runs calls on the API thread pool
    budget: int

    def step(self, launches: list[Launch]) -> None:
        """Advance every launch as far as the budget allows; failures land in `error`. The
        budget is planned per launch, smallest first: its creations, then (if those complete
        it) its bindings; then all creations run, then the bindings of gangs now whole."""
        left = self.budget
        creates: list[tuple[Launch, int, str]] = []
        binds: list[tuple[Launch, int, str]] = []
        for launch in sorted(launches, key=lambda launch: launch.work_left):
            missing = [p for p in launch.todo.pods if p.rank not in launch.created][:left]
            left -= len(missing)
            creates += [(launch, p.rank, p.host) for p in missing]
            if len(launch.created) + len(missing) == launch.size:
                unbound = [p for p in launch.todo.pods if p.rank not in launch.bound][:left]
                left -= len(unbound)
                binds += [(launch, p.rank, p.host) for p in unbound]
        self._apply(creates, self._create, "created")
        ready = [b for b in binds if b[0].error is None and len(b[0].created) == b[0].size]
        self._apply(ready, self._bind, "bound")

    def _create(self, item: tuple[Launch, int, str]) -> ApiError | None:
        launch, rank, host = item
        return _attempt(self.create, launch.view.namespace, self.build(launch, rank, host))

    def _bind(self, item: tuple[Launch, int, str]) -> ApiError | None:
        launch, rank, host = item
        return _attempt(self.bind, launch.view.namespace, launch.pod_name(rank), host)

    def _apply(
        self,
        items: list[tuple[Launch, int, str]],
        fn: Callable[[tuple[Launch, int, str]], ApiError | None],
        into: str,
    ) -> None:
        for (launch, rank, _), error in zip(items, self.run(fn, items), strict=True):
            if error is None:
                getattr(launch, into).add(rank)
            elif launch.error is None:
                launch.error = (launch.pod_name(rank), error)


def _attempt(fn: Call, *args: Any) -> ApiError | None:
    try:
        fn(*args)
    except ApiError as exc:
        return exc
    return None
