"""The fabric model's physics, each rule computed by hand (docs/design.md, "Physical
constants"): link rates per accelerator generation, a step's classes one after another, ECMP
flows hashed by their identity and carrying their own pair's bytes, node-limited dispatch to
the same in-domain index, and jobs without a model computing only."""

from __future__ import annotations

import pytest

from scheduler.model import ParallelShape
from scheduler.simulation.config import SimConfig
from scheduler.simulation.engine import state_of
from scheduler.simulation.synthetic import modern_mix
from scheduler.topology import generate
from scheduler.topology.accelerators import RATES, Accelerator, levels
from scheduler.topology.links import Links, Wires
from scheduler.topology.loads import job_load
from scheduler.topology.traffic import Dispatch, Gpu, StepBytes, dispatch_edges
from tests.unit.topology.test_sharing import FLAT, RACK, TWO_RACKS, fabric


@pytest.mark.parametrize(
    ("accelerator", "nvlink", "nic"),
    [("h100", 450.0, 50.0), ("h200", 450.0, 50.0), ("gb200", 900.0, 50.0), ("gb300", 900.0, 100.0)],
)
def test_rates_are_per_gpu_and_per_direction(accelerator, nvlink, nic):
    """NVLink 4's 900 GB/s and NVLink 5's 1.8 TB/s count both directions; a NIC's 400 or 800
    Gb/s is per direction."""
    rates = RATES[Accelerator(accelerator)]
    assert (rates.nvlink_gbps, rates.nic_gbps) == (nvlink, nic)
    spec = generate(blocks=1, racks=1, hosts=2)
    rated = levels(spec.levels, Accelerator(accelerator))
    assert [lv.bandwidth_gbps for lv in rated] == [nvlink] + [nic] * (len(rated) - 1)


def test_a_steps_classes_run_one_after_another():
    """TP 4 inside a host (1.5 GB per NVLink port at 900 GB/s) and a DP ring of 2 hosts per TP
    position (1 GB out of each NIC at 50 GB/s): 1/600 + 1/50 s, not the larger of the two."""
    f = fabric(spines=1, racks=1, hosts=2, gpus=4)
    wires = Wires(f, Links(oversubscription=FLAT))
    gpus = [Gpu(h, lane) for h in range(2) for lane in range(4)]
    step = job_load(wires, 1, ParallelShape(dp=2, tp=4), StepBytes(tensor=1.0, data=1.0), gpus)
    assert step.seconds(wires) == pytest.approx(1.5 / 900 + 1.0 / 50)


def identity_hash(paths_of: dict[str, int]):
    """Puts the flow whose identity is source>destination on paths_of[that]."""

    def choose(_seed, _job, _resource, flow, _paths):
        return paths_of[flow.split("/")[1]]

    return choose


def test_a_hashed_flow_lands_where_its_identity_sends_it_with_its_pairs_bytes():
    """PP 2 across two racks (rack 0's uplink: two paths of 50 GB/s), pairs 0>2 and 1>3 of
    1 GB each: hashed apart, a path each; hashed together, one path carries both (2 GB), the
    other nothing. Every flow carries its own pair's bytes, wherever the others go."""
    # ranks [stage 0, stage 1] x 2 replicas: hosts 0, 1 in rack 0; hosts 2, 3 in rack 1
    gpus = [Gpu(0, 0), Gpu(2, 0), Gpu(1, 0), Gpu(3, 0)]
    shape, step = ParallelShape(dp=2, pp=2), StepBytes(pipeline=1.0)

    def up(paths_of: dict[str, int]) -> dict[int, float]:
        links = Links(oversubscription=FLAT, ecmp=frozenset({RACK}), hash=identity_hash(paths_of))
        load = job_load(Wires(TWO_RACKS, links), 1, shape, step, gpus).total
        return {r.path: gb for r, gb in load.items() if r.level == RACK and r.up and r.domain == 0}

    back = {"2.0>0.0": 0, "3.0>1.0": 0}
    assert up({"0.0>2.0": 0, "1.0>3.0": 1, **back}) == {0: 1.0, 1: 1.0}
    assert up({"0.0>2.0": 1, "1.0>3.0": 1, **back}) == {1: 2.0}


def test_placements_with_as_many_pairs_per_link_draw_their_own_collisions():
    """Flows are hashed by which GPUs they join, so two placements that put the same number of
    pairs on an uplink land on different paths (by index they landed alike)."""
    links = Links(oversubscription=FLAT, ecmp=frozenset({RACK}), seed=3)
    wires = Wires(fabric(spines=1, racks=2, hosts=8, gpus=1), links)
    shape, step = ParallelShape(dp=2), StepBytes(data=1.0)

    def paths(a: int, b: int) -> set[int]:
        load = job_load(wires, 1, shape, step, [Gpu(a, 0), Gpu(b, 0)]).total
        return {r.path for r in load if r.level == RACK}

    assert len({frozenset(paths(a, 8 + a)) for a in range(8)}) > 1


def test_node_limited_dispatch_goes_to_the_same_in_domain_index():
    """EP 16 over two NVLink domains of 2 trays x 4 GPUs: member i of one domain sends to
    member i of the other, so all 8 GPUs there receive (by lane, only the first tray's 4 did)."""
    members = [Gpu(h, lane) for h in range(4) for lane in range(4)]
    edges = dispatch_edges(members, 8.0, Dispatch(topk=8, node_limit=1), lambda h: h // 2)
    received = {b for a, b, _ in edges if a.host < 2}
    assert received == set(members[8:])
    assert all(b == members[8 + members.index(a)] for a, b, _ in edges if a.host < 2)


def test_jobs_without_a_model_in_the_modern_mix_compute_only():
    """Debugging and evaluation jobs state no model: their share is 0 wherever they land."""
    jobs = modern_mix(seed=0, days=0.5, largest=1024)
    debug = [j for j in jobs if j.model is None]
    assert debug
    assert all(j.comm_share == 0.0 for j in debug)
    config = SimConfig()
    assert {state_of(j, 0, 8, config).share for j in debug} == {0.0}
    shaped = next(j for j in jobs if j.model is not None)
    assert shaped.comm_share is None
