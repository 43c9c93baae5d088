"""Where the runs of a sweep (`rackwise compare`, `make bench-compare`) execute: local processes,
or tasks on a Ray cluster (`--ray ADDRESS`, or `auto` for a local Ray instance).

Contract. Takes the runs to do (a key and a Task each) and a report callback. Runs each task's
`measure` exactly once, on a backend that changes where it runs, never what it computes: a run's
measures depend only on its task (the solver's limits are work limits), so local processes and
Ray give the same numbers. Yields (key, measures) as runs end, in whatever order they end, and
reports each run's progress as (key, jobs done, jobs in all) while it runs. Ray is an optional
extra (`pip install 'rackwise[ray]'`); asking for it without it installed is an input error."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

from scheduler.simulation.metrics import policy_metrics
from scheduler.simulation.runner import Task, drain, in_processes, run_one

Key = tuple[str, int]  # (row label, seed)
Report = Callable[[Key, int, int], None]  # a run's (key, jobs done, jobs in all)


class RayMissingError(ValueError):
    pass


def measure(task: Task, report: Any, key: Key, keys: tuple[str, ...]) -> dict[str, Any]:
    """One run's measures under `keys`, computed where it runs (the full result stays
    there); progress goes to `report` (a queue) as (key, done, total)."""
    metrics = policy_metrics(run_one(task, report, key))
    return {k: metrics[k] for k in keys}


def local(
    todo: dict[Key, Task], keys: tuple[str, ...], workers: int, report: Report
) -> Iterator[tuple[Key, dict[str, Any]]]:
    """`workers` spawned processes (runner.in_processes)."""
    yield from in_processes(functools.partial(measure, keys=keys), todo, workers, report)


def on_ray(
    todo: dict[Key, Task], keys: tuple[str, ...], address: str, report: Report
) -> Iterator[tuple[Key, dict[str, Any]]]:
    """Each run a Ray task on the cluster at `address` (`auto`: a local instance is started
    when none is running); progress through a Ray queue."""
    try:
        import ray
        from ray.util.queue import Queue as RayQueue
    except ImportError as exc:
        raise RayMissingError("--ray needs Ray: pip install 'rackwise[ray]'") from exc
    started = not ray.is_initialized()
    if started:
        ray.init(address=None if address == "auto" else address, include_dashboard=False)
    try:
        queue = RayQueue()
        remote = ray.remote(measure)
        refs = {remote.remote(t, queue, k, keys): k for k, t in todo.items()}
        pending = list(refs)
        while pending:
            finished, pending = ray.wait(pending, num_returns=1, timeout=0.2)
            drain(queue, report)
            for ref in finished:
                yield refs[ref], ray.get(ref)
    finally:
        if started:
            ray.shutdown()
