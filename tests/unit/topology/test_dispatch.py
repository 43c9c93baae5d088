"""Node-limited expert routing (traffic.Dispatch, DeepSeek-V3's): hand-computed cases."""

from __future__ import annotations

import pytest

from scheduler.model import ParallelShape
from scheduler.model.topology import HostSpec, TopologySpec
from scheduler.model.training import Model
from scheduler.topology import Fabric
from scheduler.topology.links import Links, Port, Wires
from scheduler.topology.loads import job_load
from scheduler.topology.traffic import Dispatch, Gpu, StepBytes, step_bytes


def hosts(n: int, gpus: int) -> Fabric:
    """n hosts of `gpus` GPUs in one rack, each host its own NVLink domain (HGX)."""
    out = [HostSpec(name=f"h{i}", gpus=gpus, domains={"rack": "r0"}) for i in range(n)]
    return Fabric(TopologySpec(hosts=tuple(out)))


def nic_out(n: int, gpus: int, dispatch: Dispatch | None) -> float:
    """GB one member sends out of its NIC per GB of top-k copies, EP over n hosts x gpus."""
    wires = Wires(hosts(n, gpus), Links())
    members = [Gpu(h, lane) for h in range(n) for lane in range(gpus)]
    k = len(members)
    step = StepBytes(expert=1.0, dispatch=dispatch)
    load = job_load(wires, 1, ParallelShape(dp=k, ep=k), step, members)
    return load.total.get(wires.port(Port.NIC, members[0], True), 0.0)


def test_without_a_limit_every_copy_to_another_host_crosses_the_fabric():
    """EP 32 over 8 hosts of 4: 28 of the 32 members are elsewhere: 28/32 of the copies."""
    assert nic_out(8, 4, None) == pytest.approx(28 / 32)


def test_node_limited_routing_sends_one_copy_per_domain_reached():
    """EP 32 over 8 hosts of 4, top-8, M = 4 (DeepSeek-V3's numbers): 4 of the 8 domains are
    chosen (1/2 each), then 8 experts among their 16 members, so a chosen domain is reached
    with 1 - (3/4)^8; 7 other domains x that x one copy (1/8 of the top-k copies)."""
    reach = 0.5 * (1 - 0.75**8)
    assert Dispatch(8, 4).reach(4, 32, 8) == pytest.approx(reach)
    assert nic_out(8, 4, Dispatch(8, 4)) == pytest.approx(7 * reach / 8)
    assert nic_out(8, 4, Dispatch(8, 4)) < 0.45 * nic_out(8, 4, None)


def test_within_the_limit_copies_to_one_domain_go_once():
    """EP 8 over 2 hosts of 4, top-2, M = 4: the other host is reached by 1 - (1/2)^2 = 3/4 of
    the tokens, once each: 3/4 x 1/2 of the copies, against 4/8 sent copy by copy."""
    assert nic_out(2, 4, Dispatch(2, 4)) == pytest.approx(0.75 / 2)
    assert nic_out(2, 4, None) == pytest.approx(0.5)


def test_a_group_in_one_domain_sends_nothing_out():
    assert nic_out(1, 8, Dispatch(8, 4)) == 0.0


def test_the_model_states_the_limit_and_step_bytes_carries_it():
    moe = Model(params_b=8, hidden=4096, layers=32, seq=4096, moe_share=1.0, topk=8)
    shape = ParallelShape(dp=32, ep=32)
    assert step_bytes(moe, shape).dispatch is None
    limited = step_bytes(moe.model_copy(update={"node_limit": 4}), shape)
    assert limited.dispatch == Dispatch(8, 4)
    assert limited.expert == step_bytes(moe, shape).expert
