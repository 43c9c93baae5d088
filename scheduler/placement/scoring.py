"""What rackwise minimises for a training gang, and reports as `objective`:

    J = sum over levels of  w_l x ring_crossings(k_l)      (ring edges crossing the level)
      + sum over levels of  p_l x (k_l - 1)                (preferred levels: extra domains)
      + f x (fresh racks used, when the gang spans racks)  (capacity it breaks)

with k_l the gang's domains at level l, w_l the link seconds of one ring edge there, p_l the
preferred-level weight and f the fresh-rack weight (a small share of one host crossing). The
ring part equals `cost.traffic()` for a pure data-parallel gang under depth-first rank order;
for pipeline-parallel gangs it is a proxy, and `cost` (the traffic model) is reported apart.
`optimal` and `bound` always refer to J."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.model.gang import GangRequest
from scheduler.model.topology import Tier
from scheduler.placement.bounds import ring_crossings
from scheduler.placement.capacity import Capacity
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
    spans = [len({fabric.domain[level][h] for h in hosts}) for level in range(fabric.depth)]
    prefs = preference_weights(capacity.snapshot.fabric, capacity.gang, weights)
    value = sum(w * ring_crossings(k) for w, k in zip(weights, spans, strict=True))
    value += sum(p * (k - 1) for p, k in zip(prefs, spans, strict=True))
    if spans[RACK] >= 2:
        free = set(range(len(fabric.names[RACK]))) - capacity.snapshot.busy_racks()
        value += fresh * len({fabric.domain[RACK][h] for h in hosts} & free)
    return value


def ring_cost(capacity: Capacity, counts: Mapping[int, int], weights: Sequence[float]) -> float:
    fabric = capacity.snapshot.fabric
    hosts = [h for h, n in counts.items() if n > 0]
    return sum(
        weights[level] * ring_crossings(len({fabric.domain[level][h] for h in hosts}))
        for level in range(fabric.depth)
    )
