"""Multi-role gangs: workers placed by the engines, other pod sets with them, all or nothing."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from scheduler.model import GangRequest, PlaceConfig, Placement, PodAssignment, Slice
from scheduler.model.constraints import NodeConstraints
from scheduler.model.gang import ParallelShape, Role
from scheduler.model.topology import HostSpec, TopologySpec
from scheduler.placement import InvalidPlacementError, Snapshot, place, validate
from scheduler.placement.cost import traffic
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
    [placement] = place(snapshot, [gang(LAUNCHER)], PlaceConfig.of(engine=engine))
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


# A role's own topology: three racks of four 8-GPU hosts; only g0-0 admits the workers, so
# every engine puts them there and the role's nearest hosts are the rest of rack r0.
def racks() -> Fabric:
    hosts = [
        HostSpec(
            name=f"g{r}-{i}",
            gpus=8,
            cpu_milli=64_000,
            domains={"rack": f"r{r}", "spine": f"s{r // 2}"},
            labels={"kind": "w"} if (r, i) == (0, 0) else {},
        )
        for r in range(3)
        for i in range(4)
    ]
    return Fabric(TopologySpec(hosts=tuple(hosts)))


def loaded() -> Snapshot:
    """Rack r0 keeps 8 GPUs on g0-0 (the workers') and 4 on g0-1; r1 and r2 are free."""
    snapshot = Snapshot(racks())
    snapshot.use("g0-1", 4)
    snapshot.use("g0-2", 8)
    snapshot.use("g0-3", 8)
    return snapshot


def with_role(**topology: object) -> GangRequest:
    ps = Role(name="ps", pods=4, gpus_per_pod=4, **topology)  # type: ignore[arg-type]
    return GangRequest(
        name="job",
        pods=1,
        gpus_per_pod=8,
        constraints=NodeConstraints(selector=(("kind", "w"),)),
        roles=(ps,),
    )


def racks_of(placement: Placement) -> list[str]:
    """The role's racks in role-rank order (host g<r>-<i> is in rack r<r>)."""
    pods = sorted((p for p in placement.pods if p.role == "ps"), key=lambda p: p.role_rank or 0)
    return ["r" + p.host[1] for p in pods]


@pytest.mark.parametrize("engine", ["auto", "cp-sat"])
def test_a_role_without_topology_spreads_from_its_workers(engine):
    """The baseline for the cases below: nearest first puts one pod in r0 and three in r1."""
    snapshot, g = loaded(), with_role()
    [placement] = place(snapshot, [g], PlaceConfig.of(engine=engine))
    validate(snapshot, g, placement)
    assert placement.hosts("") == {"g0-0": 1}
    assert sorted(set(racks_of(placement))) == ["r0", "r1"]


@pytest.mark.parametrize("engine", ["auto", "cp-sat"])
@pytest.mark.parametrize("how", ["required_level", "preferred_level"])
def test_a_role_kept_inside_one_rack(engine, how):
    snapshot, g = loaded(), with_role(**{how: "rack"})
    [placement] = place(snapshot, [g], PlaceConfig.of(engine=engine))
    validate(snapshot, g, placement)
    assert racks_of(placement) == ["r1"] * 4  # r0 holds one pod, r1 all four


@pytest.mark.parametrize("engine", ["auto", "cp-sat"])
def test_a_required_level_no_domain_holds_leaves_the_gang_waiting_a_preferred_one_does_not(
    engine,
):
    snapshot = loaded()
    for rack in ("g1", "g2"):
        snapshot.use(f"{rack}-0", 8)  # r1 and r2 keep 24 GPUs each: 6 pods of 4, not 8
    big = {"pods": 8, "gpus_per_pod": 4}
    required = with_role(required_level="rack")
    required = required.model_copy(update={"roles": (required.roles[0].model_copy(update=big),)})
    [placement] = place(snapshot, [required], PlaceConfig.of(engine=engine))
    assert not placement.placed
    assert placement.reason.startswith("role ps:")
    preferred = required.model_copy(
        update={"roles": (Role(name="ps", preferred_level="rack", **big),)}
    )
    [placement] = place(snapshot, [preferred], PlaceConfig.of(engine=engine))
    validate(snapshot, preferred, placement)
    assert len(set(racks_of(placement))) > 1  # placed all the same, across racks


@pytest.mark.parametrize("engine", ["auto", "cp-sat"])
@pytest.mark.parametrize("level", ["host", "rack"])
def test_a_role_slice_keeps_each_pair_together(engine, level):
    """g0-1 has room for one pod of 4 GPUs, not a pair: the pairs go to whole hosts."""
    snapshot, g = loaded(), with_role(slices=(Slice(level=level, size=2),))
    [placement] = place(snapshot, [g], PlaceConfig.of(engine=engine))
    validate(snapshot, g, placement)
    assert "g0-1" not in placement.hosts("ps")
    rack = racks_of(placement)
    assert rack[0] == rack[1]
    assert rack[2] == rack[3]


@pytest.mark.parametrize(
    ("topology", "reason"),
    [
        ({"required_level": "pod"}, "role ps: unknown level 'pod'"),
        ({"preferred_level": "pod"}, "role ps: unknown level 'pod'"),
        ({"slices": (Slice(level="pod", size=2),)}, "role ps: unknown level 'pod'"),
        (
            {"required_level": "rack", "slices": (Slice(level="spine", size=2),)},
            "role ps: a slice at spine is above the required level rack",
        ),
        (
            {"slices": (Slice(level="host", size=4), Slice(level="rack", size=2))},
            "role ps: slices must nest",
        ),
    ],
)
def test_a_role_request_that_cannot_be_valid_is_refused_with_its_reason(topology, reason):
    [placement] = place(loaded(), [with_role(**topology)])
    assert not placement.placed
    assert placement.reason.startswith(reason)


def test_a_slice_must_divide_the_role():
    with pytest.raises(ValidationError, match="role ps: slice of 3 pods per rack"):
        Role(name="ps", pods=4, slices=(Slice(level="rack", size=3),))


@pytest.mark.parametrize(
    ("topology", "broken"),
    [
        ({"required_level": "rack"}, "required level"),
        ({"slices": (Slice(level="host", size=2),)}, "slice of 2"),
    ],
)
def test_the_validator_checks_a_roles_topology(topology, broken):
    snapshot, g = loaded(), with_role(**topology)
    [placement] = place(snapshot, [g])
    hosts = iter(["g1-0", "g2-0", "g1-1", "g2-1"])  # every pod on a new host, racks alternating
    moved = tuple(
        p.model_copy(update={"host": next(hosts)}) if p.role else p for p in placement.pods
    )
    with pytest.raises(InvalidPlacementError, match=f"role ps: {broken}"):
        validate(snapshot, g, placement.model_copy(update={"pods": moved}))


def test_a_role_in_the_gradient_ring_is_counted_by_the_traffic_model():
    """Workers w0, w1 (8 GPUs) in rack r0, a ring member m (4 GPUs) in rack r1: one ring of 3,
    each edge 2 x 2/3 of its sender's gradient (1 GB per GPU). w0->w1 stays in the rack;
    w1->m and m->w0 cross it. Without `gradients` the role carries nothing."""
    f = fabric()
    pods = (
        PodAssignment(rank=0, host="g0-0"),
        PodAssignment(rank=1, host="g0-1"),
        PodAssignment(rank=2, host="g1-0", role="m", role_rank=0),
    )
    member = Role(name="m", pods=1, gpus_per_pod=4, gradients=True)
    ring = traffic(f, gang(member, pods=2), pods).gb
    rack = f.levels.index("rack")
    assert ring[0] == pytest.approx(4 / 3 * (8 + 8 + 4))  # every edge leaves a host
    assert ring[rack] == pytest.approx(4 / 3 * (8 + 4))
    silent = traffic(f, gang(member.model_copy(update={"gradients": False}), pods=2), pods).gb
    assert silent[rack] == 0.0
    assert silent[0] == pytest.approx(2 * 8)  # the workers' own ring of two


@pytest.mark.parametrize("engine", ["auto", "cp-sat"])
def test_a_ring_member_that_lands_outside_the_workers_rack_costs_j_and_is_not_optimal(engine):
    """r0 has room for the 4 workers only: the ring member goes to r1. J counts the rack
    crossing it adds; the workers' bound stays a valid lower bound below it."""
    snapshot = Snapshot(fabric())
    member = Role(name="m", pods=1, gpus_per_pod=8, gradients=True)
    config = PlaceConfig.of(engine=engine)
    plain = place(snapshot, [gang(member.model_copy(update={"gradients": False}))], config)[0]
    ring = place(snapshot, [gang(member)], config)[0]
    validate(snapshot, gang(member), ring)
    assert ring.domains["rack"] == 2
    assert ring.objective > plain.objective
    assert ring.bound is not None
    assert ring.bound <= ring.objective
    assert not ring.optimal


def test_a_ring_member_needs_workers_without_pipeline_stages():
    member = Role(name="m", pods=1, gpus_per_pod=8, gradients=True)
    with pytest.raises(ValidationError, match="pipeline stages"):
        GangRequest(
            name="job",
            pods=4,
            gpus_per_pod=8,
            shape=ParallelShape(dp=1, tp=8, pp=4),
            roles=(member,),
        )
