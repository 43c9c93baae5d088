"""The event engine on scenarios small enough to compute by hand."""

from __future__ import annotations

import math

import pytest

from scheduler.simulation.config import Failures, SimConfig
from scheduler.simulation.engine import FAILURE, Simulation
from scheduler.simulation.metrics import WALL_CLOCK, policy_metrics
from scheduler.simulation.profiles import CommShare, FabricProfile
from scheduler.simulation.trace import TraceJob
from scheduler.topology import Fabric, generate
from tests.conftest import place_raises_for


def job(name: str, at: float, duration: float, gpus: int, **extra: object) -> TraceJob:
    return TraceJob(id=name, submit_s=at, duration_s=duration, gpus=gpus, **extra)


def run(fabric: Fabric, jobs: list[TraceJob], policy: str = "rackwise", **config: object):
    sim = Simulation(fabric, jobs, policy, SimConfig.of(**config))
    return sim, sim.run()


def test_fifo_wait_and_jct_exact():
    fabric = Fabric(generate(blocks=1, racks=2, hosts=2, gpus=8))  # 32 GPUs
    jobs = [job("a", 0, 100, 16), job("b", 10, 50, 32), job("c", 20, 30, 8)]
    _, result = run(fabric, jobs)
    finish = {s.job.id: s.finish for s in result.jobs}
    # a runs 0-100 in one rack; b needs the whole fabric and waits for a (it holds every host
    # from 100); c (8 GPUs, 30 s) fits beside a at 20 and ends before b can start, so EASY
    # backfilling lets it pass
    assert finish == {"a": 100, "c": 50, "b": 150}
    m = policy_metrics(result)
    assert m["jct_mean_s"] == pytest.approx((100 + 140 + 30) / 3)
    assert m["queue_delay_mean_s"] == pytest.approx(90 / 3)
    assert m["jobs_unplaced"] == 0


def test_a_lone_gang_across_spines_is_slowed_only_where_its_spine_is_too_thin():
    """Spines of 2 hosts: a 16-GPU gang forced across both spines (background load holds the
    other host of each) crosses spine uplinks of 2 x 50 / 3 = 33.3 GB/s under the
    oversubscribed profile: with share 0.35 it runs 0.65 + 0.35 * 50 / 33.3 = 1.175x; the
    non-blocking profile leaves it at the NIC rate (1.0x)."""
    share = CommShare(low=0.35, high=0.35)
    for profile, expected in (("oversubscribed", 1.175), ("non-blocking", 1.0)):
        fabric = Fabric(generate(blocks=2, racks=1, hosts=2, gpus=8))
        config = SimConfig(comm_share=share, fabric=FabricProfile(name=profile))
        sim = Simulation(fabric, [job("g", 1, 100, 16)], "rackwise", config)
        sim.snapshot.use("h0-1", 8)
        sim.snapshot.use("h1-1", 8)
        [g] = sim.run().jobs
        assert g.last_domains["spine"] == 2
        assert g.stretch == pytest.approx(expected)
        assert g.finish == pytest.approx(1 + 100 * expected)


def test_failure_restarts_from_the_last_checkpoint():
    fabric = Fabric(generate(blocks=1, racks=1, hosts=2, gpus=8))
    failures = Failures(mtbf_hours=1e9, mttr_hours=1e6)
    config = SimConfig(failures=failures, checkpoint_minutes=100 / 60)
    sim = Simulation(fabric, [job("j", 0, 1000, 8)], "rackwise", config)
    # fail the host the job lands on (best fit in fabric order: the first) at t=250
    sim.push(250, FAILURE, 0)
    result = sim.run()
    [state] = result.jobs
    # 250 s worked, checkpoint every 100 s keeps 200; restart costs 300 s (one host: the base)
    # on the other host
    assert state.restarts == 1
    assert state.finish == pytest.approx(250 + 300 + 800)
    assert state.last_domains["host"] == 1


def test_deterministic_under_a_seed():
    fabric = Fabric(generate(blocks=2, racks=2, hosts=2, gpus=8))
    jobs = [job(f"j{i}", i * 7.0, 100 + (i * 37) % 400, [8, 16, 24, 4][i % 4]) for i in range(60)]
    failures = Failures(mtbf_hours=0.2, mttr_hours=0.01)
    config = {"seed": 3, "failures": failures, "checkpoint_minutes": 0.5}
    for policy in ("rackwise", "random-fit"):
        a = policy_metrics(run(fabric, jobs, policy, **config)[1])
        b = policy_metrics(run(fabric, jobs, policy, **config)[1])
        for noisy in WALL_CLOCK:
            a.pop(noisy)
            b.pop(noisy)
        assert a == b
        assert a["restarts"] > 0  # failures really were injected
        assert a["jobs_finished"] == 60


def test_pools_never_share_hosts():
    fabric = Fabric(
        generate(blocks=1, racks=2, hosts=2, gpus=8, pools={"training": 1, "online-inference": 1})
    )
    jobs = [job("t", 0, 100, 32), job("i", 0, 100, 8, pool="online-inference", pods=1)]
    _, result = run(fabric, jobs)
    t, i = result.jobs
    assert t.finish is None  # 32 GPUs never fit in the 16-GPU training pool
    assert i.finish == 100
    assert policy_metrics(result)["jobs_unplaced"] == 1


def test_backfill_switch_is_strict_fifo_when_off():
    """Same trace as test_fifo_wait_and_jct_exact: with backfill off, c (8 GPUs) may not pass b
    (which waits for the whole fabric), so c starts only after b: at 150, ends at 180."""
    fabric = Fabric(generate(blocks=1, racks=2, hosts=2, gpus=8))
    jobs = [job("a", 0, 100, 16), job("b", 10, 50, 32), job("c", 20, 30, 8)]
    _, result = run(fabric, jobs, backfill="none")
    assert {s.job.id: s.finish for s in result.jobs} == {"a": 100, "b": 150, "c": 180}


def test_easy_backfill_does_not_delay_the_reserved_gang():
    """c now runs 200 s: it would end after a (100 s), when b can start. Greedy backfilling lets
    it start at 20 and b waits until 220; EASY holds b's hosts, so c waits for b."""
    fabric = Fabric(generate(blocks=1, racks=2, hosts=2, gpus=8))
    jobs = [job("a", 0, 100, 16), job("b", 10, 50, 32), job("c", 20, 200, 8)]
    _, greedy = run(fabric, jobs, backfill="greedy")
    assert {s.job.id: s.finish for s in greedy.jobs} == {"a": 100, "c": 220, "b": 270}
    _, easy = run(fabric, jobs, backfill="easy")
    assert {s.job.id: s.finish for s in easy.jobs} == {"a": 100, "b": 150, "c": 350}


def test_preemption_evicts_the_low_priority_gang_and_it_resumes_from_its_checkpoint():
    """One host. low (priority 0, 1000 s) starts at 0; high (priority 1, 100 s) arrives at 250
    and evicts it. low checkpointed every 100 s, so it keeps 200 s of work: it restarts when
    high ends at 350, pays its 300 s restart and needs 800 s more."""
    fabric = Fabric(generate(blocks=1, racks=1, hosts=1, gpus=8))
    jobs = [job("low", 0, 1000, 8), job("high", 250, 100, 8, priority=1)]
    _, result = run(fabric, jobs, checkpoint_minutes=100 / 60)
    low, high = result.jobs
    assert high.first_start == 250
    assert high.finish == 350
    assert low.preemptions == 1
    assert low.finish == pytest.approx(350 + 300 + 800)
    [(at, eviction)] = result.evictions
    assert (at, eviction.victim, eviction.preemptor) == (250, "low", "high")
    assert eviction.lost_gpu_s == pytest.approx(50 * 8)
    _, off = run(fabric, jobs, checkpoint_minutes=100 / 60, preemption="off")
    assert {s.job.id: s.finish for s in off.jobs} == {"low": 1000, "high": 1100}


def test_defragmentation_moves_are_carried_out_and_switch_off():
    """The simulator drives the queue's moves: each is recorded, the moved job still finishes
    and pays its restart (300 s + 60 s per doubling of its hosts) when it starts again, every
    GPU is given back at the end; with no budget nothing moves."""
    fabric = Fabric(generate(blocks=2, racks=2, hosts=2, gpus=8))
    jobs = [job(f"j{i}", i * 7.0, 100 + (i * 37) % 400, [8, 16, 24, 4][i % 4]) for i in range(60)]
    for budget in (0, 30):
        sim, result = run(fabric, jobs, defrag_moves_per_hour=budget, checkpoint_minutes=0.5)
        moved = {move.key for _, move in result.moves}
        assert bool(moved) == (budget > 0)
        for state in result.jobs:
            assert state.finish is not None
            assert state.moves == (state.job.id in moved)
            hosts = state.last_domains["host"]
            assert state.overhead == (300 + 60 * math.log2(hosts) if state.moves else 0.0)
        assert (sim.snapshot.free_gpus == fabric.gpus).all()


def test_a_placement_that_raises_stops_the_simulation_with_the_job_named(monkeypatch):
    """The queue isolates a gang whose handling raises (the operator logs it and goes on); a
    simulation must not go on as if the gang waited: its measures would be wrong."""
    from scheduler.simulation.engine import SimulationError

    place_raises_for(monkeypatch, "b")
    fabric = Fabric(generate(blocks=1, racks=1, hosts=2, gpus=8))
    with pytest.raises(SimulationError, match="job b at t=10 s: handling it raised"):
        run(fabric, [job("a", 0, 100, 8), job("b", 10, 50, 8)])
