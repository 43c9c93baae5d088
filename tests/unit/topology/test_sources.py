from __future__ import annotations

import pytest
from pydantic import ValidationError

from scheduler.model import HostSpec, TopologySpec
from scheduler.model.topology import LevelSpec
from scheduler.topology import Fabric, LabelKeys, from_lingjun_csv, from_node_labels, generate
from scheduler.topology.sources import TopologyError, load_topology, save_topology
from tests.conftest import LINGJUN


def test_generator_shape_and_pools_share():
    spec = generate(blocks=4, racks=5, hosts=2, gpus=8, pools={"training": 3, "batch-inference": 1})
    fabric = Fabric(spec)
    assert len(spec.hosts) == 40
    assert len(fabric.names[2]) == 20
    assert len(fabric.names[3]) == 4
    racks_per_pool: dict[str, set[str]] = {}
    for host in spec.hosts:
        racks_per_pool.setdefault(host.pool, set()).add(host.domains["rack"])
    assert {p: len(r) for p, r in racks_per_pool.items()} == {"training": 15, "batch-inference": 5}
    # a rack never mixes pools
    for rack in fabric.names[2]:
        pools = {
            h.pool for h in spec.hosts if f"c0/{h.domains['spine']}/{h.domains['rack']}" == rack
        }
        assert len(pools) == 1


def test_nvlink_domains_group_hosts():
    fabric = Fabric(generate(blocks=1, racks=1, hosts=8, gpus=4, nvlink=4))
    assert len(fabric.real_nvlink) == 2
    assert fabric.lowest_common_level(0, 1) == 1  # same NVLink domain
    assert fabric.lowest_common_level(0, 4) == 2  # same rack only


def test_lingjun_tor_is_psw_asw_pair():
    spec = from_lingjun_csv(LINGJUN, gpus=8)
    fabric = Fabric(spec)
    assert len(spec.hosts) == 847
    assert len(fabric.names[2]) == 119  # ToRs, though only 77 ASW names are distinct
    assert len(fabric.names[3]) == 3
    assert len(fabric.names[4]) == 1


def test_lingjun_missing_column(tmp_path):
    bad = tmp_path / "topo.csv"
    bad.write_text("ip,DSW,PSW\nabc,G6,P10\n")
    with pytest.raises(TopologyError, match="missing columns"):
        from_lingjun_csv(bad)


def test_node_labels_with_custom_keys_and_unlabelled_node():
    keys = LabelKeys(rack="fabric.topograph.run/tier-1", spine="fabric.topograph.run/tier-2")
    nodes = [
        {
            "name": "n1",
            "gpus": 8,
            "labels": {
                "fabric.topograph.run/tier-1": "leaf1",
                "fabric.topograph.run/tier-2": "spine1",
            },
        },
        {
            "name": "n2",
            "gpus": 8,
            "labels": {
                "fabric.topograph.run/tier-1": "leaf1",
                "fabric.topograph.run/tier-2": "spine1",
            },
        },
        {"name": "n3", "gpus": 8, "labels": {}},
    ]
    fabric = Fabric(from_node_labels(nodes, keys.levels()))
    assert fabric.lowest_common_level(0, 1) == 2
    assert fabric.lowest_common_level(0, 2) == 4  # n3 is its own rack under the default spine


def test_yaml_roundtrip_and_generate_block(tmp_path):
    spec = generate(blocks=1, racks=2, hosts=2)
    path = tmp_path / "t.yaml"
    save_topology(spec, path)
    assert load_topology(path) == spec
    gen = tmp_path / "g.yaml"
    gen.write_text("generate: {blocks: 2, racks: 2, hosts: 2, gpus: 4}\n")
    assert len(load_topology(gen).hosts) == 8


def test_spec_rejects_duplicates_and_unknown_levels():
    host = HostSpec(name="a", gpus=8, domains={"rack": "r"})
    with pytest.raises(ValidationError, match="duplicate host"):
        TopologySpec(hosts=(host, host))
    with pytest.raises(ValidationError, match="unknown levels"):
        TopologySpec(hosts=(HostSpec(name="b", gpus=8, domains={"rack": "r", "pod": "x"}),))
    with pytest.raises(ValidationError, match="no domain at level 'rack'"):
        TopologySpec(hosts=(HostSpec(name="c", gpus=8, domains={"spine": "s"}),))


KUEUE = (
    LevelSpec(name="host", bandwidth_gbps=900),
    LevelSpec(name="subblock"),
    LevelSpec(name="block"),
)


def test_levels_of_any_name_and_number():
    """Kueue-style names, no NVLink level: each host is alone in one (a Tier the algorithms
    rely on) and weights default by position."""
    hosts = tuple(
        HostSpec(name=f"n{i}", gpus=8, domains={"subblock": f"sb{i // 2}", "block": "b0"})
        for i in range(4)
    )
    fabric = Fabric(TopologySpec(levels=KUEUE, hosts=hosts))
    assert fabric.levels == ("host", "nvlink", "subblock", "block")
    assert fabric.gb_cost == (0.05, 1.0, 16.0, 256.0)
    assert fabric.lowest_common_level(0, 1) == fabric.index("subblock")
    assert fabric.lowest_common_level(0, 2) == fabric.index("block")
    # only a host level: one shared cluster domain above the (per-host) NVLink level
    bare = tuple(HostSpec(name=f"n{i}", gpus=8, domains={}) for i in range(4))
    alone = TopologySpec(levels=(LevelSpec(name="host"),), hosts=bare)
    assert alone.names == ("host", "nvlink", "cluster")
    # eight levels at most, host first, names distinct
    many = tuple(LevelSpec(name=f"l{i}", optional=True) for i in range(8))
    with pytest.raises(ValidationError, match="at most 8"):
        TopologySpec(levels=(LevelSpec(name="host"), *many), hosts=hosts)
    with pytest.raises(ValidationError, match="first level must be 'host'"):
        TopologySpec(levels=KUEUE[1:], hosts=hosts)
    with pytest.raises(ValidationError, match="distinct"):
        TopologySpec(levels=(*KUEUE, LevelSpec(name="block")), hosts=hosts)


def test_graph_is_a_tree_rooted_at_the_fabric(small_fabric):
    import networkx as nx

    g = small_fabric.graph
    assert nx.is_arborescence(g)
    hosts = [n for n, d in g.nodes(data=True) if d["level"] == "host"]
    assert len(hosts) == len(small_fabric.hosts)
