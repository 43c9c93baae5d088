"""Required pod affinity, anti-affinity and topology spread of pod groups, resolved against the
pods running now (pods/affinity.py) and enforced by the placement core. The fabric: racks r0
(h0-0, h0-1) and r1 (h1-0, h1-1), 8 GPUs a host. Field names as the Kubernetes API reference
defines them (the 1.20 API server knows all of them; tests/integration runs one there)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.controller.config import OperatorConfig
from tests.unit.controller.test_reconciler import Clock, Driven, MemoryApi, pod_scheduled, scheduled

Obj = dict[str, Any]
RACK = "rackwise.io/rack"
HOST = "kubernetes.io/hostname"


def term(key: str, **match: str) -> Obj:
    return {"labelSelector": {"matchLabels": match}, "topologyKey": key}


def group(
    api: MemoryApi, name: str, pods: int, gpus: int = 8, labels: Obj | None = None, **spec: Any
) -> None:
    """A pod group of `pods` members, each with `labels` and `spec` (affinity, spread)."""
    for rank in range(pods):
        api.add_member(name, rank, at="2026-12-01T00:00:01Z")
        pod = api.pod_objs[("default", f"{name}-{rank}")]
        pod["metadata"]["labels"] |= {"app": name, **(labels or {})}
        pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = str(gpus)
        pod["spec"] |= spec
    api.podgroup_objs.append(
        {"metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": pods}}
    )


def hosts(api: MemoryApi, name: str) -> list[str | None]:
    members = [p for (_, n), p in sorted(api.pod_objs.items()) if n.rsplit("-", 1)[0] == name]
    return [p["spec"].get("nodeName") for p in members]


def racks(api: MemoryApi, name: str) -> set[str]:
    return {str(h)[:2].replace("h", "r") for h in hosts(api, name)}


@pytest.fixture
def api() -> MemoryApi:
    return MemoryApi(OperatorConfig())


@pytest.fixture
def reconciler(api: MemoryApi) -> Driven:
    return Driven(api, Clock())


def place_a_on_r0(api: MemoryApi, reconciler: Driven) -> None:
    group(api, "a", 1, gpus=4)
    reconciler.cycle()
    [host] = hosts(api, "a")
    assert host is not None
    if not host.startswith("h0"):  # make it r0 whatever the first choice was
        api.pod_objs[("default", "a-0")]["spec"]["nodeName"] = "h0-0"


def test_anti_affinity_keeps_a_gang_off_the_racks_of_the_pods_it_names(api, reconciler):
    """b alone would best fit beside a (a busy rack); its anti-affinity sends it to r1."""
    place_a_on_r0(api, reconciler)
    anti = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(RACK, app="a")]}
    }
    group(api, "b", 1, gpus=4, affinity=anti)
    reconciler.cycle()
    assert racks(api, "b") == {"r1"}


def test_affinity_keeps_a_gang_on_the_racks_of_the_pods_it_names(api, reconciler):
    place_a_on_r0(api, reconciler)
    api.submit("r1-filler", 1)  # a fresh-rack preference aside, r1 would do as well
    near = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(RACK, app="a")]}
    }
    group(api, "b", 2, gpus=2, affinity=near)
    reconciler.cycle()
    assert racks(api, "b") == {"r0"}


def test_affinity_with_pods_that_do_not_run_waits_and_says_which_term(api, reconciler):
    near = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(RACK, app="x")]}
    }
    group(api, "b", 1, affinity=near)
    reconciler.cycle()
    assert hosts(api, "b") == [None]
    said = scheduled(api, "b")
    assert said["reason"] == "Unplaceable"
    assert (
        "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
        in said["message"]
    )


def test_exclusive_racks_as_leaderworkerset_writes_them(api, reconciler):
    """Each group together in one rack (affinity with its own group key) and alone there
    (anti-affinity with every other group key): two groups of two take one rack each."""
    for name in ("g1", "g2"):
        key = {"lws/group-key": name}
        exclusive = {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": key}, "topologyKey": RACK}
                ]
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {
                            "matchExpressions": [
                                {"key": "lws/group-key", "operator": "Exists"},
                                {"key": "lws/group-key", "operator": "NotIn", "values": [name]},
                            ]
                        },
                        "topologyKey": RACK,
                    }
                ]
            },
        }
        group(api, name, 2, gpus=4, labels=key, affinity=exclusive)
        reconciler.cycle()
    assert len(racks(api, "g1")) == 1
    assert len(racks(api, "g2")) == 1
    assert racks(api, "g1") != racks(api, "g2")


def test_anti_affinity_with_its_own_pods_on_the_hostname_is_one_pod_per_host(api, reconciler):
    anti = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(HOST, app="b")]}
    }
    group(api, "b", 3, gpus=1, affinity=anti)
    reconciler.cycle()
    assert len(set(hosts(api, "b"))) == 3


def test_a_spread_over_racks_puts_two_pods_in_each(api, reconciler):
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": RACK,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "b"}},
        }
    ]
    group(api, "b", 4, gpus=1, topologySpreadConstraints=spread)
    reconciler.cycle()
    found = [str(h)[:2] for h in hosts(api, "b")]
    assert sorted(found) == ["h0", "h0", "h1", "h1"]


def test_running_pods_anti_affinity_keeps_others_away(api, reconciler):
    """a says no pod of app=b in its rack: b goes elsewhere (the rule has two sides)."""
    place_a_on_r0(api, reconciler)
    api.pod_objs[("default", "a-0")]["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(RACK, app="b")]}
    }
    group(api, "b", 1, gpus=4)
    reconciler.cycle()
    assert racks(api, "b") == {"r1"}


def test_an_unsupported_namespace_selector_is_reported_and_others_go_on(api, reconciler):
    bad = term(RACK, app="a") | {"namespaceSelector": {"matchLabels": {"team": "x"}}}
    group(
        api,
        "b",
        1,
        affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [bad]}},
    )
    group(api, "c", 1)
    reconciler.cycle()
    said = scheduled(api, "b")
    assert said["reason"] == "InvalidSpec"
    assert "namespaceSelector" in said["message"]
    assert hosts(api, "b") == [None]
    assert all(hosts(api, "c"))
    assert pod_scheduled(api.pod_objs[("default", "b-0")])[1] == "InvalidSpec"


def test_affinity_with_its_own_pods_holds_the_gang_in_one_rack(api, reconciler):
    """One free host in each rack: two 8-GPU pods would span both; the gang's affinity with
    itself on the rack key makes it wait for a rack with room for both."""
    for name, node in (("x", "h0-0"), ("y", "h1-0")):
        group(api, name, 1)
        api.pod_objs[("default", f"{name}-0")]["spec"]["nodeName"] = node
    together = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(RACK, app="g")]}
    }
    group(api, "g", 2, affinity=together)
    reconciler.cycle()
    assert hosts(api, "g") == [None, None]
    assert "in one rack" in scheduled(api, "g")["message"]


def test_preferred_node_affinity_picks_among_equal_placements(api, reconciler):
    api.node_objs["h1-1"]["metadata"]["labels"]["disk"] = "ssd"
    liked = {
        "weight": 50,
        "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
    }
    prefer = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [liked]}}
    group(api, "b", 1, affinity=prefer)
    reconciler.cycle()
    assert hosts(api, "b") == ["h1-1"]


def test_a_new_member_of_a_placed_group_keeps_the_groups_anti_affinity(api, reconciler):
    """One pod per host, then a second member arrives: it goes near the first (its rack),
    not onto the first's host, which has room but is ruled out."""
    anti = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(HOST, app="b")]}
    }
    group(api, "b", 1, gpus=1, affinity=anti)
    api.podgroup_objs[-1]["spec"]["minMember"] = 1
    reconciler.cycle()
    [first] = hosts(api, "b")
    api.add_member("b", 1, at="2026-12-01T00:00:02Z")
    pod = api.pod_objs[("default", "b-1")]
    pod["metadata"]["labels"]["app"] = "b"
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    pod["spec"]["affinity"] = anti
    reconciler.cycle()
    second = hosts(api, "b")[1]
    assert second is not None
    assert second != first


def test_affinity_with_its_own_pods_never_widens_a_required_level(api, reconciler):
    """The pods ask one host by annotation and one rack by affinity with themselves; every host
    has room for one of them only: they wait (one rack would have let them start)."""
    for i, node in enumerate(("h0-0", "h0-1", "h1-0", "h1-1")):
        group(api, f"x{i}", 1, gpus=4)
        api.pod_objs[("default", f"x{i}-0")]["spec"]["nodeName"] = node
    together = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(RACK, app="g")]}
    }
    group(api, "g", 2, gpus=4, affinity=together)
    for rank in range(2):
        notes = api.pod_objs[("default", f"g-{rank}")]["metadata"].setdefault("annotations", {})
        notes["rackwise.io/required-level"] = "host"
    reconciler.cycle()
    assert hosts(api, "g") == [None, None]
