"""Pools are the operator's set: a gang carries its pool's objective."""

from __future__ import annotations

from scheduler.model import GangRequest
from scheduler.model.gang import Objective
from scheduler.placement import Snapshot, place
from scheduler.topology import Fabric, generate


def test_a_gang_may_carry_its_pools_objective():
    """Spread, given by the gang, over the default by pool name (training packs)."""
    snapshot = Snapshot(Fabric(generate(blocks=1, racks=2, hosts=4, gpus=8)))
    packed = GangRequest(name="p", pods=2, gpus_per_pod=8)
    spread = packed.model_copy(update={"objective": Objective.SPREAD})
    [a] = place(snapshot, [packed])
    [b] = place(snapshot, [spread])
    assert a.domains["rack"] == 1
    assert b.domains["rack"] == 2
