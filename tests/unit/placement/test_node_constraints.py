"""Node constraints in the core: each rule decides a placement on both engines, and the
independent validator rejects a placement that breaks it."""

from __future__ import annotations

import pytest

from scheduler.model import GangRequest, HostSpec, PlaceConfig, TopologySpec
from scheduler.model.constraints import (
    MatchOperator,
    NodeConstraints,
    Requirement,
    Taint,
    TaintEffect,
    Toleration,
    TolerationOperator,
)
from scheduler.placement import InvalidPlacementError, Snapshot, place, validate
from scheduler.topology import Fabric

ENGINES = ["auto", "cp-sat"]


def fabric(*hosts: HostSpec) -> Fabric:
    return Fabric(TopologySpec(hosts=hosts))


def host(name: str, rack: str = "r0", **extra: object) -> HostSpec:
    return HostSpec(name=name, gpus=8, domains={"rack": rack}, **extra)  # type: ignore[arg-type]


def place_on(snapshot: Snapshot, gang: GangRequest, engine: str) -> set[str]:
    config = PlaceConfig.of(engine=engine, work_limit=5)
    [result] = place(snapshot, [gang], config)
    validate(snapshot, gang, result)
    return set(result.hosts())


def gang(pods: int = 1, gpus: int = 8, **constraints: object) -> GangRequest:
    return GangRequest(
        name="g", pods=pods, gpus_per_pod=gpus, constraints=NodeConstraints(**constraints)
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_node_selector_picks_only_matching_hosts(engine):
    f = fabric(host("a", labels={"zone": "x"}), host("b", labels={"zone": "y"}))
    assert place_on(Snapshot(f), gang(selector=(("zone", "y"),)), engine) == {"b"}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("operator", "values", "expected"),
    [
        (MatchOperator.IN, ("y",), {"b"}),
        (MatchOperator.NOT_IN, ("y",), {"a", "c"}),
        (MatchOperator.EXISTS, (), {"a", "b"}),
        (MatchOperator.DOES_NOT_EXIST, (), {"c"}),
        (MatchOperator.GT, ("5",), {"b"}),
        (MatchOperator.LT, ("5",), {"a"}),
    ],
)
def test_required_affinity_operators(engine, operator, values, expected):
    labels = {"a": {"zone": "3"}, "b": {"zone": "y", "size": "9"}, "c": {}}
    labels["a"]["size"] = "3"
    key = "size" if operator in (MatchOperator.GT, MatchOperator.LT) else "zone"
    f = fabric(*(host(n, labels=lab) for n, lab in labels.items()))
    term = (Requirement(key=key, operator=operator, values=values),)
    snapshot = Snapshot(f)
    chosen: set[str] = set()
    for _ in expected:  # one 8-GPU pod per call: every admitted host gets used, no other
        placed = place_on(snapshot, gang(affinity=(term,)), engine)
        chosen |= placed
        snapshot.use(next(iter(placed)), 8, pods=1)
    assert chosen == expected
    [left] = place(snapshot, [gang(affinity=(term,))])
    assert not left.placed


@pytest.mark.parametrize("engine", ENGINES)
def test_affinity_terms_are_ored(engine):
    f = fabric(host("a", labels={"k": "1"}), host("b", labels={"k": "2"}), host("c"))
    terms = (
        (Requirement(key="k", operator=MatchOperator.IN, values=("1",)),),
        (Requirement(key="k", operator=MatchOperator.IN, values=("2",)),),
    )
    assert place_on(Snapshot(f), gang(pods=2, affinity=terms), engine) == {"a", "b"}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("effect", [TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE])
def test_blocking_taints_need_a_toleration(engine, effect):
    taint = Taint(key="dedicated", value="infra", effect=effect)
    f = fabric(host("tainted", taints=(taint,)), host("plain", rack="r1"))
    snapshot = Snapshot(f)
    assert place_on(snapshot, gang(pods=1), engine) == {"plain"}
    [none] = place(snapshot, [gang(pods=2)])
    assert not none.placed
    exact = Toleration(key="dedicated", value="infra", effect=effect)
    assert place_on(snapshot, gang(pods=2, tolerations=(exact,)), engine) == {"tainted", "plain"}
    wildcard = Toleration(operator=TolerationOperator.EXISTS)
    assert len(place_on(snapshot, gang(pods=2, tolerations=(wildcard,)), engine)) == 2
    wrong_value = Toleration(key="dedicated", value="other")
    [still_none] = place(snapshot, [gang(pods=2, tolerations=(wrong_value,))])
    assert not still_none.placed


def test_prefer_no_schedule_never_blocks():
    taint = Taint(key="soft", effect=TaintEffect.PREFER_NO_SCHEDULE)
    f = fabric(host("a", taints=(taint,)))
    assert place_on(Snapshot(f), gang(), "auto") == {"a"}


@pytest.mark.parametrize("engine", ENGINES)
def test_pod_limit_bounds_gpu_less_pods(engine):
    f = fabric(host("a", max_pods=3), host("b", max_pods=2))
    snapshot = Snapshot(f)
    [fits] = place(snapshot, [gang(pods=5, gpus=0)], PlaceConfig.of(engine=engine, work_limit=5))
    assert fits.hosts() == {"a": 3, "b": 2}
    [too_many] = place(snapshot, [gang(pods=6, gpus=0)])
    assert not too_many.placed


def test_validator_rejects_a_host_the_constraints_exclude():
    f = fabric(host("a", labels={"zone": "x"}), host("b", labels={"zone": "y"}))
    from scheduler.model import Placement, PlacementStatus, PodAssignment

    bad = Placement(
        gang="g",
        policy="x",
        status=PlacementStatus.PLACED,
        pods=(PodAssignment(rank=0, host="a"),),
    )
    with pytest.raises(InvalidPlacementError, match="node constraints"):
        validate(Snapshot(f), gang(selector=(("zone", "y"),)), bad)
    limited = fabric(host("a", max_pods=0))
    with pytest.raises(InvalidPlacementError, match="pod limit"):
        validate(Snapshot(limited), gang(), bad)


def test_requirement_arity_is_checked():
    with pytest.raises(ValueError, match="needs at least one value"):
        Requirement(key="k", operator=MatchOperator.IN)
    with pytest.raises(ValueError, match="integer"):
        Requirement(key="k", operator=MatchOperator.GT, values=("x",))
