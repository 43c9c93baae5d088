"""What each policy's users tell it about an expert-parallel gang, and how it reads it
(placement/hints.py, api._place_one): the EP block (tp x ep GPUs) inside one NVLink domain,
required for Kueue and Slurm block (the gang waits), preferred for KAI and rackwise (kept
where a placement does, the gang placed without it where none does), unstated for the
others. rackwise's labels are for J among the placements that keep the blocks."""

from __future__ import annotations

import pytest

from scheduler.model import GangRequest, ParallelShape, PlaceConfig, Slice
from scheduler.model.placement import PlacementStatus
from scheduler.placement import Snapshot, place, validate
from scheduler.placement.baselines import BASELINES
from scheduler.placement.hints import READING, Reading, expert_block, kept, reading, told
from scheduler.topology import Fabric, generate
from tests.unit.placement.bruteforce import minimum

# two racks, each one NVLink domain of 4 trays of 4 GPUs (a small NVL72)
NVL = Fabric(generate(blocks=1, racks=2, hosts=4, gpus=4, nvlink=4))
HGX = Fabric(generate(blocks=1, racks=2, hosts=4, gpus=8))
# 4 trays' worth: EP blocks of 8 GPUs, two trays each
MOE = GangRequest(name="moe", pods=4, gpus_per_pod=4, shape=ParallelShape(dp=16, ep=8))
# one tray taken in each domain: 2 + 2 keeps both blocks whole
ROOM = ["h0-0", "h1-0"]
# three trays taken in one domain: 3 + 1 splits a block, and nothing else fits
TIGHT = ["h0-0", "h1-0", "h1-1", "h1-2"]


def taken(fabric: Fabric, hosts: list[str]) -> Snapshot:
    snapshot = Snapshot(fabric)
    for h in hosts:
        snapshot.use(h, 4)
    return snapshot


def blocks_whole(placement, size: int = 2) -> bool:
    nvlink = {h.name: h.domains.get("nvlink", h.name) + h.domains["rack"] for h in NVL.hosts}
    ranks = sorted(placement.pods, key=lambda p: p.rank)
    return all(
        len({nvlink[p.host] for p in ranks[i : i + size]}) == 1 for i in range(0, len(ranks), size)
    )


def test_every_peer_that_has_a_field_for_it_is_told():
    assert reading("kueue-best-fit") is Reading.REQUIRED
    assert reading("slurm-block") is Reading.REQUIRED
    assert reading("kai-bin-pack") is Reading.PREFERRED
    assert reading("rackwise") is Reading.PRICED
    assert reading("first-fit") is Reading.UNSTATED
    assert reading("slurm-tree") is Reading.UNSTATED
    assert set(READING) <= {"rackwise", *BASELINES}


@pytest.mark.parametrize("policy", sorted(READING))
def test_a_policy_told_keeps_each_block_in_one_domain_when_a_placement_does(policy):
    snapshot = taken(NVL, ROOM)
    [placement] = place(snapshot, [MOE], PlaceConfig.of(policy=policy))
    assert placement.placed
    validate(snapshot, MOE, placement)
    assert blocks_whole(placement)


@pytest.mark.parametrize("policy", ["kueue-best-fit", "kueue-least-free", "slurm-block"])
def test_a_required_segment_waits_where_no_placement_keeps_it(policy):
    snapshot = taken(NVL, TIGHT)
    [placement] = place(snapshot, [MOE], PlaceConfig.of(policy=policy))
    assert placement.status is PlacementStatus.UNPLACEABLE
    assert "slices of 2 per nvlink" in placement.reason
    # not told, the same policy splits a block
    [untold] = place(snapshot, [MOE], PlaceConfig.of(policy=policy, hints=False))
    assert untold.placed
    assert not blocks_whole(untold)


@pytest.mark.parametrize("policy", ["rackwise", "kai-bin-pack"])
def test_a_preferred_segment_falls_back_where_no_placement_keeps_it(policy):
    snapshot = taken(NVL, TIGHT)
    [placement] = place(snapshot, [MOE], PlaceConfig.of(policy=policy))
    assert placement.placed
    validate(snapshot, MOE, placement)
    assert not blocks_whole(placement)


def test_rackwise_labels_are_for_j_among_the_placements_that_keep_the_blocks():
    snapshot = taken(NVL, ROOM)
    best = minimum(snapshot, kept(told(NVL, MOE, "rackwise")))
    [placement] = place(snapshot, [MOE], PlaceConfig.of(fragmentation_share=0))
    assert placement.objective == pytest.approx(best)
    assert placement.optimal
    assert placement.bound <= best + 1e-9


def test_nothing_is_implied_where_no_nvlink_domain_spans_hosts_or_a_block_is_one_pod():
    assert expert_block(HGX, MOE) is None
    whole_host = MOE.model_copy(update={"pods": 2, "gpus_per_pod": 8})
    assert expert_block(NVL, whole_host) is None
    assert expert_block(NVL, MOE.model_copy(update={"shape": ParallelShape(dp=16)})) is None
    assert expert_block(NVL, MOE) == Slice(level="nvlink", size=2)
    assert told(HGX, MOE, "kueue-best-fit") == MOE


def test_a_gang_that_states_its_own_segment_keeps_it_as_stated():
    """A stated preferred segment is not made required for Kueue: the users said it."""
    own = MOE.model_copy(update={"preferred_slices": (Slice(level="nvlink", size=2),)})
    assert told(NVL, own, "kueue-best-fit") == own
    [placement] = place(taken(NVL, TIGHT), [own], PlaceConfig.of(policy="kueue-best-fit"))
    assert placement.placed


@pytest.mark.parametrize("policy", sorted(BASELINES))
def test_every_policy_honours_a_stated_preferred_segment(policy):
    plain = MOE.model_copy(update={"shape": None})
    own = plain.model_copy(update={"preferred_slices": (Slice(level="nvlink", size=2),)})
    snapshot = taken(NVL, ROOM)
    [placement] = place(snapshot, [own], PlaceConfig.of(policy=policy))
    assert placement.placed
    assert blocks_whole(placement)
    [split] = place(taken(NVL, TIGHT), [own], PlaceConfig.of(policy=policy))
    assert split.placed


def test_a_preferred_segment_at_an_unknown_level_is_a_clear_error():
    own = MOE.model_copy(update={"preferred_slices": (Slice(level="nvswitch", size=2),)})
    [placement] = place(taken(NVL, ROOM), [own])
    assert not placement.placed
    assert "unknown level 'nvswitch'" in placement.reason


@pytest.mark.parametrize("policy", ["rackwise", "kai-bin-pack"])
def test_a_placement_without_its_preferred_segment_names_it_unkept(policy):
    """What the queue prices (queue/split.py): the segment a placement could not keep."""
    [split] = place(taken(NVL, TIGHT), [MOE], PlaceConfig.of(policy=policy))
    assert split.placed
    assert split.unkept == (Slice(level="nvlink", size=2),)
    [whole] = place(taken(NVL, ROOM), [MOE], PlaceConfig.of(policy=policy))
    assert whole.unkept == ()
