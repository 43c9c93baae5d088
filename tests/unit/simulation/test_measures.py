"""The protocol's measures (simulation/metrics.py: field_metrics), each on a tiny trace computed
by hand, and the oracle row against the non-blocking profile."""

from __future__ import annotations

import random

import pytest

from scheduler.simulation.config import SimConfig
from scheduler.simulation.engine import Simulation
from scheduler.simulation.metrics import field_metrics, policy_metrics
from scheduler.simulation.profiles import CommShare, FabricProfile, ProfileName
from scheduler.simulation.trace import TraceJob
from scheduler.topology import Fabric, generate

SILENT = CommShare(low=0.0, high=0.0)


def job(name: str, at: float, duration: float, gpus: int, **extra: object) -> TraceJob:
    return TraceJob(id=name, submit_s=at, duration_s=duration, gpus=gpus, **extra)


def tiny(warmup_s: float = 0.0) -> dict[str, object]:
    """Two racks of two 8-GPU hosts (a rack holds 16 GPUs). a (4 GPUs, host class) and b (16,
    rack class) start at 0; c (32, larger than a rack) arrives at 10 and waits for both: it
    starts at 200 and ends at 250."""
    fabric = Fabric(generate(blocks=1, racks=2, hosts=2, gpus=8))
    jobs = [job("a", 0, 100, 4), job("b", 0, 200, 16), job("c", 10, 50, 32)]
    config = SimConfig(comm_share=SILENT, warmup_s=warmup_s)
    return field_metrics(Simulation(fabric, jobs, "rackwise", config).run())


def test_each_measure_on_a_tiny_trace():
    m = tiny()
    assert m["jct_mean_s"] == pytest.approx((100 + 200 + 240) / 3)
    assert m["jct_p95_s"] == 240  # nearest rank of three
    assert m["jct_mean_s_by_class"] == {"host": 100, "rack": 200, "larger": 240}
    assert m["jobs_by_class"] == {"host": 1, "rack": 1, "larger": 1}
    assert m["large_gangs"] == 1
    assert m["large_gang_wait_mean_s"] == 190
    assert m["large_gang_wait_p95_s"] == 190
    assert m["gpu_hours_lost"] == 0.0
    # from the first arrival (0) to the last (10): 20 of 32 GPUs at work, at compact speed
    assert m["utilisation_steady"] == pytest.approx(20 / 32)
    # max(1, JCT / max(run, 10 s)): 1, 1, 240 / 50
    assert m["bounded_slowdown_mean"] == pytest.approx((1 + 1 + 4.8) / 3)
    assert m["bounded_slowdown_p95"] == pytest.approx(4.8)


def test_jobs_of_the_warm_up_are_not_measured():
    m = tiny(warmup_s=5)
    assert m["measured_jobs"] == 1
    assert m["jct_mean_s"] == 240
    assert m["jct_mean_s_by_class"] == {"host": None, "rack": None, "larger": 240}
    assert m["utilisation_steady"] == pytest.approx(20 / 32)  # 5..10


def test_every_statistic_of_simulate_counts_one_population():
    """`rackwise simulate`'s metrics: JCT mean, p50, p99 and queue delay over the measured
    jobs alone (c); the counts of jobs run and finished over all three."""
    fabric = Fabric(generate(blocks=1, racks=2, hosts=2, gpus=8))
    jobs = [job("a", 0, 100, 4), job("b", 0, 200, 16), job("c", 10, 50, 32)]
    config = SimConfig(comm_share=SILENT, warmup_s=5)
    m = policy_metrics(Simulation(fabric, jobs, "rackwise", config).run())
    assert (m["jct_mean_s"], m["jct_p50_s"], m["jct_p99_s"]) == (240, 240, 240)
    assert (m["queue_delay_mean_s"], m["queue_delay_p99_s"]) == (190, 190)
    assert (m["jobs"], m["jobs_finished"], m["measured_jobs"]) == (3, 3, 1)
    assert m["pools"]["training"]["jct_p50_s"] == 240


def test_gpu_hours_lost_count_the_restart_and_the_work_redone():
    """The preemption case of test_engine: low (8 GPUs) runs 0..250, loses 50 s since its
    checkpoint, restarts at 350 and pays 300 s: it holds 8 x (250 + 300 + 800) GPU-s for
    1000 s of work: 8 x 350 s lost. high loses nothing."""
    fabric = Fabric(generate(blocks=1, racks=1, hosts=1, gpus=8))
    jobs = [job("low", 0, 1000, 8), job("high", 250, 100, 8, priority=1)]
    config = SimConfig(comm_share=SILENT, checkpoint_minutes=100 / 60)
    m = field_metrics(Simulation(fabric, jobs, "rackwise", config).run())
    assert m["gpu_hours_lost"] == pytest.approx(8 * 350 / 3600)


def test_calibration_counts_multi_host_jobs_that_shared_a_link():
    """The NIC-sharing case of test_network: both 2-pod jobs share both NICs until b ends:
    both were slowed; a ran 620 s for 100 s of work, b 400 s for 50."""
    fabric = Fabric(generate(blocks=1, racks=1, hosts=2, gpus=8))
    jobs = [job("a", 0, 100, 4, pods=2), job("b", 0, 50, 4, pods=2)]
    config = SimConfig(comm_share=CommShare(low=0.2, high=0.2))
    m = field_metrics(Simulation(fabric, jobs, "least-allocated", config).run())
    assert m["multihost_contended_share"] == 1.0
    assert m["multihost_contended_slowdown_mean"] == pytest.approx((6.2 + 8.0) / 2)


def test_the_fabrics_loss_splits_into_what_each_job_loses_alone_and_what_sharing_adds():
    """The NIC-sharing case of test_network: alone each 4-GPU job's stretch is 4.4, together 8.
    b runs 0..400 at 8: of each GPU's 400 s, 400 x 3.4 / 8 = 170 are its placement's own
    (50 s of work at 4.4 instead of 1) and 400 x 3.6 / 8 = 180 sharing's. a does the same
    until 400, then its last 50 s of work alone at 4.4 (another 170 of its own)."""
    fabric = Fabric(generate(blocks=1, racks=1, hosts=2, gpus=8))
    jobs = [job("a", 0, 100, 4, pods=2), job("b", 0, 50, 4, pods=2)]
    config = SimConfig(comm_share=CommShare(low=0.2, high=0.2))
    m = field_metrics(Simulation(fabric, jobs, "least-allocated", config).run())
    assert m["gpu_hours_lost_alone"] == pytest.approx(4 * (170 + 170 + 170) / 3600)
    assert m["gpu_hours_lost_shared"] == pytest.approx(4 * (180 + 180) / 3600)
    assert m["gpu_hours_lost"] == pytest.approx(
        m["gpu_hours_lost_alone"] + m["gpu_hours_lost_shared"]
    )


def test_the_oracle_row_equals_the_non_blocking_profile_where_no_ring_shares():
    """Whole-host gangs on a non-blocking fabric never fill a link (a ring is one NIC's worth
    through links of hosts x NIC), so every job runs at its compact rate: the same starts and
    finishes as the oracle, which shares nothing by construction. The oversubscribed profile
    on spines of two hosts does slow some."""
    rng = random.Random(3)
    fabric = Fabric(generate(blocks=2, racks=2, hosts=2, gpus=8))
    jobs = [
        job(f"j{i}", rng.uniform(0, 2000), rng.uniform(50, 500), rng.choice([8, 16, 24, 32]))
        for i in range(80)
    ]
    finish = {}
    for name in (ProfileName.NON_BLOCKING, ProfileName.ORACLE, ProfileName.OVERSUBSCRIBED):
        config = SimConfig(fabric=FabricProfile(name=name))
        result = Simulation(
            fabric, sorted(jobs, key=lambda j: j.submit_s), "kueue-best-fit", config
        ).run()
        finish[name] = {s.job.id: s.finish for s in result.jobs}
    assert finish[ProfileName.NON_BLOCKING] == pytest.approx(finish[ProfileName.ORACLE])
    assert finish[ProfileName.OVERSUBSCRIBED] != pytest.approx(finish[ProfileName.ORACLE])


def test_effective_utilisation_counts_work_not_slowed_time():
    """Two hosts, 16 GPUs. a (a 2-pod ring off NVLink) runs alone over the window 0..10 (b
    arrives at 10) at stretch 0.8 + 0.2 x 900/50 = 4.4: it holds 4 GPUs but does 1/4.4 s of
    work per second, so effective utilisation is 4 x 10 / 4.4 over 16 x 10, where busy
    GPU-time would say 4 / 16."""
    fabric = Fabric(generate(blocks=1, racks=1, hosts=2, gpus=8))
    jobs = [job("a", 0, 100, 4, pods=2), job("b", 10, 50, 4, pods=2)]
    config = SimConfig(comm_share=CommShare(low=0.2, high=0.2))
    m = field_metrics(Simulation(fabric, jobs, "least-allocated", config).run())
    # a alone 0..10 at stretch 4.4 (0.8 + 0.2 x 900/50): 4 GPUs x 10 s / 4.4 of work
    assert m["utilisation_steady"] == pytest.approx(4 * 10 / 4.4 / (16 * 10))
