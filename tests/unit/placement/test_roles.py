"""Multi-role gangs: workers placed by the engines, other pod sets with them, all or nothing."""

from __future__ import annotations

import pytest

from scheduler.model import GangRequest, PlaceConfig
from scheduler.model.constraints import NodeConstraints
from scheduler.model.gang import Role
from scheduler.model.topology import HostSpec, TopologySpec
from scheduler.placement import Snapshot, place, validate
from scheduler.topology import Fabric


def fabric() -> Fabric:
    """Two racks of four 8-GPU hosts, and one CPU-only host per rack labelled node-type=cpu."""
    hosts = [
        HostSpec(name=f"g{r}-{i}", gpus=8, cpu_milli=64_000, domains={"rack": f"r{r}"})
        for r in range(2)
        for i in range(4)
    ]
    hosts += [
        HostSpec(name=f"c{r}", gpus=0, domains={"rack": f"r{r}"}, labels={"node-type": "cpu"})
        for r in range(2)
    ]
    return Fabric(TopologySpec(hosts=tuple(hosts)))


LAUNCHER = Role(name="launcher", pods=1, cpu_milli_per_pod=2_000)
CPU_ONLY = NodeConstraints(selector=(("node-type", "cpu"),))


def gang(*roles: Role, pods: int = 4) -> GangRequest:
    return GangRequest(name="job", pods=pods, gpus_per_pod=8, roles=roles)


@pytest.mark.parametrize("engine", ["auto", "cp-sat"])
def test_a_launcher_goes_with_its_workers(engine):
    snapshot = Snapshot(fabric())
    snapshot.use("g0-0", 8)  # rack 0 cannot hold the four workers: they go to rack 1
    [placement] = place(snapshot, [gang(LAUNCHER)], PlaceConfig(engine=engine))
    validate(snapshot, gang(LAUNCHER), placement)
    workers = placement.hosts("")
    [launcher] = [p for p in placement.pods if p.role == "launcher"]
    assert set(workers) == {"g1-0", "g1-1", "g1-2", "g1-3"}
    assert launcher.host in workers  # on a worker host: it needs CPU only
    assert (launcher.rank, launcher.role_rank) == (4, 0)
    assert placement.domains["rack"] == 1  # the workers' domains; roles carry no traffic


def test_a_role_keeps_its_own_constraints_and_stays_near():
    role = LAUNCHER.model_copy(update={"constraints": CPU_ONLY})
    snapshot = Snapshot(fabric())
    snapshot.use("g0-0", 8)
    [placement] = place(snapshot, [gang(role)])
    validate(snapshot, gang(role), placement)
    assert placement.hosts("launcher") == {"c1": 1}  # the CPU host in the workers' rack


def test_all_or_nothing_when_a_role_does_not_fit():
    greedy = Role(name="ps", pods=1, gpus_per_pod=8)  # the workers leave no whole host free
    [placement] = place(Snapshot(fabric()), [gang(greedy, pods=8)])
    assert not placement.placed
    assert placement.reason.startswith("role ps: needs 1 pods x 8 GPUs")
    assert placement.pods == ()


def test_the_roles_are_charged():
    snapshot = Snapshot(fabric())
    g = gang(LAUNCHER, Role(name="ps", pods=2, gpus_per_pod=0, cpu_milli_per_pod=30_000))
    [placement] = place(snapshot, [g])
    validate(snapshot, g, placement)
    before = int(snapshot.free_cpu.sum())
    snapshot.apply(g, placement)
    assert before - int(snapshot.free_cpu.sum()) == 2_000 + 2 * 30_000
    assert sorted(p.rank for p in placement.pods) == list(range(7))


def test_the_validator_checks_each_role():
    role = LAUNCHER.model_copy(update={"constraints": CPU_ONLY})
    snapshot = Snapshot(fabric())
    [placement] = place(snapshot, [gang(role)])
    moved = tuple(p.model_copy(update={"host": "g0-0"}) if p.role else p for p in placement.pods)
    with pytest.raises(AssertionError, match="fails the node constraints"):
        validate(snapshot, gang(role), placement.model_copy(update={"pods": moved}))


def test_each_role_is_charged_before_the_next():
    """Two roles that each need most of a host's CPU: they cannot share one."""
    roles = (
        Role(name="x", pods=1, cpu_milli_per_pod=40_000),
        Role(name="y", pods=1, cpu_milli_per_pod=40_000),
    )
    g = gang(*roles)
    snapshot = Snapshot(fabric())
    [placement] = place(snapshot, [g])
    validate(snapshot, g, placement)
    assert placement.hosts("x").keys() != placement.hosts("y").keys()
