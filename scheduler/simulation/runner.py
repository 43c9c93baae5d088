"""Run every policy of a scenario, each in its own process (2 cores here), with progress."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from queue import Empty
from typing import Any, TypeVar

from scheduler.model.topology import TopologySpec
from scheduler.simulation.config import SimConfig
from scheduler.simulation.engine import Simulation
from scheduler.simulation.records import SimResult
from scheduler.simulation.trace import TraceJob
from scheduler.topology.fabric import Fabric

Progress = Callable[[str, int, int], None]
K = TypeVar("K")
R = TypeVar("R")


@dataclass(frozen=True)
class Task:
    spec: TopologySpec
    jobs: list[TraceJob]
    policy: str
    config: SimConfig


def run_one(task: Task, report: Any = None, label: object = None) -> SimResult:
    """One run; its progress goes to `report` (a queue) as (label, jobs done, jobs in all),
    the label the policy's name unless given."""
    name = task.policy if label is None else label
    fabric = Fabric(task.spec)
    sim = Simulation(fabric, task.jobs, task.policy, task.config)
    total = len(task.jobs)
    step = max(total // 100, 1)
    last = [-step]

    def tick(done: int) -> None:
        if report is not None and done - last[0] >= step:
            last[0] = done
            report.put((name, done, total))

    result = sim.run(tick)
    if report is not None:
        report.put((name, total, total))
    return result


def run_all(tasks: list[Task], workers: int, progress: Progress | None = None) -> list[SimResult]:
    if workers <= 1 or len(tasks) == 1:
        return [run_one(t) for t in tasks]
    tell = progress or (lambda *_: None)

    def report(i: int, done: int, total: int) -> None:
        tell(tasks[i].policy, done, total)

    results = dict(in_processes(run_one, dict(enumerate(tasks)), workers, report))
    return [results[i] for i in range(len(tasks))]


def in_processes(
    fn: Callable[[Task, Any, K], R],
    todo: dict[K, Task],
    workers: int,
    report: Callable[[K, int, int], None],
) -> Iterator[tuple[K, R]]:
    """`fn(task, queue, key)` for every task, `workers` spawned processes at a time (a clean
    interpreter each: no inherited threads), yielded as each ends; what the runs put on the
    queue, (key, jobs done, jobs in all), goes to `report` meanwhile. One worker: in this
    process, reported at once."""
    if workers <= 1:
        for key, task in todo.items():
            yield key, fn(task, Direct(report), key)
        return
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager, ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        queue = manager.Queue()
        futures = {pool.submit(fn, t, queue, k): k for k, t in todo.items()}
        pending: set[Future[R]] = set(futures)
        while pending:
            finished, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            drain(queue, report)
            for future in finished:
                yield futures[future], future.result()


class Direct:
    """A report queue that reports at once (runs in this process)."""

    def __init__(self, report: Callable[..., None]) -> None:
        self.report = report

    def put(self, item: tuple[Any, int, int]) -> None:
        self.report(*item)


def drain(queue: Any, report: Callable[..., None]) -> None:
    """Every (key, done, total) waiting on the queue, to `report`, without blocking."""
    while True:
        try:
            key, done, total = queue.get(block=False)
        except Empty:
            return
        report(key, done, total)
