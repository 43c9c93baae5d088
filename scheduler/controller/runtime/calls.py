"""The API calls every part of the operator makes the same way.

Contract. Takes the API, the metrics, the thread pool and the expectations. `attempt` runs one
call and turns an API error into False (counted, logged: the next cycle tries again); `each`
runs a function over items on the API threads (one item inline); `delete` deletes pods and
expects their owner to be judged only once the cache shows the deleted ones gone: a delete that
failed is expected of no one, so the owner is judged again next cycle and the delete tried
again, each pod backing off from 1 s to 60 s between failures (an API server that is down is
not hammered); `bind_pairs` binds (namespace, pod, node, queue) items. Promises: no API error
escapes; nothing else is caught; a pod is never recorded as going unless its delete succeeded."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
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
    # pod uid -> (failed deletes in a row, when it may be tried again on the expectations' clock)
    refused: dict[str, tuple[int, float]] = field(default_factory=dict)

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
        now = self.expect.clock()
        pods = [p for p in pods if self.refused.get(p.meta.uid, (0, now))[1] <= now]
        pairs = [(p.meta.namespace, p.meta.name) for p in pods]
        done = self.each(lambda t: self.attempt(self.api.delete_pod, *t), pairs)
        gone = [p for p, ok in zip(pods, done, strict=True) if ok]
        for p, ok in zip(pods, done, strict=True):
            self._refused(p.meta.uid, ok, now)
        for uid in {owned_by(p) for p in gone} - {None}:
            self.expect.gone(str(uid), [p for p in gone if owned_by(p) == uid])

    def _refused(self, uid: str, ok: bool, now: float) -> None:
        """A failed delete backs off (1 s, doubling, 60 s at most); a success forgets it."""
        if ok:
            self.refused.pop(uid, None)
            return
        failures = self.refused.get(uid, (0, now))[0] + 1
        self.refused[uid] = (failures, now + min(60.0, 2.0 ** (failures - 1)))

    def refusing(self, pods: Iterable[Pod]) -> bool:
        """Whether a delete of one of these pods was refused and is still to be tried again."""
        return any(p.meta.uid in self.refused for p in pods)

    def retry(self, pods: list[Pod]) -> None:
        """Delete again the pods whose delete was refused and that are still there (not being
        deleted), once their backoff has passed, whoever asked for it (an eviction, a move, a
        suspend, a rollback); forget those that are gone."""
        there = {p.meta.uid: p for p in pods}
        self.refused = {uid: v for uid, v in self.refused.items() if uid in there}
        again = [there[uid] for uid in self.refused if not there[uid].meta.deleting]
        if again:
            self.delete(again)

    def bind_pairs(self, pairs: list[tuple[str, str, str, str]]) -> list[bool]:
        """(namespace, pod, node, the team queue that admitted it) each."""
        return self.each(lambda t: self.attempt(self.api.bind, *t), pairs)
