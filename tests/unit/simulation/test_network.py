"""Shared uplinks, computed by hand: max-min fair water-filling, and what it does to job times."""

from __future__ import annotations

import pytest

from scheduler.model import HostSpec, TopologySpec
from scheduler.simulation.config import SimConfig
from scheduler.simulation.engine import Simulation
from scheduler.simulation.network import Network
from scheduler.simulation.trace import TraceJob
from scheduler.topology import Fabric, generate

NIC = 1  # level index of the hosts' NICs (the NVLink level's uplink)


def test_one_job_alone_runs_at_its_uncontended_rate():
    net = Network(Fabric(generate(blocks=1, racks=2, hosts=1, gpus=8)))
    links = net.crossed([0, 1])
    assert (NIC, 0) in links
    assert (2, 0) in links  # the two racks' uplinks
    net.start(1, 50.0, links)
    assert net.rates[1] == 50.0


def test_two_jobs_sharing_nics_split_them_evenly_and_recover():
    """Two hosts, one rack: each NIC carries 50 GB/s; two rings over both hosts get 25 each."""
    net = Network(Fabric(generate(blocks=1, racks=1, hosts=2, gpus=8)))
    links = net.crossed([0, 1])
    assert links == ((NIC, 0), (NIC, 1))
    net.start(1, 50.0, links)
    assert net.start(2, 50.0, links) == {1, 2}
    assert net.rates == {1: 25.0, 2: 25.0}
    assert net.stop(2) == {1}
    assert net.rates == {1: 50.0}


def test_max_min_fairness_gives_the_leftover_to_the_unconstrained():
    """Job 1 is capped at 10; jobs 2 and 3 share the rest of a 50 GB/s NIC: 20 each."""
    net = Network(Fabric(generate(blocks=1, racks=1, hosts=2, gpus=8)))
    links = net.crossed([0, 1])
    net.start(1, 10.0, links)
    net.start(2, 50.0, links)
    net.start(3, 50.0, links)
    assert net.rates[1] == pytest.approx(10.0)
    assert net.rates[2] == pytest.approx(20.0)
    assert net.rates[3] == pytest.approx(20.0)


def test_uplink_capacity_counts_hosts_and_oversubscription():
    hosts = tuple(
        HostSpec(name=f"h{r}{i}", gpus=8, domains={"rack": f"r{r}", "spine": "s"})
        for r in range(2)
        for i in range(3)
    )
    fabric = Fabric(TopologySpec(hosts=hosts))
    net = Network(fabric)
    rack = (2, fabric.domain[2][0])
    assert net.capacity(rack) == pytest.approx(3 * fabric.gbps[2])


def test_contention_stretches_and_releases_job_times():
    """least-allocated spreads both 2-pod jobs over the two hosts, so both rings cross both
    NICs. Compact reference: 4 GPUs fit in a host (NVLink, 900 GB/s); share 0.2.
    Alone: stretch 0.8 + 0.2 * 900/50 = 4.4. Together: 25 GB/s each, stretch 8.0.
    b (50 s of work) ends at 50 * 8 = 400; a has done 400/8 = 50 of its 100 by then and runs
    the rest alone: 400 + 50 * 4.4 = 620."""
    fabric = Fabric(generate(blocks=1, racks=1, hosts=2, gpus=8))
    jobs = [
        TraceJob(id="a", submit_s=0, duration_s=100, gpus=4, pods=2),
        TraceJob(id="b", submit_s=0, duration_s=50, gpus=4, pods=2),
    ]
    done = Simulation(fabric, jobs, "least-allocated", SimConfig()).run()
    finish = {s.job.id: s.finish for s in done.jobs}
    assert finish["b"] == pytest.approx(400)
    assert finish["a"] == pytest.approx(620)
    alone = Simulation(fabric, jobs, "least-allocated", SimConfig(contention=False)).run()
    assert {s.job.id: s.finish for s in alone.jobs} == pytest.approx({"a": 440, "b": 220})


def test_time_metrics_by_hand():
    """The spine-crossing case of test_engine: a 16-GPU gang submitted at 1 runs 1..136 at
    stretch 1.35 on a 32-GPU fabric. Slowdown 135/100; goodput 16*100 / (32 * 135); the
    ring's share of GPU time (1.35 - 0.65) / 1.35."""
    from scheduler.simulation.metrics import policy_metrics

    fabric = Fabric(generate(blocks=2, racks=1, hosts=2, gpus=8))
    sim = Simulation(
        fabric, [TraceJob(id="g", submit_s=1, duration_s=100, gpus=16)], "rackwise", SimConfig()
    )
    sim.snapshot.use("h0-1", 8)
    sim.snapshot.use("h1-1", 8)
    m = policy_metrics(sim.run())
    assert m["multihost_gangs"] == 1
    assert m["slowdown_multihost_mean"] == pytest.approx(1.35)
    assert m["makespan_s"] == pytest.approx(135)
    assert m["goodput"] == pytest.approx(1600 / (32 * 135))
    assert m["comm_share_of_gpu_time"] == pytest.approx(0.70 / 1.35)
    assert m["by_size"]["9-32"]["slowdown_mean"] == pytest.approx(1.35)
    assert m["queue_delay_largest5_p99_s"] == 0
