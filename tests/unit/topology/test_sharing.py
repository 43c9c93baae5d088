"""Sharing by demand (topology/sharing.py) on cases computed by hand (issue 34's list); the
loads of each parallel shape (topology/loads.py) against routing every flow (traffic.py)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from scheduler.model import ParallelShape
from scheduler.model.topology import HostSpec, Tier, TopologySpec
from scheduler.topology import Fabric
from scheduler.topology.links import Links, Port, Resource, Wires
from scheduler.topology.loads import compact_seconds, job_load
from scheduler.topology.sharing import Sharing, stretch
from scheduler.topology.traffic import (
    Dispatch,
    Gpu,
    Model,
    StepBytes,
    Traffic,
    flows,
    groups,
    step_bytes,
)

Job = tuple[ParallelShape, StepBytes, list[Gpu]]

RACK, SPINE, CORE = Tier.RACK, Tier.BLOCK, Tier.BLOCK + 1
FLAT = {RACK: 1.0, SPINE: 1.0, CORE: 1.0}


def fabric(spines: int, racks: int, hosts: int, gpus: int, nvlink: bool = False) -> Fabric:
    """hosts h<s><r><i>; with `nvlink`, each rack is one NVLink domain (an NVL72 rack)."""
    out = []
    for s in range(spines):
        for r in range(racks):
            for i in range(hosts):
                domains = {"core": "c0", "spine": f"s{s}", "rack": f"r{r}"}
                domains |= {"nvlink": "nvl"} if nvlink else {}
                out.append(HostSpec(name=f"h{s}{r}{i:02d}", gpus=gpus, domains=domains))
    return Fabric(TopologySpec(hosts=tuple(out)))


def one_gpu_each(hosts: list[int]) -> list[Gpu]:
    return [Gpu(h, 0) for h in hosts]


def ring(hosts: list[int]) -> Job:
    return ParallelShape(dp=len(hosts)), StepBytes(data=1.0), one_gpu_each(hosts)


def all_to_all(gpus: list[Gpu]) -> Job:
    n = len(gpus)
    return ParallelShape(dp=n, ep=n), StepBytes(expert=1.0), gpus


def sharing_of(f: Fabric, links: Links, jobs: dict[int, Job]) -> Sharing:
    wires = Wires(f, links)
    sharing = Sharing(wires)
    for j, (shape, step, gpus) in jobs.items():
        sharing.add(j, job_load(wires, j, shape, step, gpus))
    return sharing


def speeds(f: Fabric, links: Links, jobs: dict[int, Job]) -> dict[int, float]:
    return sharing_of(f, links, jobs).speed


# two spines of 8 one-GPU hosts; the spines' uplinks 3:1
TWO_SPINES = fabric(spines=2, racks=1, hosts=8, gpus=1)
THREE_TO_ONE = Links(oversubscription={RACK: 1.0, SPINE: 3.0, CORE: 1.0})
A = [0, 1, 2, 3, 8, 9, 10, 11]  # 4 | 4 across the spines
B = [4, 5, 6, 7, 12, 13, 14, 15]


def test_two_rings_split_across_3_to_1_spines_are_not_slowed():
    """Each ring leaves each spine once each way: 50 + 50 GB/s on 8 x 50 / 3 = 133."""
    got = speeds(TWO_SPINES, THREE_TO_ONE, {1: ring(A), 2: ring(B)})
    assert got == {1: pytest.approx(1.0), 2: pytest.approx(1.0)}


def test_two_all_to_alls_split_across_3_to_1_spines_share_the_uplink():
    """Each GPU sends 1/8 to each member: 7/8 through its NIC (0.0175 s per GB at 50 GB/s),
    4 x 4 / 8 = 2 GB across the spine, 114.3 GB/s each alone; two on 133.3: 7/12 each. (The
    issue's 2/3 counts half of a NIC's traffic as crossing; the member's own 1/8 stays.)"""
    got = speeds(
        TWO_SPINES, THREE_TO_ONE, {1: all_to_all(one_gpu_each(A)), 2: all_to_all(one_gpu_each(B))}
    )
    assert got == {1: pytest.approx(7 / 12), 2: pytest.approx(7 / 12)}


# one spine, two racks of two one-GPU hosts: each rack's uplink is 2 x 50 GB/s = two paths
TWO_RACKS = fabric(spines=1, racks=2, hosts=2, gpus=1)


def placed(paths: dict[tuple[int, int], int]):
    """A hash that puts flow k of each of job j's connections on paths[j, k]."""
    return lambda _seed, job, _resource, flow, _paths: paths[job, int(flow.rsplit("/", 1)[1])]


@pytest.mark.parametrize(
    ("flows_per_job", "paths", "expected"),
    [
        (1, {(1, 0): 0, (2, 0): 0}, 0.5),  # one path for both: half speed
        (1, {(1, 0): 0, (2, 0): 1}, 1.0),  # one path each: full
        (2, {(1, 0): 0, (1, 1): 1, (2, 0): 0, (2, 1): 1}, 1.0),  # F = 2 spread: full
    ],
)
def test_one_flow_rings_on_an_uplink_of_two_paths(flows_per_job, paths, expected):
    links = Links(
        oversubscription=FLAT,
        ecmp=frozenset({RACK}),
        flows=flows_per_job,
        hash=placed(paths),
    )
    got = speeds(TWO_RACKS, links, {1: ring([0, 2]), 2: ring([1, 3])})
    assert got == {1: pytest.approx(expected), 2: pytest.approx(expected)}


def test_hashed_flows_never_overfill_a_path():
    for seed in range(20):
        links = Links(oversubscription=FLAT, ecmp=frozenset({RACK}), flows=1, seed=seed)
        sharing = sharing_of(TWO_RACKS, links, {1: ring([0, 2]), 2: ring([1, 3])})
        speed = sharing.speed
        assert all(min(abs(s - 0.5), abs(s - 1.0)) < 1e-9 for s in speed.values()), speed
        assert_within_capacity(sharing, speed)


# two GB200 NVL72 racks: 18 trays of 4 GPUs, each rack one NVLink domain
NVL72 = fabric(spines=1, racks=2, hosts=18, gpus=4, nvlink=True)


def trays(first: int, count: int) -> list[Gpu]:
    return [Gpu(h, lane) for h in range(first, first + count) for lane in range(4)]


def test_an_expert_group_split_across_two_nvl72_domains_is_stretched():
    """32 GPUs 16 | 16: each sends 15/32 over NVLink and 16/32 through its NIC, 0.01 s per GB
    against 31/32 / 900 compact: 9.29x the communication; at a share of 0.2, 2.66x the step."""
    job = all_to_all(trays(0, 4) + trays(18, 4))
    sharing = sharing_of(NVL72, Links(oversubscription=FLAT), {1: job})
    actual = sharing.comm_seconds(1)
    compact = compact_seconds(sharing.wires.links, *job[:2], host_gpus=4, domain_gpus=72)
    assert actual == pytest.approx(16 / 32 / 50)
    assert compact == pytest.approx(31 / 32 / 900)
    assert stretch(0.2, compact, actual) == pytest.approx(0.8 + 0.2 * 16 * 900 / (31 * 50))
    assert stretch(0.2, compact, actual) == pytest.approx(2.66, abs=0.005)


def test_a_data_parallel_job_across_the_trays_of_one_nvl72_is_not_stretched():
    job = (ParallelShape(dp=64), StepBytes(data=1.0), trays(0, 16))
    sharing = sharing_of(NVL72, Links(oversubscription=FLAT), {1: job})
    actual = sharing.comm_seconds(1)
    compact = compact_seconds(sharing.wires.links, *job[:2], host_gpus=4, domain_gpus=72)
    assert stretch(0.2, compact, actual) == 1.0


# three 8-GPU hosts in one rack, each its own NVLink domain
HGX = fabric(spines=1, racks=1, hosts=3, gpus=8)


def tp4_dp2(first: Gpu, second: Gpu) -> Job:
    """TP 4 inside each pod, DP 2 between the pods: four rings, one per TP position."""
    gpus = [Gpu(first.host, first.lane + t) for t in range(4)]
    gpus += [Gpu(second.host, second.lane + t) for t in range(4)]
    return ParallelShape(dp=2, tp=4), StepBytes(tensor=1.0, data=1.0), gpus


@pytest.mark.parametrize(("per_gpu_nic", "expected"), [(True, 1.0), (False, 7 / 12)])
def test_two_4_gpu_pods_of_two_jobs_on_one_host(per_gpu_nic, expected):
    """With a NIC per GPU the two pods' rings leave by different NICs; with one 400 GB/s NIC
    per host they share it. Alone, a job's step is its TP ring on NVLink (1.5 GB per port at
    900 GB/s) then its DP rings (4 GB out of host 0's NIC at 400 GB/s): 1/600 + 1/100 s, so it
    asks 4 GB / (7/600 s) = 342.9 GB/s of the NIC on average; two share 400: 7/12 each."""
    nic = 50.0 if per_gpu_nic else 400.0
    links = Links(oversubscription=FLAT, per_gpu_nic=per_gpu_nic, nic_gbps=nic)
    jobs = {1: tp4_dp2(Gpu(0, 0), Gpu(1, 0)), 2: tp4_dp2(Gpu(0, 4), Gpu(2, 0))}
    assert speeds(HGX, links, jobs) == {1: pytest.approx(expected), 2: pytest.approx(expected)}


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([0, 2], [1, 3], 0.5),  # ranks A1, B1 | A2, B2: both rings cross the racks' uplinks
        ([0, 1], [2, 3], 1.0),  # A1, A2 | B1, B2: neither does
    ],
)
def test_rank_order_over_a_2_to_1_rack_uplink(a, b, expected):
    links = Links(oversubscription={RACK: 2.0, SPINE: 1.0, CORE: 1.0})
    got = speeds(TWO_RACKS, links, {1: ring(a), 2: ring(b)})
    assert got == {1: pytest.approx(expected), 2: pytest.approx(expected)}


# rails: one spine, two racks (scalable units) of two 2-GPU hosts, racks' uplinks 2:1: 100 GB/s
# out of a rack, 50 GB/s on each of its two rails
RAIL_SU = fabric(spines=1, racks=2, hosts=2, gpus=2)
TWO_TO_ONE = {RACK: 2.0, SPINE: 1.0, CORE: 1.0}


def lane_ring(lane: int, hosts: list[int]) -> Job:
    return ParallelShape(dp=len(hosts)), StepBytes(data=1.0), [Gpu(h, lane) for h in hosts]


@pytest.mark.parametrize(
    ("rails", "lanes", "expected"),
    [
        (False, (0, 0), 1.0),  # 2 GB each way on the rack's 100 GB/s: as fast as each NIC
        (True, (0, 0), 0.5),  # both on rail 0's 50 GB/s
        (True, (0, 1), 1.0),  # a rail each
    ],
)
def test_rings_across_scalable_units_share_a_rail_only_on_the_same_lane(rails, lanes, expected):
    links = Links(oversubscription=TWO_TO_ONE, rails=rails)
    jobs = {1: lane_ring(lanes[0], [0, 2]), 2: lane_ring(lanes[1], [1, 3])}
    assert speeds(RAIL_SU, links, jobs) == {1: pytest.approx(expected), 2: pytest.approx(expected)}


def test_a_flow_between_lanes_crosses_nvlink_to_the_destination_rail_first():
    """PXN: lane 0 of host 0 to lane 1 of host 2 leaves by host 0's lane-1 NIC, on rail 1."""
    wires = Wires(RAIL_SU, Links(rails=True))
    assert wires.route(Gpu(0, 0), Gpu(2, 1)) == [
        Resource(Port.NVLINK, 0, 0, 0, True),
        Resource(Port.NVLINK, 0, 0, 1, False),
        Resource(Port.NIC, 0, 0, 1, True),
        Resource(Port.NIC, 0, 2, 1, False),
        Resource(Port.UPLINK, RACK, 0, 1, True),
        Resource(Port.UPLINK, RACK, 1, 1, False),
    ]
    # a rail's uplink: its lane's NICs below it, 2 x 50 GB/s (the rack's 200 over two rails)
    assert wires.capacity(Resource(Port.UPLINK, RACK, 0, 1, True)) == pytest.approx(100.0)
    plain = Wires(RAIL_SU, Links())
    assert plain.route(Gpu(0, 0), Gpu(2, 1))[0] == Resource(Port.NIC, 0, 0, 0, True)


def test_rails_are_refused_on_hosts_of_different_sizes_or_one_nic_per_host():
    mixed = Fabric(
        TopologySpec(
            hosts=(
                HostSpec(name="a", gpus=8, domains={"rack": "r0", "spine": "s0", "core": "c"}),
                HostSpec(name="b", gpus=4, domains={"rack": "r0", "spine": "s0", "core": "c"}),
            )
        )
    )
    with pytest.raises(ValueError, match="rails need"):
        Wires(mixed, Links(rails=True))
    with pytest.raises(ValueError, match="rails need"):
        Wires(RAIL_SU, Links(rails=True, per_gpu_nic=False))


def assert_within_capacity(sharing: Sharing, speed: dict[int, float]) -> None:
    used: dict[Resource, float] = {}
    for j, job in sharing.jobs.items():
        for r in job.load:
            used[r] = used.get(r, 0.0) + speed[j] * job.rate(r)
    for r, rate in used.items():
        assert rate <= sharing.wires.capacity(r) * (1 + 1e-9), r


def random_jobs(
    rng: random.Random, f: Fabric, lanes: int, dispatched: bool = False
) -> dict[int, Job]:
    free = [Gpu(h, lane) for h in range(len(f.hosts)) for lane in range(lanes)]
    rng.shuffle(free)
    jobs: dict[int, Job] = {}
    for j in range(rng.randint(1, 4)):
        shape = rng.choice(
            [
                ParallelShape(dp=4),
                ParallelShape(dp=4, ep=4),
                ParallelShape(dp=2, tp=2, ep=2),
                ParallelShape(dp=2, pp=2, ep=2),
            ]
        )
        gpus, free = free[: shape.gpus], free[shape.gpus :]
        step = StepBytes(tensor=0.5, expert=1.0, pipeline=0.3, data=2.0)
        if dispatched:  # node-limited expert routing (traffic.Dispatch)
            limit = rng.choice([Dispatch(2, 1), Dispatch(4, 2), Dispatch(8, 4)])
            step = dataclasses.replace(step, dispatch=limit)
        jobs[j] = (shape, step, sorted(gpus) if rng.random() < 0.5 else gpus)
    return jobs


@pytest.mark.parametrize("seed", range(30))
def test_random_jobs_never_overfill_a_resource_and_a_lone_job_runs_at_full_speed(seed):
    rng = random.Random(seed)
    f = fabric(spines=2, racks=2, hosts=3, gpus=4)
    links = Links(
        oversubscription={RACK: rng.choice([1.0, 2.0]), SPINE: rng.choice([1.0, 3.0]), CORE: 1.0},
        ecmp=frozenset({RACK}) if rng.random() < 0.5 else frozenset(),
        flows=rng.choice([1, 2, 4]),
        per_gpu_nic=(nic := rng.random() < 0.5),
        seed=seed,
        rails=nic and rng.random() < 0.5,
    )
    jobs = random_jobs(rng, f, lanes=4)
    sharing = sharing_of(f, links, jobs)
    assert all(0 < s <= 1 + 1e-12 for s in sharing.speed.values())
    assert_within_capacity(sharing, sharing.speed)
    assert sharing_of(f, links, {0: jobs[0]}).speed == {0: pytest.approx(1.0)}
    # stopping a job moves only its neighbours, to where a fresh start would put them
    sharing.remove(0)
    fresh = sharing_of(f, links, {j: job for j, job in jobs.items() if j})
    assert sharing.speed == pytest.approx(fresh.speed)


@pytest.mark.parametrize("dispatched", [False, True])
@pytest.mark.parametrize("seed", range(30))
def test_loads_are_those_of_routing_every_flow(seed, dispatched):
    rng = random.Random(seed)
    f = fabric(spines=2, racks=2, hosts=3, gpus=4, nvlink=rng.random() < 0.3)
    nic = rng.random() < 0.5
    wires = Wires(f, Links(per_gpu_nic=nic, rails=nic and rng.random() < 0.5))
    for j, (shape, step, gpus) in random_jobs(rng, f, 4, dispatched).items():
        routed: dict[Resource, float] = {}
        for flow in flows(shape, step, gpus, wires.nvlink_domain):
            for r in wires.route(flow.src, flow.dst):
                routed[r] = routed.get(r, 0.0) + flow.gb
        assert job_load(wires, j, shape, step, gpus).total == pytest.approx(routed)


def test_each_class_sends_what_its_collective_sends():
    shape = ParallelShape(dp=4, tp=2, pp=2, ep=2)
    gpus = [Gpu(r, 0) for r in range(shape.gpus)]
    step = StepBytes(tensor=1.0, expert=1.0, pipeline=1.0, data=1.0)
    sent: dict[Traffic, float] = {}
    for f in flows(shape, step, gpus):
        sent[f.traffic] = sent.get(f.traffic, 0.0) + f.gb
    # per GPU: ring 2 (k - 1) / k, all-to-all (k - 1) / k, pipeline 1 each way per boundary
    assert sent[Traffic.TENSOR] == pytest.approx(16 * 2 * 1 / 2)
    assert sent[Traffic.DATA] == pytest.approx(16 * 2 * 3 / 4)
    assert sent[Traffic.EXPERT] == pytest.approx(16 * 1 / 2)
    assert sent[Traffic.PIPELINE] == pytest.approx(8 * 2)


def test_ranks_are_ordered_tp_then_ep_then_pp_then_dp():
    shape = ParallelShape(dp=4, tp=2, pp=2, ep=2)
    assert groups(shape, Traffic.TENSOR)[0] == [0, 1]
    assert groups(shape, Traffic.EXPERT)[0] == [0, 2]
    assert groups(shape, Traffic.PIPELINE)[0] == [0, 4]
    assert groups(shape, Traffic.DATA)[0] == [0, 2, 8, 10]


def test_an_expert_width_that_does_not_divide_data_parallelism_is_refused():
    with pytest.raises(ValueError, match="ep=3 must divide dp=4"):
        ParallelShape(dp=4, ep=3)


def test_step_bytes_follow_the_model_and_the_shape():
    model = Model(params_b=8.0, hidden=4096, layers=32, seq=8192, micro_batch=1, micro_batches=8)
    dense = step_bytes(model, ParallelShape(dp=8, tp=8, pp=4))
    act = 8192 * 4096 * 2 / 1e9
    assert dense.tensor == pytest.approx(4 * 8 * act * 8)
    # Megatron-LM's scatter/gather: each of the 8 TP ranks sends 1/8 of the activation
    assert dense.pipeline == pytest.approx(act * 8 / 8)
    assert step_bytes(model, ParallelShape(dp=8, tp=1, pp=4)).pipeline == pytest.approx(act * 8)
    assert dense.data == pytest.approx(8e9 * 2 / 32 / 1e9)
    assert dense.expert == 0.0
    moe = model.model_copy(update={"moe_share": 1.0, "topk": 8})
    assert step_bytes(moe, ParallelShape(dp=8, ep=8)).expert == pytest.approx(4 * 32 * 8 * act * 8)


def test_the_compact_reference_keeps_expert_groups_whole_in_nvlink_domains():
    """256 GPUs in EP groups of 32 on NVL72 domains: compact holds two whole groups per domain
    (64 of its 72 GPUs), so every group is at NVLink rate; a placement that splits groups is
    measured against that."""
    links = Links(oversubscription=FLAT)
    shape = ParallelShape(dp=256, ep=32)
    compact = compact_seconds(links, shape, StepBytes(expert=1.0), host_gpus=4, domain_gpus=72)
    assert compact == pytest.approx(31 / 32 / 900)


def test_flows_land_on_paths_as_random_draws_would_even_on_a_power_of_two():
    """32 flows (4 jobs x 8) over 128 paths: C(32, 2) / 128 = 3.9 colliding pairs on average.
    A CRC-32 hash (linear) put them on distinct paths every time; the mean over seeds must be
    near the random draw's."""
    from scheduler.topology.links import Port, Resource, flow_hash

    uplink = Resource(Port.UPLINK, int(RACK), 0, 0, True)
    pairs = []
    for seed in range(300):
        taken = [flow_hash(seed, job, uplink, f, 128) for job in range(4) for f in range(8)]
        pairs.append(sum(taken.count(p) * (taken.count(p) - 1) // 2 for p in set(taken)))
    assert 3.3 < sum(pairs) / len(pairs) < 4.5


def test_overlap_hides_communication_in_a_window_that_slower_communication_overflows():
    """Compute 0.8 and communication 0.4 at the compact time, half of it hidden: a step of 1.0,
    0.2 exposed (share 0.2). Communication twice as slow takes 0.8, of which 0.2 still hides:
    a step of 1.4. With nothing hidden the same share stretches by 1.2."""
    assert stretch(0.2, 1.0, 2.0, overlap=0.5) == pytest.approx(1.4)
    assert stretch(0.2, 1.0, 2.0) == pytest.approx(1.2)
    assert stretch(0.2, 1.0, 1.0, overlap=0.5) == 1.0
