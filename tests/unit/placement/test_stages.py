"""Stage-aligned ranks (placement/stages.py): a pipelined gang that spans domains is numbered so
that each domain holds whole stages, the data-parallel rings stay inside domains and only the
pipeline's activations cross; peers number pods by index."""

from __future__ import annotations

from collections import defaultdict

import pytest

from scheduler.model import GangRequest, ParallelShape, PlaceConfig, Slice
from scheduler.model.training import Model
from scheduler.placement import Snapshot, place, stages, stretch, validate
from scheduler.topology import Fabric, generate
from scheduler.topology.links import Port, Wires
from scheduler.topology.loads import job_load
from scheduler.topology.traffic import step_bytes

# 2 spines x 2 racks x 4 hosts of 8 GPUs
FABRIC = Fabric(generate(blocks=2, racks=2, hosts=4, gpus=8))
LLAMA_70B = Model(params_b=70, hidden=8192, layers=80, seq=8192, micro_batches=16)
# TP 8 on each host, 4 stages, 2 replicas: 8 pods, a stage is 2 pods, a replica 4
GANG = GangRequest(
    name="pre", pods=8, gpus_per_pod=8, shape=ParallelShape(dp=2, tp=8, pp=4), model=LLAMA_70B
)


def half_of_each_spine() -> Snapshot:
    """One rack of each spine busy: the gang must take 4 hosts in each spine."""
    snapshot = Snapshot(FABRIC)
    for host in FABRIC.hosts:
        if host.domains["rack"] in {"r0", "r2"}:
            snapshot.use(host.name, 8)
    return snapshot


def by_rank(placement) -> list[str]:
    return [p.host for p in sorted(placement.pods, key=lambda p: p.rank)]


def spine_gb(gang: GangRequest, placement) -> float:
    """GB per step on the uplinks out of the racks into their spines' parents (spine level)."""
    wires = Wires(FABRIC, stretch.links_of(FABRIC))
    gpus = stretch.lanes(FABRIC, gang, placement.pods)
    load = job_load(wires, 0, gang.shape, step_bytes(gang.model, gang.shape), gpus)
    spine = FABRIC.index("spine")
    by: dict[int, float] = defaultdict(float)
    for r, gb in load.total.items():
        if r.port is Port.UPLINK:
            by[r.level] += gb
    return by[spine]


def test_each_spine_holds_whole_stages():
    snapshot = half_of_each_spine()
    [placement] = place(snapshot, [GANG], PlaceConfig())
    validate(snapshot, GANG, placement)
    spine = {h.name: h.domains["spine"] for h in FABRIC.hosts}
    ranks = by_rank(placement)  # rank = (p + 4 d) for one pod per TP group
    stage_spines = [{spine[ranks[p + 4 * d]] for d in range(2)} for p in range(4)]
    assert all(len(s) == 1 for s in stage_spines)  # a stage's data-parallel ranks together
    assert len({*stage_spines[0], *stage_spines[3]}) == 2  # the pipeline crosses, once


def test_fewer_bytes_cross_the_spines_than_with_replicas_contiguous():
    snapshot = half_of_each_spine()
    [staged] = place(snapshot, [GANG], PlaceConfig())
    [indexed] = place(snapshot, [GANG], PlaceConfig.of(policy="kueue-best-fit"))
    assert spine_gb(GANG, staged) < spine_gb(GANG, indexed) / 3


@pytest.mark.parametrize("policy", ["kueue-best-fit", "slurm-tree", "first-fit"])
def test_peers_number_pods_by_index(policy):
    snapshot = half_of_each_spine()
    [placement] = place(snapshot, [GANG], PlaceConfig.of(policy=policy))
    spine = {h.name: h.domains["spine"] for h in FABRIC.hosts}
    ranks = by_rank(placement)
    assert len({spine[h] for h in ranks[:4]}) == 1  # replica 0 inside one spine


def test_a_gang_without_a_model_keeps_its_depth_first_ranks():
    gang = GANG.model_copy(update={"model": None})
    snapshot = half_of_each_spine()
    [placement] = place(snapshot, [gang], PlaceConfig())
    spine = {h.name: h.domains["spine"] for h in FABRIC.hosts}
    assert len({spine[h] for h in by_rank(placement)[:4]}) == 1


def test_blocks_keep_their_pods_consecutive_and_slices_that_divide_them_hold():
    """TP 8 x EP 2 over two pods of 8: a block is two pods, kept together; a slice of 2
    holds."""
    shape = ParallelShape(dp=4, tp=8, pp=2, ep=2)
    gang = GangRequest(name="b", pods=8, gpus_per_pod=8, shape=shape, model=LLAMA_70B,
                       slices=(Slice(level="rack", size=2),))  # fmt: skip
    assert stages.block_pods(gang) == 2
    snapshot = half_of_each_spine()
    [placement] = place(snapshot, [gang], PlaceConfig())
    validate(snapshot, gang, placement)
    ranks = by_rank(placement)
    assert ranks != sorted(ranks, key=FABRIC.host_index.get)  # renumbered stage-major
    rack = {h.name: h.domains["rack"] for h in FABRIC.hosts}
    assert all(rack[ranks[i]] == rack[ranks[i + 1]] for i in range(0, 8, 2))


def test_a_slice_that_does_not_divide_a_block_keeps_the_depth_first_ranks():
    gang = GANG.model_copy(update={"slices": (Slice(level="rack", size=4),)})
    assert stages.block_pods(gang) is None


def non_blocking() -> Fabric:
    """FABRIC with every level 1:1: an uplink carries all its hosts' NICs can send."""
    spec = FABRIC.spec
    levels = tuple(lv.model_copy(update={"oversubscription": 1.0}) for lv in spec.levels)
    return Fabric(spec.model_copy(update={"levels": levels}))


def test_on_a_non_blocking_fabric_the_depth_first_ranks_stay():
    """Stage-major would put fewer GB on the spines' uplinks, but at 1:1 those slow no one and
    the gang's own step is the same: nothing to gain, the depth-first ranks are kept."""
    fabric = non_blocking()
    snapshot = Snapshot(fabric)
    for host in fabric.hosts:
        if host.domains["rack"] in {"r0", "r2"}:
            snapshot.use(host.name, 8)
    [placement] = place(snapshot, [GANG], PlaceConfig())
    spine = {h.name: h.domains["spine"] for h in fabric.hosts}
    assert len({spine[h] for h in by_rank(placement)[:4]}) == 1  # replica 0 inside one spine
    order = sorted(placement.pods, key=lambda p: p.rank)
    staged = stages.stage_major(order, GANG, stages.block_pods(GANG))
    wires = Wires(fabric, stretch.links_of(fabric))
    step, shared = stages.cost(wires, GANG, staged)
    assert (step, shared) == pytest.approx(stages.cost(wires, GANG, order))
    assert shared == 0


def test_at_1_to_1_stage_major_is_chosen_where_the_gangs_own_step_is_shorter():
    """NVLink domains of two hosts, every level 1:1: numbered by index, each replica's stages
    straddle two domains and its data-parallel ring crosses them at NIC rate; stage-major keeps
    each stage's replicas in one domain. No shared link is loaded either way: the gang's own
    step decides."""
    spec = generate(blocks=2, racks=2, hosts=4, gpus=8, nvlink=2)
    levels = tuple(lv.model_copy(update={"oversubscription": 1.0}) for lv in spec.levels)
    fabric = Fabric(spec.model_copy(update={"levels": levels}))
    snapshot = Snapshot(fabric)
    for host in fabric.hosts:
        if host.domains["rack"] in {"r0", "r2"}:
            snapshot.use(host.name, 8)
    [indexed] = place(snapshot, [GANG], PlaceConfig.of(policy="kueue-best-fit"))
    order = sorted(indexed.pods, key=lambda p: p.rank)
    wires = Wires(fabric, stretch.links_of(fabric))
    staged = stages.stage_major(order, GANG, stages.block_pods(GANG))
    (mine, none), (theirs, still_none) = (
        stages.cost(wires, GANG, staged),
        stages.cost(wires, GANG, order),
    )
    assert none == still_none == 0
    assert mine < theirs
    ranked = stages.ranked(fabric, GANG, indexed.pods)
    assert sorted(ranked, key=lambda p: p.rank) == sorted(staged, key=lambda p: p.rank)
