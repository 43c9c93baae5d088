"""What rackwise minimises for a training gang, and reports as `objective`:

    J = sum over levels of  w_l x ring_crossings(k_l)      (ring edges crossing the level)
      + sum over levels of  w_l x sum over the domains d it uses there, when k_l >= 2,
                                of g_d                      (the load already on d's uplink)
      + sum over levels of  p_l x (k_l - 1)                (preferred levels: extra domains)
      + f x (fresh racks used, when the gang spans racks)  (capacity it breaks)

with k_l the gang's domains at level l, w_l the link seconds of one ring edge there, g_d the
running gangs whose traffic crosses the uplink of domain d (rack level and up; known where the
queue keeps them, placement/uplinks.py, else 0), p_l the preferred-level weight and f the
fresh-rack weight (a small share of one host crossing). The load term is the ring term under
fair sharing: a ring that leaves d through an uplink g_d other gangs cross gets 1/(g_d + 1) of
it, so its crossing there takes (1 + g_d) times as long (the simulator's max-min sharing,
topology/sharing.py); nothing in it is tuned. The ring part equals `cost.traffic()` for a pure
data-parallel gang under depth-first rank order; for pipeline-parallel gangs it is a proxy,
and `cost` (the traffic model) is reported apart. `optimal` and `bound` always refer to J."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from scheduler.model.gang import GangRequest
from scheduler.model.topology import Tier
from scheduler.placement.bounds import ring_crossings
from scheduler.placement.capacity import Capacity
from scheduler.placement.fragments import Prices
from scheduler.placement.snapshot import Array, Snapshot
from scheduler.topology.fabric import Fabric

RACK = Tier.RACK


def level_weights(fabric: Fabric, gang: GangRequest) -> list[float]:
    """Link seconds one ring edge costs at each level: GB per edge x seconds per GB."""
    n = gang.pods
    stages = gang.shape.pp if gang.shape and n % gang.shape.pp == 0 else 1
    per_stage = n // stages
    pod_gb = gang.gradient_gb * max(gang.gpus_per_pod, 1) / stages
    edge_gb = 2.0 * (per_stage - 1) / per_stage * pod_gb if per_stage > 1 else 0.0
    return [edge_gb * c for c in fabric.gb_cost]


def preference_weights(fabric: Fabric, gang: GangRequest, weights: Sequence[float]) -> list[float]:
    """p_l: a preferred level's weight, in units of the costliest ring edge."""
    return [max(weights) * gang.preferred_levels.get(level, 0.0) for level in fabric.levels]


def fresh_rack_weight(capacity: Capacity, weights: Sequence[float], share: float) -> float:
    """f: breaking a fully free rack costs `share` of one host crossing, split over the racks."""
    racks = len(capacity.snapshot.fabric.names[RACK])
    return share * weights[0] / (racks + 1)


def objective(
    capacity: Capacity, counts: Mapping[int, int], weights: Sequence[float], fresh: float
) -> float:
    """J of the placement `counts` (host -> pods)."""
    fabric = capacity.snapshot.fabric
    hosts = [h for h, n in counts.items() if n > 0]
    if len(hosts) == 1:  # one domain at every level: each term needs two (most gangs: one pod)
        return 0.0
    spans = _spans(fabric, hosts)
    prefs = preference_weights(capacity.snapshot.fabric, capacity.gang, weights)
    value = _traffic(capacity.snapshot, hosts, spans, weights)
    value += sum(p * (k - 1) for p, k in zip(prefs, spans, strict=True))
    if spans[RACK] >= 2:
        free = set(range(len(fabric.names[RACK]))) - capacity.snapshot.busy_racks()
        value += fresh * len({fabric.domain[RACK][h] for h in hosts} & free)
    return value


def ring_cost(capacity: Capacity, counts: Mapping[int, int], weights: Sequence[float]) -> float:
    """J's ring and load terms (what the traffic costs, without preferences or fresh racks)."""
    hosts = [h for h, n in counts.items() if n > 0]
    return _traffic(capacity.snapshot, hosts, _spans(capacity.snapshot.fabric, hosts), weights)


def _spans(fabric: Fabric, hosts: Sequence[int]) -> list[int]:
    """k_l: the domains the hosts take at each level."""
    return [len({fabric.domain[level][h] for h in hosts}) for level in range(fabric.depth)]


def _traffic(
    snapshot: Snapshot, hosts: Sequence[int], spans: Sequence[int], weights: Sequence[float]
) -> float:
    """J's ring and load terms."""
    ring = sum(w * ring_crossings(k) for w, k in zip(weights, spans, strict=True))
    return ring + crossing_load(snapshot, hosts, weights, spans)


def shared_uplinks(snapshot: Snapshot) -> dict[int, Array]:
    """g_d at the levels whose uplinks are oversubscribed (level -> per domain): a 1:1 uplink
    carries every host below it at its NIC rate, so the gangs crossing it never slow each
    other there (the simulator's sharing models); none when the running gangs are not known."""
    if snapshot.uplinks is None:
        return {}
    levels = snapshot.fabric.spec.levels
    return {lv: g for lv, g in snapshot.uplinks().items() if levels[lv].oversubscription > 1}


def crossing_load(
    snapshot: Snapshot, hosts: Sequence[int], weights: Sequence[float], spans: Sequence[int]
) -> float:
    """J's load term: at each level the gang spans (two domains or more, rack and up), w_l x
    the running gangs crossing the uplinks of the domains it uses there (shared_uplinks)."""
    fabric, used = snapshot.fabric, np.asarray(hosts, dtype=np.int64)
    value = 0.0
    for level, load in shared_uplinks(snapshot).items():
        if spans[level] >= 2:
            value += weights[level] * float(load[np.unique(fabric.columns[level][used])].sum())
    return value


def crossing_prices(snapshot: Snapshot, weights: Sequence[float]) -> Prices:
    """The load term as the tree DP's per-domain prices (treedp.solve_tree's `crossing`)."""
    shared = shared_uplinks(snapshot).items()
    return {lv: load.astype(np.float64) * weights[lv] for lv, load in shared}
