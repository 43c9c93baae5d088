"""The API calls every part of the operator makes the same way.

Contract. Takes the API, the metrics, the thread pool and the expectations. `attempt` runs one
call and turns an API error into False (counted, logged: the next cycle tries again); `each`
runs a function over items on the API threads (one item inline); `delete` deletes pods and
expects their owner to be judged only once the cache shows them gone; `bind_pairs` binds
(namespace, pod, node) triples. Promises: no API error escapes; nothing else is caught."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import structlog

from scheduler.controller.runtime.expect import Expectations, owned_by
from scheduler.controller.runtime.gateway import ApiError
from scheduler.controller.runtime.objects import Pod
from scheduler.controller.runtime.observability import Metrics

T = TypeVar("T")
log = structlog.get_logger("rackwise")


class PodApi(Protocol):
    def bind(self, namespace: str, pod: str, node: str, queue: str = "") -> None: ...
    def delete_pod(self, namespace: str, pod: str) -> None: ...


@dataclass
class Calls:
    api: PodApi
    metrics: Metrics
    pool: ThreadPoolExecutor
    expect: Expectations

    def attempt(self, fn: Callable[..., object], *args: Any) -> bool:
        try:
            fn(*args)
        except ApiError as exc:
            name = getattr(fn, "__name__", "call")
            self.metrics.api_error(name)
            log.warning("api call failed", call=name, error=str(exc))
            return False
        return True

    def each(self, fn: Callable[[Any], T], items: list[Any]) -> list[T]:
        """fn over items on the API thread pool (a single item runs inline)."""
        return list(self.pool.map(fn, items)) if len(items) > 1 else [fn(i) for i in items]

    def delete(self, pods: Iterable[Pod]) -> None:
        pods = list(pods)
        pairs = [(p.meta.namespace, p.meta.name) for p in pods]
        self.each(lambda t: self.attempt(self.api.delete_pod, *t), pairs)
        for uid in {owned_by(p) for p in pods} - {None}:
            self.expect.gone(str(uid), [p for p in pods if owned_by(p) == uid])

    def bind_pairs(self, pairs: list[tuple[str, str, str, str]]) -> list[bool]:
        """(namespace, pod, node, the team queue that admitted it) each."""
        return self.each(lambda t: self.attempt(self.api.bind, *t), pairs)
