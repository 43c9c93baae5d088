"""Slices on both engines: brute force over every valid spread is the oracle; each layer (host,
NVLink, rack) alone and together; impossible requests refused with their reason."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from scheduler.model import GangRequest, PlaceConfig, PodAssignment, Slice
from scheduler.placement import POLICIES, InvalidPlacementError, place, validate
from scheduler.placement.bounds import lower_bound
from scheduler.placement.capacity import Capacity
from scheduler.placement.cost import traffic
from scheduler.placement.cpsat.solve import model_solve
from scheduler.placement.ranks import assign_ranks
from scheduler.placement.scoring import level_weights
from scheduler.placement.slices import fill, sizes
from scheduler.topology import Fabric, generate
from tests.conftest import fragmented
from tests.unit.placement.bruteforce import spreads

# 2 racks x 4 hosts of 4 GPUs, hosts paired in NVLink domains (small enough for brute force)
FABRIC = Fabric(generate(blocks=1, racks=2, hosts=4, gpus=4, nvlink=2))
LAYERS = {
    "host": (Slice(level="host", size=2),),
    "nvlink": (Slice(level="nvlink", size=4),),
    "rack": (Slice(level="rack", size=4),),
    "all": (
        Slice(level="host", size=2),
        Slice(level="nvlink", size=4),
        Slice(level="rack", size=8),
    ),
}


def keeps_slices(fabric: Fabric, gang: GangRequest, counts: dict[int, int]) -> bool:
    pods = assign_ranks(fabric, counts)
    hosts = [fabric.host_index[p.host] for p in sorted(pods, key=lambda p: p.rank)]
    for s in gang.slices:
        column = fabric.domain[fabric.index(s.level)]
        for start in range(0, len(hosts), s.size):
            if len({column[h] for h in hosts[start : start + s.size]}) != 1:
                return False
    return True


def optimum(snapshot, gang: GangRequest) -> float | None:
    """The least traffic cost over every spread whose depth-first ranks keep the slices."""
    fabric = snapshot.fabric
    plain = gang.model_copy(update={"slices": ()})
    slots = sorted(Capacity.of(snapshot, plain).slots.items())
    best = None
    for counts in spreads(slots, gang.pods):
        if keeps_slices(fabric, gang, counts):
            cost = traffic(fabric, gang, assign_ranks(fabric, counts)).cost
            best = cost if best is None else min(best, cost)
    return best


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("busy", [0.2, 0.5])
@pytest.mark.parametrize("pods", [4, 8])
@pytest.mark.parametrize("engine", ["auto", "cp-sat"])
def test_slices_against_brute_force(layer, seed, busy, pods, engine):
    if any(pods % s.size for s in LAYERS[layer]):
        pytest.skip("the slice does not divide this gang")
    snapshot = fragmented(FABRIC, busy=busy, seed=seed)
    gang = GangRequest(name="g", pods=pods, gpus_per_pod=1, slices=LAYERS[layer])
    [placement] = place(snapshot, [gang], PlaceConfig.of(engine=engine, work_limit=5))
    best = optimum(snapshot, gang)
    if best is None:
        assert not placement.placed
        return
    assert placement.placed, placement.reason
    validate(snapshot, gang, placement)
    assert placement.cost == pytest.approx(best, abs=1e-9)
    if engine == "auto":
        assert placement.engine == "tree-dp"  # the exact DP itself, not a fallback


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("busy", [0.2, 0.5])
def test_the_cpsat_model_alone_keeps_slices(layer, seed, busy):
    """No warm start: the model's own constraints must keep the slices."""
    snapshot = fragmented(FABRIC, busy=busy, seed=seed)
    gang = GangRequest(name="g", pods=8, gpus_per_pod=1, slices=LAYERS[layer])
    capacity = Capacity.of(snapshot, gang)
    weights = level_weights(FABRIC, gang)
    config = PlaceConfig.of(work_limit=5)
    found = model_solve(capacity, lower_bound(capacity, weights), weights, config, None)
    best = optimum(snapshot, gang)
    if best is None:
        assert found is None
        return
    assert found is not None
    assert keeps_slices(FABRIC, gang, found.counts)
    pods = assign_ranks(FABRIC, found.counts)
    assert traffic(FABRIC, gang, pods).cost == pytest.approx(best, abs=1e-9)


def test_the_validator_refuses_a_broken_slice():
    snapshot = fragmented(FABRIC, busy=0.0, seed=0)
    gang = GangRequest(name="g", pods=4, gpus_per_pod=1, slices=(Slice(level="rack", size=4),))
    [placement] = place(snapshot, [gang])
    hosts = [h.name for h in FABRIC.hosts]
    split = [PodAssignment(rank=r, host=hosts[0 if r < 2 else 4]) for r in range(4)]
    broken = placement.model_copy(update={"pods": tuple(split)})
    with pytest.raises(InvalidPlacementError, match="slice of 4 per rack at rank 0 leaves"):
        validate(snapshot, gang, broken)


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_keeps_the_slices(layer, policy):
    for seed in range(4):
        snapshot = fragmented(FABRIC, busy=0.3, seed=seed)
        gang = GangRequest(name="g", pods=8, gpus_per_pod=1, slices=LAYERS[layer])
        [placement] = place(snapshot, [gang], PlaceConfig.of(policy=policy))
        validate(snapshot, gang, placement)


@pytest.mark.parametrize(
    ("slices", "required", "reason"),
    [
        ((Slice(level="row", size=2),), None, "slice level 'row' unknown"),
        ((Slice(level="row", size=1),), None, "slice level 'row' unknown"),
        ((Slice(level="core", size=4),), "rack", "above the required level rack"),
        ((Slice(level="core", size=1),), "rack", "above the required level rack"),
        (
            (Slice(level="host", size=4), Slice(level="rack", size=6)),
            None,
            "6 pods per rack is not a multiple of 4 pods per host",
        ),
    ],
)
def test_impossible_slices_are_refused_with_the_reason(slices, required, reason):
    snapshot = fragmented(FABRIC, busy=0.0, seed=0)
    gang = GangRequest(name="g", pods=12, gpus_per_pod=1, slices=slices, required_level=required)
    [placement] = place(snapshot, [gang])
    assert not placement.placed
    assert reason in placement.reason


@pytest.mark.parametrize("engine", ["auto", "cp-sat"])
def test_a_slice_no_domain_can_hold_names_the_slice_not_a_time_limit(engine):
    """Racks of 4 hosts x 4 GPUs; 8 pods of 4 GPUs in slices of 8 per rack: no rack holds a
    slice. The reason says so (the solver is never asked)."""
    snapshot = fragmented(FABRIC, busy=0.0, seed=0)
    gang = GangRequest(name="g", pods=8, gpus_per_pod=4, slices=(Slice(level="rack", size=8),))
    [placement] = place(snapshot, [gang], PlaceConfig.of(engine=engine))
    assert not placement.placed
    assert placement.reason.startswith("needs 8 pods in whole slices of 8 per rack")
    assert "has room for 4" in placement.reason
    assert "time limit" not in placement.reason


@pytest.mark.parametrize("engine", ["auto", "cp-sat"])
def test_a_tp_group_wider_than_a_pod_fits_a_required_host(engine):
    """Two 2-GPU pods of one 4-GPU TP group, required on one host: the group is inside the
    host, so its NVLink slice asks nothing more (it was refused as above the required level)."""
    fabric = Fabric(generate(blocks=1, racks=1, hosts=1, gpus=8))
    gang = GangRequest(
        name="g", pods=2, gpus_per_pod=2, shape={"dp": 1, "tp": 4}, required_level="host"
    )
    [placement] = place(fragmented(fabric, busy=0.0, seed=0), [gang], PlaceConfig.of(engine=engine))
    assert placement.placed, placement.reason
    assert len(placement.hosts()) == 1


def test_a_slice_of_one_pod_constrains_nothing():
    """Size 1 is valid (Kueue, LeaderWorkerSet): the gang is placed as without it."""
    snapshot = fragmented(FABRIC, busy=0.3, seed=1)
    plain = GangRequest(name="g", pods=6, gpus_per_pod=1)
    one = plain.model_copy(update={"slices": (Slice(level="rack", size=1),)})
    [a], [b] = place(snapshot, [plain]), place(snapshot, [one])
    assert b.placed
    assert b.hosts() == a.hosts()
    assert b.objective == a.objective


def test_a_slice_must_divide_the_gang():
    with pytest.raises(ValidationError, match="slice of 4 pods per rack does not divide the 6"):
        GangRequest(name="g", pods=6, gpus_per_pod=1, slices=(Slice(level="rack", size=4),))


# larger than brute force allows: 2 spines x 2 racks x 4 hosts, with and without NVLink pairs
WIDE = {
    "nvlink-pairs": Fabric(generate(blocks=2, racks=2, hosts=4, gpus=4, nvlink=2)),
    "no-nvlink": Fabric(generate(blocks=2, racks=2, hosts=4, gpus=4)),
}


@pytest.mark.parametrize("shape", WIDE)
@pytest.mark.parametrize("layer", LAYERS)
def test_the_dp_and_the_cpsat_model_agree(shape, layer):
    """The exact DP finds a placement whenever the CP-SAT model (no warm start) does, never
    costlier, and the model's own answer keeps the slices."""
    fabric = WIDE[shape]
    config = PlaceConfig.of(work_limit=5)
    for seed in range(12):
        for busy, pods in ((0.2, 16), (0.5, 8)):
            snapshot = fragmented(fabric, busy=busy, seed=seed)
            gang = GangRequest(name="g", pods=pods, gpus_per_pod=1, slices=LAYERS[layer])
            capacity = Capacity.of(snapshot, gang)
            weights = level_weights(fabric, gang)
            model = model_solve(capacity, lower_bound(capacity, weights), weights, config, None)
            [dp] = place(snapshot, [gang], PlaceConfig.of(work_limit=5, fragmentation_share=0))
            assert dp.placed == (model is not None), (seed, busy)
            if model is None:
                continue
            assert dp.engine == "tree-dp"
            validate(snapshot, gang, dp)
            assert keeps_slices(fabric, gang, model.counts), (seed, busy)
            pods_ = assign_ranks(fabric, model.counts)
            assert dp.cost <= traffic(fabric, gang, pods_).cost + 1e-9


@pytest.mark.parametrize("pool", ["batch-inference", "online-inference"])
def test_the_model_keeps_slices_under_the_inference_objectives(pool):
    """Fill and spread do not favour whole hosts as packing does: the groups must come from
    the model's constraints, for hosts outside NVLink too."""
    fabric = Fabric(generate(blocks=2, racks=2, hosts=4, gpus=4, pools={pool: 1.0}))
    config = PlaceConfig.of(work_limit=5)
    for layer in ("host", "nvlink"):
        for seed in range(6):
            snapshot = fragmented(fabric, busy=0.3, seed=seed)
            gang = GangRequest(name="g", pods=8, gpus_per_pod=1, pool=pool, slices=LAYERS[layer])
            capacity = Capacity.of(snapshot, gang)
            weights = level_weights(fabric, gang)
            model = model_solve(capacity, lower_bound(capacity, weights), weights, config, None)
            if model is not None:
                assert keeps_slices(fabric, gang, model.counts), (layer, seed)


# one host a rack, two racks a spine, two spines: small enough to say by hand what each holds
SPINES = Fabric(generate(blocks=2, racks=2, hosts=1, gpus=8))
NESTED = (Slice(level="rack", size=2), Slice(level="spine", size=4))


def test_a_domain_holds_only_whole_slices_of_its_parts():
    """Racks with room for 5 and 3 pods hold 4 and 2 in whole rack slices, so their spine holds
    6, and 4 in whole spine slices: not the 8 its raw sum rounds to."""
    snapshot = fragmented(SPINES, busy=0.0, seed=0)
    snapshot.use("h0-0", 3)
    snapshot.use("h1-0", 5)
    gang = GangRequest(name="g", pods=8, gpus_per_pod=1, slices=NESTED)
    per_domain = Capacity.of(snapshot, gang).per_domain
    assert per_domain[SPINES.index("rack")][0] == 4
    assert per_domain[SPINES.index("spine")][0] == 4


def test_a_fill_from_some_hosts_makes_every_domain_whole_or_gives_up():
    """A baseline that offers only some hosts of a domain (Slurm's chosen leaves) must not be
    given a count for the domain that its other hosts would have made whole."""
    gang = GangRequest(name="g", pods=2, gpus_per_pod=1, slices=(Slice(level="spine", size=2),))
    slots = dict.fromkeys(range(4), 1)  # one pod on each host; hosts 0, 1 in spine 0
    size = sizes(SPINES, gang)
    # of spine 0 only host 0 is offered: one pod, not a slice; spine 1 takes the gang
    assert fill(SPINES, size, slots, [0, 2, 3], 2) == {2: 1, 3: 1}
    assert fill(SPINES, size, slots, [0, 2], 2) is None
    assert fill(SPINES, size, slots, [0, 2, 1], 2) == {0: 1, 1: 1}
