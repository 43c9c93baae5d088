"""Each knob is declared once, and the operator and the simulator read one scheduling policy.

The walk covers the configuration a user writes (the operator's ConfigMap, a simulation
scenario) and what the core takes (a run's config, one placement call's parameters), every
model nested in them included. A field is declared by the class whose own annotations name it
(a scenario inherits a run's fields, it does not declare them again)."""

from __future__ import annotations

import collections
import typing

import pytest
from pydantic import BaseModel, ValidationError

from scheduler.controller.config import OperatorConfig
from scheduler.model import PlaceConfig, SchedulingPolicy
from scheduler.simulation.config import SimConfig, queue_config
from scheduler.simulation.scenario import Scenario

ROOTS: tuple[type[BaseModel], ...] = (OperatorConfig, Scenario, SimConfig, PlaceConfig)
# one word for different things, never one knob twice
DIFFERENT = {
    "name": "what each thing is called: a scenario, a pool, a level, a fabric profile, a lease",
    "nvlink": "a node label key (LabelKeys), whether a level is NVLink (LevelLabel), and the "
    "NVLink domains per host of a generated fabric (GenerateSpec)",
    "pool": "the node label key of pools (LabelKeys) and the pool a trace's jobs go to",
    "load": "a scenario's offered load and a trace's arrival compression factor",
    "reclaim_within_s": "each owner's own deadline for taking back what it lent: a lending pool's "
    "(pools.Lending) and a team queue's (teams.QueueSpec)",
    "seed": "a run's seed (failures, background hosts, solver) and the seed of one placement "
    "call, which the simulator sets from its run's",
    "hints": "whether a run's policy is told the segments its users state (an untold row: off) "
    "and whether one placement call reads them, which the simulator sets from its run's",
    "spares": "the spare trays per NVLink domain as each topology source states them: a generated "
    "fabric (GenerateSpec) and the operator's labelled levels (LevelLabel); both become the "
    "fabric's LevelSpec.spares, the one value placement reads",
}


def nested(annotation: object) -> typing.Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from nested(arg)


def declarations() -> dict[str, set[str]]:
    """Field name -> the models that declare it as a knob (not a nested model)."""
    found: dict[str, set[str]] = collections.defaultdict(set)
    todo, seen = list(ROOTS), set()
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        todo += [b for b in model.__mro__[1:] if issubclass(b, BaseModel) and b is not BaseModel]
        own = vars(model).get("__annotations__", {})
        for name, field in model.model_fields.items():
            inner = list(nested(field.annotation))
            todo += inner
            if name in own and not inner:
                found[name].add(model.__name__)
    return found


def test_no_knob_is_declared_twice():
    twice = {k: sorted(v) for k, v in declarations().items() if len(v) > 1 and k not in DIFFERENT}
    assert not twice, f"declared in more than one model: {twice}"


def test_the_walk_sees_the_policy_and_the_drivers():
    found = declarations()
    assert found["compact_wait_s"] == {"SchedulingPolicy"}
    assert found["work_limit"] == {"Solver"}
    assert found["warmup_s"] == {"SimConfig"}  # the scenario inherits it
    assert found["resync_s"] == {"OperatorConfig"}


def test_one_set_of_defaults_for_the_operator_and_the_simulator():
    scenario = Scenario.model_validate(
        {
            "topology": {"generate": {"blocks": 1, "racks": 1, "hosts": 1}},
            "traces": [{"format": "llm-mix"}],
        }
    )
    assert OperatorConfig().scheduling == SimConfig().scheduling == scenario.scheduling
    assert OperatorConfig().scheduling == SchedulingPolicy()


def test_the_simulator_differs_from_the_operator_only_where_documented():
    """Its solves stop on work, one solver worker; everything else of the policy is the
    operator's (model/policy.py)."""
    operator = OperatorConfig().queue().policy
    simulated = queue_config(SimConfig(), "rackwise").policy
    assert simulated.solver.work_limit is not None
    assert operator.solver.work_limit is None
    assert simulated.model_copy(update={"solver": operator.solver}) == operator
    baseline = queue_config(SimConfig(), "kueue-best-fit").policy
    assert baseline.model_copy(update={"solver": operator.solver}) == (
        operator.without_mechanisms()
    )


@pytest.mark.parametrize("old", ["backfill", "compactWaitSeconds", "solverTimeLimitSeconds"])
def test_an_operator_knob_of_an_earlier_layout_says_where_it_went(old):
    with pytest.raises(ValidationError, match="now under `scheduling:`"):
        OperatorConfig.model_validate({old: 1})


def test_the_operator_reads_the_policy_under_scheduling():
    config = OperatorConfig.model_validate(
        {
            "scheduling": {
                "compactWaitSeconds": 60,
                "preemptionScope": "cluster",
                "solver": {"timeLimitSeconds": 2.5},
            }
        }
    )
    place = config.queue().place
    assert place.scheduling.compact_wait_s == 60
    assert place.scheduling.cross_tenant
    assert place.solver.time_limit_s == 2.5
