"""Run every policy of a scenario, each in its own process (2 cores here), with progress."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from queue import Empty
from typing import Any

from scheduler.model.topology import TopologySpec
from scheduler.simulation.config import SimConfig
from scheduler.simulation.engine import Simulation
from scheduler.simulation.records import SimResult
from scheduler.simulation.trace import TraceJob
from scheduler.topology.fabric import Fabric

Progress = Callable[[str, int, int], None]


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
    ctx = mp.get_context("spawn")  # a clean interpreter per worker: no inherited threads
    with ctx.Manager() as manager:
        queue = manager.Queue()
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = [pool.submit(run_one, t, queue) for t in tasks]
            while not all(f.done() for f in futures):
                _drain(queue, progress, timeout=0.2)
            _drain(queue, progress, timeout=0.0)
            return [f.result() for f in futures]


def _drain(queue: Any, progress: Progress | None, timeout: float) -> None:
    try:
        while True:
            policy, done, total = queue.get(timeout=timeout)
            if progress is not None:
                progress(policy, done, total)
            timeout = 0.0
    except Empty:
        return
