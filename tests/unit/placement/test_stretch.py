"""The price a split is given (placement/stretch.py) is the simulator's charge: the same
placement, alone on the same fabric (no ECMP hashing), stretches the same in both."""

from __future__ import annotations

import pytest

from scheduler.model import GangRequest, ParallelShape, PlaceConfig
from scheduler.model.training import Model
from scheduler.placement import Snapshot, place, stretch
from scheduler.simulation.fabricload import DemandLoad
from scheduler.simulation.profiles import FabricProfile, SharingModel
from scheduler.simulation.records import JobState
from scheduler.simulation.trace import TraceJob
from scheduler.topology import Fabric, generate

NVL = Fabric(generate(blocks=1, racks=2, hosts=4, gpus=4, nvlink=4))
MOE = Model(params_b=16, active_params_b=3, hidden=4096, layers=16, seq=4096, micro_batches=8,
            moe_share=1.0, topk=8)  # fmt: skip
SHAPES = [ParallelShape(dp=16, ep=8), ParallelShape(dp=4, tp=4), ParallelShape(dp=2, tp=4, pp=2)]


def charged(gang: GangRequest, placement) -> float:
    """The simulator's lone stretch of the placement (profile `alone`: no other job)."""
    profile = FabricProfile(sharing=SharingModel.DEMAND, alone=True)
    load = DemandLoad(NVL, profile, seed=0)
    job = TraceJob(id=gang.name, submit_s=0, duration_s=1, gpus=gang.gpus, pods=gang.pods,
                   shape=gang.shape, model=gang.model)  # fmt: skip
    state = JobState(job, gang, 0, 1.0, placement=placement)
    load.start(state)
    return load.lone(state)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("used", [["h0-0", "h1-0"], ["h0-0", "h1-0", "h1-1", "h1-2"]])
def test_the_price_is_the_simulators_charge(shape, used):
    gang = GangRequest(name="g", pods=4, gpus_per_pod=4, shape=shape, model=MOE)
    snapshot = Snapshot(NVL)
    for h in used:
        snapshot.use(h, 4)
    [placement] = place(snapshot, [gang], PlaceConfig.of(policy="first-fit"))
    price = stretch.lone(NVL, gang, placement)
    assert price == pytest.approx(charged(gang, placement), rel=1e-9)
    assert price >= 1.0


def test_a_gang_that_states_no_model_is_not_priced():
    gang = GangRequest(name="g", pods=4, gpus_per_pod=4, shape=SHAPES[0])
    [placement] = place(Snapshot(NVL), [gang], PlaceConfig())
    assert stretch.lone(NVL, gang, placement) is None


def test_a_compact_placement_costs_nothing():
    gang = GangRequest(name="g", pods=4, gpus_per_pod=4, shape=SHAPES[0], model=MOE)
    [placement] = place(Snapshot(NVL), [gang], PlaceConfig())
    assert stretch.lone(NVL, gang, placement) == pytest.approx(1.0)
