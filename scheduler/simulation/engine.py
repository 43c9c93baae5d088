"""Discrete-event simulation of one policy over one trace: arrivals, the scheduling queue the
operator uses (scheduler/queue), completions, preemptions and optional node failures. The queue
decides; this module is its driver with a simulated clock and applies each decision at once."""

from __future__ import annotations

import heapq
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from scheduler.model.gang import GangRequest
from scheduler.model.placement import Placement
from scheduler.placement import Snapshot
from scheduler.queue import (
    Decisions,
    Eviction,
    Move,
    Running,
    RunningGangs,
    SchedulingQueue,
    Wait,
)
from scheduler.queue.effects import apply
from scheduler.queue.teams.reclaim import pods_by_pool
from scheduler.simulation import failures
from scheduler.simulation.config import SimConfig, queue_config
from scheduler.simulation.fabricload import fabric_load
from scheduler.simulation.records import ARRIVAL, FAILURE, FINISH, REPAIR, WAKE, JobState, SimResult
from scheduler.simulation.setup import background, fragmentation, result_of, state_of
from scheduler.simulation.trace import TraceJob
from scheduler.topology.fabric import Fabric


class SimulationError(RuntimeError):
    """A gang's handling raised: the run's measures would be wrong, so it stops."""


class Event(NamedTuple):
    """Ordered as a tuple (in C, not by a generated __lt__: popping events was ~1.5% of a
    replay): time, kind, then the push order, which is unique, so the payload is never compared."""

    time: float
    kind: int
    seq: int
    payload: int


class Simulation:
    def __init__(self, fabric: Fabric, jobs: list[TraceJob], policy: str, config: SimConfig):
        known = config.fabric.provisioned(fabric.spec)  # the ratios the scheduler is told
        fabric = fabric if known is fabric.spec else Fabric(known)
        self.fabric = fabric
        self.policy = policy
        self.config = config
        self.snapshot = Snapshot(fabric)
        self.load = fabric_load(fabric, config.fabric, config.seed)
        self.queue = SchedulingQueue(queue_config(config, policy))
        self.running = RunningGangs()  # indexed as gangs start and end (queue/running.py)
        self.woken: set[float] = set()
        self.per_host = max(h.gpus for h in fabric.hosts)
        self.states = [state_of(j, i, self.per_host, config) for i, j in enumerate(jobs)]
        self.by_key = {s.job.id: s for s in self.states}
        if len(self.by_key) < len(self.states):  # one would be taken for the other
            raise ValueError("job ids must be unique within a run")
        self.events: list[Event] = []
        self.seq = 0
        self.on_host: dict[int, set[int]] = {}
        self.busy: dict[str, int] = {}
        self.rng = random.Random(config.seed)
        self.result = result_of(policy, self.states, fabric, config)
        background(self.snapshot, self.result, config.background_hosts, config.seed)

    def push(self, at: float, kind: int, payload: int) -> None:
        self.seq += 1
        heapq.heappush(self.events, Event(at, kind, self.seq, payload))

    def run(self, progress: Callable[[int], None] | None = None) -> SimResult:
        started = time.perf_counter()
        for state in self.states:
            self.push(state.job.submit_s, ARRIVAL, state.order)
        failures.schedule(self)
        interval = self._sample_interval()
        next_sample = 0.0
        done = 0
        while self.events:
            now = self.events[0].time
            while next_sample <= now:
                self._sample(next_sample)
                next_sample += interval
            while self.events and self.events[0].time == now:
                done += self._handle(heapq.heappop(self.events), now)
            self._cycle(now)
            if progress is not None:
                progress(done)
            if done == len(self.states) and not len(self.queue):
                break
            self.result.end = now
        self.result.wall_seconds = time.perf_counter() - started
        return self.result

    def _sample_interval(self) -> float:
        last = max((s.job.submit_s + s.job.duration_s for s in self.states), default=1.0)
        return max(last / self.config.samples, 1.0)

    def _handle(self, event: Event, now: float) -> int:
        if event.kind == ARRIVAL:
            self.enqueue(self.states[event.payload], now)
        elif event.kind == FINISH:
            state = self.states[event.payload]
            if state.placement is not None and event.time == state.due:
                self.stop(state, now)
                state.finish = now
                return 1
        elif event.kind == FAILURE:
            failures.fail(self, event.payload, now)
        elif event.kind == REPAIR:
            failures.repair(self, event.payload, now)
        # WAKE: the queue asked to be called (patience or backoff ends); the cycle follows
        return 0

    def enqueue(self, state: JobState, now: float) -> None:
        """Queued by priority, then arrival; restarted jobs keep their original place. The
        estimate EASY backfilling uses is the trace's run time (users' own estimates are
        worse: this favours backfilling)."""
        job = state.job
        self.queue.add(
            job.id, state.gang, float(state.order), job.tenant, estimate_s=state.work_left
        )
        self._tenant(job, now, 0, state.gang.all_gpus)

    def _cycle(self, now: float) -> None:
        started = time.perf_counter()
        decisions = self.queue.cycle(now, self.snapshot, self.running)
        self.result.cycle_seconds.append(time.perf_counter() - started)
        apply(decisions, _Effects(self, now))
        if decisions.moves:  # the moved gangs are queued again: they restart at once
            self._cycle(now)
        if decisions.wake_at < math.inf and decisions.wake_at not in self.woken:
            self.woken.add(decisions.wake_at)
            self.push(decisions.wake_at, WAKE, -1)

    def record(self, decisions: Decisions) -> None:
        self.result.joint_gain += decisions.joint_gain
        self.result.joint_joined += len(decisions.joint_joined)
        for placement in decisions.tried:
            self.result.latencies.append(placement.solve_seconds)
            if placement.placed and placement.gap is not None:
                self.result.gaps.append(placement.gap)

    def begin(self, key: str, placement: Placement, now: float) -> None:
        admitted = self.queue.team_of(key) or ""  # its team queue, as the operator records it
        self.queue.remove(key)
        state = self.by_key[key]
        self._tenant(state.job, now, 0, -state.gang.all_gpus)
        self._start(state, placement, now, admitted)

    def preempt(self, state: JobState, eviction: Eviction, now: float) -> None:
        """Evicted for a higher-priority gang: the work since the last checkpoint is lost."""
        worked = self.stop(state, now)
        interval = self.config.checkpoint_s
        state.work_left -= math.floor(worked / interval) * interval
        state.restarts += 1
        state.preemptions += 1
        self.result.evictions.append((now, eviction))
        self.enqueue(state, now)

    def move(self, state: JobState, move: Move, now: float) -> None:
        """Stopped at a checkpoint and queued again (its new hosts are held for it): the work
        since the checkpoint (none when the move falls on it) is lost, and the restart time is
        paid again."""
        worked = self.stop(state, now)
        state.work_left -= max(0.0, worked - move.since_checkpoint_s)
        state.moves += 1
        self.result.moves.append((now, move))
        self.enqueue(state, now)

    def _start(self, state: JobState, placement: Placement, now: float, admitted: str) -> None:
        self.snapshot.apply(state.gang, placement)
        self.result.starts.append((now, state.job.id, placement.hosts()))
        if placement.premium > 0:
            self.result.premiums.append(placement.premium)
        state.placement = placement
        state.last_domains = placement.domains
        state.started = now
        hosts = [self.fabric.host_index[h] for h in placement.hosts()]
        again = state.restarts or state.moves  # preemptions count as restarts
        state.overhead = self.config.restart.seconds(len(hosts)) if again else 0.0
        state.run_work = state.work_left
        state.progress_at = now + state.overhead
        state.stretch = 1.0
        if state.first_start is None:
            state.first_start = now
        self.running.add(
            Running(
                state.job.id,
                state.gang,
                placement,
                started_s=state.progress_at,
                tenant=state.job.tenant,
                checkpoint_s=self.config.checkpoint_s,
                end_s=state.progress_at + state.run_work,
                admitted=admitted,
            )
        )
        self._tenant(state.job, now, state.gang.all_gpus, 0)
        for h in hosts:
            self.on_host.setdefault(h, set()).add(state.order)
        self._busy(state.gang.pool, state.gang.all_gpus, now)
        for order in self.load.start(state):  # its own rate, and those of the jobs it meets
            self._rerate(self.states[order], now)

    def _advance(self, state: JobState, now: float) -> None:
        """Count the work done since progress_at at the current stretch."""
        if now <= state.progress_at:
            return
        elapsed = now - state.progress_at
        state.work_left = max(0.0, state.work_left - elapsed / state.stretch)
        state.done_s += elapsed / state.stretch
        start, end = self.result.window
        inside = min(now, end) - max(state.progress_at, start)
        if inside > 0:
            self.result.useful_gpu_s += state.gang.all_gpus * inside / state.stretch
        self._lost(state, elapsed)
        comm = state.stretch - (1.0 - state.share) if state.share else 0.0
        state.comm_gpu_s += state.gang.gpus * elapsed * max(comm, 0.0) / state.stretch
        state.run_gpu_s += state.gang.gpus * elapsed
        state.progress_at = now

    def _lost(self, state: JobState, elapsed: float) -> None:
        """Split what the interval's stretch cost (the stretch is still the old one) into what
        the job would lose alone on its placement and what sharing added to that."""
        lone, held = self.load.lone(state), state.gang.all_gpus * elapsed
        if state.stretch > lone + 1e-9:
            state.contended_s += elapsed
            state.shared_lost_gpu_s += held * (state.stretch - lone) / state.stretch
        if lone > 1.0:
            state.alone_lost_gpu_s += held * (lone - 1.0) / state.stretch

    def _rerate(self, state: JobState, now: float) -> None:
        """The ring's rate changed (or the run began): finish at the new pace."""
        self._advance(state, now)
        state.stretch = self.load.stretch(state)
        state.due = state.progress_at + state.work_left * state.stretch
        self.push(state.due, FINISH, state.order)

    def stop(self, state: JobState, now: float) -> float:
        """End the current run; return the compact-seconds of work it completed."""
        placement = state.placement
        assert placement is not None
        self.snapshot.release(state.gang, placement)
        for host in placement.hosts():
            self.on_host[self.fabric.host_index[host]].discard(state.order)
        self._advance(state, now)
        state.held_gpu_s += state.gang.all_gpus * (now - state.started)
        self.result.borrowed_gpu_s += self._lent_gpus(state.gang, placement) * (now - state.started)
        worked = state.run_work - state.work_left
        state.work_left = state.run_work  # the caller decides what of the run is kept
        state.rack_gb += placement.traffic_gb.get("rack", 0.0) * worked
        state.spine_gb += placement.traffic_gb.get("spine", 0.0) * worked
        state.placement = None
        self.running.discard(state.job.id)
        self._busy(state.gang.pool, -state.gang.all_gpus, now)
        self._tenant(state.job, now, -state.gang.all_gpus, 0)
        for order in self.load.stop(state.order):
            if self.states[order].placement is not None:
                self._rerate(self.states[order], now)
        return worked

    def _lent_gpus(self, gang: GangRequest, placement: Placement) -> int:
        """GPUs the gang holds on hosts of another pool (lent to its own)."""
        by_pool = pods_by_pool(self.fabric, placement)
        return sum(n for pool, n in by_pool.items() if pool != gang.pool) * gang.gpus_per_pod

    def _tenant(self, job: TraceJob, now: float, gpus: int, waiting: int) -> None:
        """A tenant's GPUs in use and GPUs its waiting gangs ask change (when jobs have
        tenants)."""
        if job.tenant:
            self.result.tenants.append((now, job.tenant, gpus, waiting))

    def _busy(self, pool: str, delta: int, now: float) -> None:
        self.busy[pool] = self.busy.get(pool, 0) + delta
        self.result.busy.append((now, pool, self.busy[pool]))

    # failures: each host fails after an exponential time with the scenario's MTBF
    def _sample(self, at: float) -> None:
        self.result.samples.append((at, *fragmentation(self.fabric, self.snapshot)))


@dataclass
class _Effects:
    """The simulator's side of the port (queue/effects.py): every effect at once, at `now`."""

    sim: Simulation
    now: float

    def learnt(self, decisions: Decisions) -> None:
        self.sim.record(decisions)

    def fail(self, key: str, exc: Exception) -> None:
        # the operator logs and goes on; a simulation that went on would mis-measure
        raise SimulationError(
            f"job {key} at t={self.now:.0f} s: handling it raised {exc!r}"
        ) from exc

    def evict(self, eviction: Eviction) -> None:
        self.sim.preempt(self.sim.by_key[eviction.victim], eviction, self.now)

    def move(self, move: Move) -> None:
        self.sim.move(self.sim.by_key[move.key], move, self.now)

    def wait(self, key: str, wait: Wait) -> None:
        pass  # the measures count waits from start times

    def nominate(self, key: str, placement: Placement) -> None:
        self.sim.begin(key, placement, self.now)  # its victims are gone at once here

    def start(self, starts: list[tuple[str, Placement]]) -> None:
        for key, placement in starts:
            self.sim.begin(key, placement, self.now)
