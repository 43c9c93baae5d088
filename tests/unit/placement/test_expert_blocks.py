"""Expert-parallel blocks on multi-host NVLink domains (slices.expert_blocks, api._place_one):
rackwise keeps each block of tp x ep GPUs inside one NVLink domain when some placement does,
places the gang as asked when none does, and labels J among the placements that keep them."""

from __future__ import annotations

import pytest

from scheduler.model import GangRequest, ParallelShape, PlaceConfig
from scheduler.placement import Snapshot, place, validate
from scheduler.placement.baselines import BASELINES
from scheduler.placement.slices import expert_blocks
from scheduler.topology import Fabric, generate
from tests.unit.placement.bruteforce import minimum

# two racks, each one NVLink domain of 4 trays of 4 GPUs (a small NVL72)
NVL = Fabric(generate(blocks=1, racks=2, hosts=4, gpus=4, nvlink=4))
HGX = Fabric(generate(blocks=1, racks=2, hosts=4, gpus=8))
# 4 trays' worth: EP blocks of 8 GPUs, two trays each
MOE = GangRequest(name="moe", pods=4, gpus_per_pod=4, shape=ParallelShape(dp=16, ep=8))


def taken(fabric: Fabric, hosts: list[str]) -> Snapshot:
    snapshot = Snapshot(fabric)
    for h in hosts:
        snapshot.use(h, 4)
    return snapshot


def domains_of_blocks(placement, size: int) -> list[set[str]]:
    nvlink = {h.name: h.domains.get("nvlink", h.name) + h.domains["rack"] for h in NVL.hosts}
    ranks = sorted(placement.pods, key=lambda p: p.rank)
    return [{nvlink[p.host] for p in ranks[i : i + size]} for i in range(0, len(ranks), size)]


def test_a_block_is_kept_in_one_nvlink_domain_when_a_placement_does():
    """Three free trays in each domain: 3 + 1 and 2 + 2 cost the same J; only 2 + 2 keeps both
    blocks whole."""
    snapshot = taken(NVL, ["h0-0", "h1-0"])
    [placement] = place(snapshot, [MOE])
    assert placement.placed
    validate(snapshot, MOE, placement)
    assert all(len(d) == 1 for d in domains_of_blocks(placement, 2))


def test_its_labels_are_for_j_among_the_placements_that_keep_the_blocks():
    snapshot = taken(NVL, ["h0-0", "h1-0"])
    kept = expert_blocks(NVL, MOE)
    assert kept is not None
    best = minimum(snapshot, kept)
    [placement] = place(snapshot, [MOE], PlaceConfig.of(fragmentation_share=0))
    assert placement.objective == pytest.approx(best)
    assert placement.optimal
    assert placement.bound <= best + 1e-9


def test_a_gang_no_placement_keeps_whole_is_placed_as_asked():
    """Three free trays in one domain and one in the other: every placement splits a block."""
    snapshot = taken(NVL, ["h0-0", "h1-0", "h1-1", "h1-2"])
    [placement] = place(snapshot, [MOE])
    assert placement.placed
    validate(snapshot, MOE, placement)
    assert any(len(d) > 1 for d in domains_of_blocks(placement, 2))


def test_nothing_changes_where_no_nvlink_domain_spans_hosts_or_a_block_is_one_pod():
    assert expert_blocks(HGX, MOE) is None
    whole_host = MOE.model_copy(update={"pods": 2, "gpus_per_pod": 8})
    assert expert_blocks(NVL, whole_host) is None
    assert expert_blocks(NVL, MOE.model_copy(update={"shape": ParallelShape(dp=16)})) is None


@pytest.mark.parametrize("policy", sorted(BASELINES))
def test_baselines_place_the_gang_as_asked(policy):
    """The blocks are rackwise's rule: a baseline places what the gang asks (it may split)."""
    snapshot = taken(NVL, ["h0-0", "h1-0"])
    [placement] = place(snapshot, [MOE], PlaceConfig.of(policy=policy))
    if placement.placed:
        validate(snapshot, MOE, placement)
