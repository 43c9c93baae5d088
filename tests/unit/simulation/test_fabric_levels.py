"""Which links a scenario's `ratios` and `ecmp` reach (simulation/profiles.py, topology/links.py):
the links that leave a domain of the level they name. A name no link leaves is an error, not a
model dropped in silence (the bundled Llama-3-like scenarios once named `core`, the top level of
one domain, for the links between pods: their 1:7 was never applied)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.simulation.engine import Simulation
from scheduler.simulation.fabricload import DemandLoad, fabric_load
from scheduler.simulation.profiles import FabricProfile, ProfileName
from scheduler.simulation.scenario import ScenarioError, build_topology, load_scenario
from scheduler.topology.fabric import Fabric

PODS = Path(__file__).parents[3] / "simulations" / "scenarios" / "modern-pods.yaml"


def pods_scenario(**fabric: object):
    scenario, base = load_scenario(PODS)
    profile = scenario.fabric.model_copy(update=fabric)
    return scenario.model_copy(update={"fabric": profile}), base


@pytest.mark.parametrize("field", ["ratios", "ecmp"])
def test_naming_the_top_level_of_one_domain_says_which_level_to_name(field):
    value = {"core": 7.0} if field == "ratios" else ("core",)
    scenario, base = pods_scenario(**{field: value})
    with pytest.raises(ScenarioError, match=f"fabric.{field}: no link leaves a 'core' domain"):
        build_topology(scenario, base)


def test_a_ratio_must_name_a_switch_level_the_topology_has():
    scenario, base = pods_scenario(ratios={"pod": 7.0})
    with pytest.raises(ScenarioError, match="unknown level 'pod'; levels are host, nvlink"):
        build_topology(scenario, base)
    scenario, base = pods_scenario(ratios={"nvlink": 2.0})
    with pytest.raises(ScenarioError, match="never oversubscribed"):
        build_topology(scenario, base)


def test_the_bundled_pods_are_one_to_one_inside_and_one_to_seven_between():
    """48 hosts of 8 GPUs a pod, a 50 GB/s NIC per GPU: a rack's uplink carries its 8 hosts'
    3,200 GB/s, a pod's 19,200 / 7 GB/s."""
    scenario, base = load_scenario(PODS)
    fabric = Fabric(build_topology(scenario, base))
    load = fabric_load(fabric, scenario.fabric, 0)
    assert isinstance(load, DemandLoad)
    rack, spine = fabric.index("rack"), fabric.index("spine")
    assert load.wires.uplink_gbps(rack, 0) == pytest.approx(8 * 400)
    assert load.wires.uplink_gbps(spine, 0) == pytest.approx(48 * 400 / 7)


def test_the_scheduler_is_told_the_ratios_the_profile_provisions():
    scenario, base = load_scenario(PODS)
    spec = build_topology(scenario, base)
    told = scenario.fabric.provisioned(spec)
    assert [level.oversubscription for level in told.levels] == [1, 1, 1, 7, 1]
    oracle = FabricProfile(name=ProfileName.ORACLE, ratios={"spine": 7})
    assert {level.oversubscription for level in oracle.provisioned(spec).levels} == {1}


def test_a_simulation_places_on_the_fabric_as_provisioned():
    scenario, base = load_scenario(PODS)
    fabric = Fabric(build_topology(scenario, base))
    assert fabric.spec.levels[fabric.index("spine")].oversubscription == 2  # the generator's
    sim = Simulation(fabric, [], "rackwise", scenario)
    assert sim.fabric.spec.levels[fabric.index("spine")].oversubscription == 7
    assert sim.snapshot.fabric is sim.fabric
