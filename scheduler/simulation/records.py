"""What a simulation run records: each job's state through the run, and the run's result
(the measures in metrics.py are computed from these)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from scheduler.model.gang import GangRequest
from scheduler.model.placement import Placement
from scheduler.queue import Eviction, Move
from scheduler.simulation.trace import TraceJob

# kinds of the simulation's events, in their order at the same instant
FINISH, REPAIR, FAILURE, ARRIVAL, WAKE = range(5)


@dataclass
class JobState:
    job: TraceJob
    gang: GangRequest
    order: int
    work_left: float  # seconds of work on a compact placement
    first_start: float | None = None
    finish: float | None = None
    restarts: int = 0
    placement: Placement | None = None
    started: float = 0.0
    overhead: float = 0.0  # restart cost paid at the start of the current run
    stretch: float = 1.0
    due: float = math.inf  # when the current run ends; a FINISH for another time is stale
    preemptions: int = 0
    moves: int = 0  # moved at a checkpoint (defragmentation)
    rack_gb: float = 0.0
    spine_gb: float = 0.0
    last_domains: dict[str, int] = field(default_factory=dict)
    # the ring's share of a compact step (drawn once per job), and for the current run: work
    # left when it started, the compact reference rate, the rate alone on the fabric, and the
    # time up to which work_left is counted
    share: float = 0.0
    run_work: float = 0.0
    reference_gbps: float = 0.0
    cap_gbps: float = 0.0
    progress_at: float = 0.0
    comm_gpu_s: float = 0.0  # GPU-seconds spent communicating, over every run
    run_gpu_s: float = 0.0  # GPU-seconds of running (restart overhead excluded), every run
    held_gpu_s: float = 0.0  # GPU-seconds its GPUs were held, restarts included, every run
    contended_s: float = 0.0  # seconds run below its uncontended rate (shared links)
    # GPU-seconds of its runs lost at the stretch it would have alone on its placement, and
    # those that sharing links with other jobs added (together: all that the fabric cost it)
    alone_lost_gpu_s: float = 0.0
    shared_lost_gpu_s: float = 0.0
    done_s: float = 0.0  # compact seconds of work done, every run (redone work included)

    @property
    def fabric_slowdown(self) -> float:
        """Seconds run per compact second of work: what shared links cost it (1.0: none)."""
        ran = self.run_gpu_s / self.gang.gpus if self.gang.gpus else 0.0
        return ran / self.done_s if self.done_s else 1.0


@dataclass
class SimResult:
    policy: str
    jobs: list[JobState]
    busy: list[tuple[float, str, int]]  # (time, pool, busy GPUs in that pool after the change)
    samples: list[tuple[float, int, int]]  # (time, stranded free GPUs, largest rack free GPUs)
    latencies: list[float]
    gaps: list[float]
    pool_gpus: dict[str, int]
    end: float
    wall_seconds: float = 0.0
    background: dict[str, int] = field(default_factory=dict)  # GPUs held outside the trace
    gpus_per_host: int = 8
    rack_gpus: int = 64  # GPUs of the largest rack: gangs above it are "larger than a rack"
    # GPUs of the largest NVLink domain of several hosts (0: none); gangs that need one whole
    nvlink_gpus: int = 0
    warmup_s: float = 0.0  # jobs submitted before this are not measured
    # the steady window (end of the warm-up to the last arrival) and the GPU-seconds of work
    # at compact speed done inside it: effective utilisation, which slowed jobs do not inflate
    window: tuple[float, float] = (0.0, 0.0)
    useful_gpu_s: float = 0.0
    evictions: list[tuple[float, Eviction]] = field(default_factory=list)
    # every start: (time, job, hosts with their pod counts), in the order they happened
    starts: list[tuple[float, str, dict[str, int]]] = field(default_factory=list)
    cycle_seconds: list[float] = field(default_factory=list)  # wall time of each queue cycle
    moves: list[tuple[float, Move]] = field(default_factory=list)  # defragmentation
    joint_gain: float = 0.0  # J joint placement saved over one-by-one, summed over cycles
    joint_joined: int = 0  # blocked gangs joint placement started
    premiums: list[float] = field(default_factory=list)  # J traded for less breakage, per start
    # GPU-seconds gangs ran on hosts lent to their pool (queue/lending.py)
    borrowed_gpu_s: float = 0.0
    # per tenant, as it happened: (time, tenant, change of GPUs in use, of GPUs waiting)
    tenants: list[tuple[float, str, int, int]] = field(default_factory=list)
    # the teams' nominal GPUs per tenant's queue (simulation/tenants.py measures against them)
    entitled: dict[str, int] = field(default_factory=dict)
