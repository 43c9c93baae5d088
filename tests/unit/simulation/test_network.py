"""The fabric model, computed by hand: NIC-rate rings, links provisioned by the profile, max-min
fair sharing, ECMP, and what sharing does to job times."""

from __future__ import annotations

import pytest

from scheduler.model import HostSpec, TopologySpec
from scheduler.model.gang import ParallelShape
from scheduler.model.training import Model
from scheduler.simulation.config import SimConfig
from scheduler.simulation.engine import Simulation
from scheduler.simulation.network import Network
from scheduler.simulation.profiles import CommShare, FabricProfile, ProfileName, ecmp_capacity
from scheduler.simulation.slowdown import uncontended_gbps
from scheduler.simulation.trace import TraceJob
from scheduler.topology import Fabric, generate

NIC = 1  # level index of the hosts' NICs (the NVLink level's uplink)
SPINE = 3
OVER = FabricProfile(name=ProfileName.OVERSUBSCRIBED)
FLAT = FabricProfile(name=ProfileName.NON_BLOCKING)


def two_spines(hosts: int) -> Fabric:
    """Two spines of one rack each, `hosts` hosts per rack (8 GPUs, NIC 50 GB/s)."""
    return Fabric(generate(blocks=2, racks=1, hosts=hosts, gpus=8))


def spine_ring(fabric: Fabric, a: int, b: int) -> list[int]:
    """Host a of spine 0 and host b of spine 1 (generate numbers hosts spine by spine)."""
    per = len(fabric.hosts) // 2
    return [a, per + b]


def test_a_lone_ring_crossing_spines_runs_at_the_nic_rate():
    """3 hosts per spine at 3:1: the spine uplink carries 3 x 50 / 3 = 50 GB/s, all a lone ring
    can use; it is not slowed (the old model charged it the oversubscribed rate)."""
    fabric = two_spines(3)
    net = Network(fabric, OVER)
    hosts = spine_ring(fabric, 0, 0)
    links = net.crossed(hosts)
    assert (SPINE, 0) in links
    assert (SPINE, 1) in links
    assert net.full_capacity((SPINE, 0)) == pytest.approx(50.0)
    net.start(1, uncontended_gbps(fabric, hosts), links)
    assert net.rates[1] == pytest.approx(50.0)


def test_two_rings_sharing_a_spine_uplink_at_3_to_1_get_half_each():
    """Two rings over disjoint hosts cross the same 50 GB/s spine uplinks: 25 each; on the
    non-blocking profile (150 GB/s) both run at the NIC rate; when one ends the other recovers."""
    fabric = two_spines(3)
    for profile, each in ((OVER, 25.0), (FLAT, 50.0)):
        net = Network(fabric, profile)
        a, b = spine_ring(fabric, 0, 0), spine_ring(fabric, 1, 1)
        net.start(1, 50.0, net.crossed(a))
        assert net.start(2, 50.0, net.crossed(b)) == {1, 2}
        assert net.rates == pytest.approx({1: each, 2: each})
        assert net.stop(2) == {1}
        assert net.rates == pytest.approx({1: 50.0})


def test_sub_host_pods_of_two_jobs_share_the_host_nic():
    """Two hosts in one rack: two rings over both hosts (4-GPU pods beside each other) share
    each host's 50 GB/s NIC: 25 each."""
    net = Network(Fabric(generate(blocks=1, racks=1, hosts=2, gpus=8)), OVER)
    links = net.crossed([0, 1])
    assert links == ((NIC, 0), (NIC, 1))
    net.start(1, 50.0, links)
    net.start(2, 50.0, links)
    assert net.rates == {1: 25.0, 2: 25.0}


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


def test_link_capacity_counts_hosts_and_the_profile_oversubscription():
    hosts = tuple(
        HostSpec(name=f"h{r}{i}", gpus=8, domains={"rack": f"r{r}", "spine": "s"})
        for r in range(2)
        for i in range(3)
    )
    fabric = Fabric(TopologySpec(hosts=hosts))
    rack = (2, fabric.domain[2][0])
    spine = (3, 0)
    # the topology's defaults: rack 1:1, spine 2:1
    topology = Network(fabric, FabricProfile(name=ProfileName.TOPOLOGY))
    assert topology.full_capacity(rack) == pytest.approx(3 * 50.0)
    assert topology.full_capacity(spine) == pytest.approx(6 * 50.0 / 2)
    assert Network(fabric, OVER).full_capacity(rack) == pytest.approx(3 * 50.0)
    assert Network(fabric, OVER).full_capacity(spine) == pytest.approx(6 * 50.0 / 3)
    assert Network(fabric, FLAT).full_capacity(spine) == pytest.approx(6 * 50.0)


def test_ecmp_collisions_take_expected_occupied_paths():
    """150 GB/s = 3 paths of 50: one flow gets 50; two flows occupy 3 (1 - (2/3)^2) = 5/3 paths
    on average, 83.3 GB/s for both; the level's flows hash, others do not."""
    assert ecmp_capacity(150.0, 50.0, 1) == 150.0
    assert ecmp_capacity(150.0, 50.0, 2) == pytest.approx(50.0 * 5 / 3)
    fabric = two_spines(9)  # spine uplink 9 x 50 / 3 = 150
    net = Network(fabric, FabricProfile(name=ProfileName.OVERSUBSCRIBED, ecmp=("spine",)))
    a, b = spine_ring(fabric, 0, 0), spine_ring(fabric, 1, 1)
    net.start(1, 50.0, net.crossed(a))
    assert net.rates[1] == pytest.approx(50.0)
    net.start(2, 50.0, net.crossed(b))
    assert net.rates == pytest.approx({1: 50.0 * 5 / 6, 2: 50.0 * 5 / 6})


def test_contention_stretches_and_releases_job_times():
    """least-allocated spreads both 2-pod jobs over the two hosts, so both rings cross both
    NICs. Compact reference: 4 GPUs fit in a host (NVLink, 900 GB/s); share 0.2.
    Alone: stretch 0.8 + 0.2 * 900/50 = 4.4. Together: 25 GB/s each, stretch 8.0.
    b (50 s of work) ends at 50 * 8 = 400; a has done 400/8 = 50 of its 100 by then and runs
    the rest alone: 400 + 50 * 4.4 = 620. On the oracle fabric both run at the compact rate."""
    fabric = Fabric(generate(blocks=1, racks=1, hosts=2, gpus=8))
    jobs = [
        TraceJob(id="a", submit_s=0, duration_s=100, gpus=4, pods=2),
        TraceJob(id="b", submit_s=0, duration_s=50, gpus=4, pods=2),
    ]
    share = CommShare(low=0.2, high=0.2)
    done = Simulation(fabric, jobs, "least-allocated", SimConfig(comm_share=share)).run()
    finish = {s.job.id: s.finish for s in done.jobs}
    assert finish["b"] == pytest.approx(400)
    assert finish["a"] == pytest.approx(620)
    assert {s.job.id: s.contended_s for s in done.jobs} == pytest.approx({"a": 400, "b": 400})
    oracle = SimConfig(comm_share=share, fabric=FabricProfile(name=ProfileName.ORACLE))
    alone = Simulation(fabric, jobs, "least-allocated", oracle).run()
    assert {s.job.id: s.finish for s in alone.jobs} == pytest.approx({"a": 100, "b": 50})


def test_comm_share_is_drawn_per_job_and_seed_in_its_range():
    share = CommShare()
    draws = [share.draw(f"j{i}", 16, 0) for i in range(200)]
    assert all(0.1 <= d <= 0.6 for d in draws)
    assert len(set(draws)) == 200
    assert share.draw("j0", 16, 0) == draws[0]  # every policy of a seed sees the same
    assert share.draw("j0", 16, 1) != draws[0]
    assert share.draw("j0", 1, 0) == 0.0  # one GPU does not communicate


@pytest.mark.parametrize(
    ("per_gpu_nic", "finish"),
    [(True, {"a": 200, "b": 100}), (False, {"a": 440, "b": 280})],
)
def test_the_demand_model_stretches_by_what_each_job_sends(per_gpu_nic, finish):
    """The same two 2-pod jobs under the demand model (topology/sharing.py). Each is data
    parallel over 4 GPUs, 2 per host: a ring of 2 inside each host (1 GB per GPU over NVLink)
    and a ring per GPU position across the hosts with half the message (0.5 GB per GPU through
    its NIC). Compact: 4 GPUs in one host, a ring of 4 over NVLink, 1.5 GB / 900 GB/s.
    A NIC per GPU: 0.5 / 50 = 0.01 s, 6x compact, stretch 0.8 + 0.2 x 6 = 2.0; the two jobs'
    GPUs are on different lanes, so neither slows the other. One 50 GB/s NIC per host: alone
    1 / 50 = 0.02 s (12x, stretch 3.2), together half each (24x, stretch 5.6): b ends at
    50 x 5.6 = 280, a has done 50 by then and runs the rest alone: 280 + 50 x 3.2 = 440."""
    fabric = Fabric(generate(blocks=1, racks=1, hosts=2, gpus=8))
    jobs = [
        TraceJob(id="a", submit_s=0, duration_s=100, gpus=4, pods=2),
        TraceJob(id="b", submit_s=0, duration_s=50, gpus=4, pods=2),
    ]
    share = CommShare(low=0.2, high=0.2)
    profile = FabricProfile(
        name=ProfileName.NON_BLOCKING, sharing="demand", per_gpu_nic=per_gpu_nic
    )
    done = Simulation(fabric, jobs, "least-allocated", SimConfig(comm_share=share, fabric=profile))
    assert {s.job.id: s.finish for s in done.run().jobs} == pytest.approx(finish)
    oracle = profile.model_copy(update={"name": ProfileName.ORACLE})
    alone = Simulation(fabric, jobs, "least-allocated", SimConfig(comm_share=share, fabric=oracle))
    assert {s.job.id: s.finish for s in alone.run().jobs} == pytest.approx({"a": 100, "b": 50})


@pytest.mark.parametrize(
    ("sharing", "finish"),
    [("rings", {"a": 440, "b": 220}), ("demand", {"a": 320, "b": 160})],
)
def test_with_the_fabric_to_itself_each_job_keeps_its_lone_stretch(sharing, finish):
    """The same two jobs sharing their hosts' NICs, each given the fabric to itself
    (`alone`): neither slows the other, each still pays its own placement. Ring model: alone
    4.4 (test_contention_stretches_and_releases_job_times), a 100 x 4.4, b 50 x 4.4. Demand
    model with one NIC per host: alone 3.2 (above), a 320, b 160."""
    fabric = Fabric(generate(blocks=1, racks=1, hosts=2, gpus=8))
    jobs = [
        TraceJob(id="a", submit_s=0, duration_s=100, gpus=4, pods=2),
        TraceJob(id="b", submit_s=0, duration_s=50, gpus=4, pods=2),
    ]
    profile = FabricProfile(
        name=ProfileName.NON_BLOCKING, sharing=sharing, per_gpu_nic=False, alone=True
    )
    config = SimConfig(comm_share=CommShare(low=0.2, high=0.2), fabric=profile)
    done = Simulation(fabric, jobs, "least-allocated", config).run()
    assert {s.job.id: s.finish for s in done.jobs} == pytest.approx(finish)
    assert all(s.contended_s == 0 and s.shared_lost_gpu_s == 0 for s in done.jobs)


@pytest.mark.parametrize(("overlap", "finish"), [(0.0, 100 * (1 + 5 / 5.5)), (0.5, 200.0)])
def test_a_models_overlap_hides_communication_until_it_slows(overlap, finish):
    """One 4-GPU data-parallel job of a 0.3B model (0.6 GB of gradients per GPU), 2 pods on two
    hosts with a NIC per GPU. Compact (one host, a ring of 4 over NVLink): 1.5 x 0.6 / 900 =
    0.001 s; split, each GPU position's ring carries 0.3 GB through its NIC: 0.006 s. Compute:
    6 x 0.3e9 x 1,000 tokens / 4e14 = 0.0045 s. Nothing hidden: a step of 0.0055 becomes 0.0105
    (x 1.909). Half hidden: a compact step of 0.0045 + 0.0005 = 0.005; split, 0.006 less the
    0.0005 still hidden, a step of 0.01 (x 2)."""
    fabric = Fabric(generate(blocks=1, racks=1, hosts=2, gpus=8))
    model = Model(params_b=0.3, hidden=1, layers=1, seq=1000, overlap=overlap)
    job = TraceJob(
        id="a", submit_s=0, duration_s=100, gpus=4, pods=2, shape=ParallelShape(dp=4), model=model
    )
    profile = FabricProfile(name=ProfileName.NON_BLOCKING, sharing="demand")
    done = Simulation(fabric, [job], "least-allocated", SimConfig(fabric=profile)).run()
    assert done.jobs[0].finish == pytest.approx(finish)


@pytest.mark.parametrize(
    ("rails", "finish"), [(False, {"a": 620, "b": 400}), (True, {"a": 2960, "b": 1480})]
)
def test_rails_carry_each_lane_on_its_own_rail_uplink(rails, finish):
    """Two racks of one 8-GPU host, the rack uplink 8:1 (50 GB/s); two 2-GPU data-parallel jobs,
    one pod on each host, a on lane 0 and b on lane 1. A ring of 2 sends 1 GB per GPU per step:
    compact over NVLink 1 / 900 s; through a 50 GB/s NIC 18x, stretch 0.8 + 0.2 x 18 = 4.4.
    Without rails both share the rack's 50 GB/s: 36x, stretch 8.0; b ends at 50 x 8 = 400, a has
    done 50 by then and ends at 400 + 50 x 4.4 = 620. On rails each lane has its own rail
    switch's uplink, an eighth of the rack's (6.25 GB/s): 144x, stretch 29.6, apart."""
    fabric = Fabric(generate(blocks=1, racks=2, hosts=1, gpus=8))
    jobs = [
        TraceJob(id="a", submit_s=0, duration_s=100, gpus=2, pods=2),
        TraceJob(id="b", submit_s=0, duration_s=50, gpus=2, pods=2),
    ]
    profile = FabricProfile(
        name=ProfileName.NON_BLOCKING, sharing="demand", ratios={"rack": 8}, rails=rails
    )
    config = SimConfig(comm_share=CommShare(low=0.2, high=0.2), fabric=profile)
    done = Simulation(fabric, jobs, "least-allocated", config).run()
    assert {s.job.id: s.finish for s in done.jobs} == pytest.approx(finish)
