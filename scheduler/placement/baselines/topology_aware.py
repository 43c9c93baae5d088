"""Topology-aware baselines.

Kueue TAS (KEP-2724): find the lowest level at which one domain holds the gang (never above the
required level), pick that domain, then descend level by level distributing the count over the
children. BestFit takes children by free capacity, largest first, and for the last share picks
the child with the least capacity that still fits it. LeastFreeCapacity takes the least free
children first, filling fragments.

KAI's bin-packing is the LeastFreeCapacity descent. Slurm topology/block is topology/tree with
the NVLink domains as its leaves where the fabric has multi-host ones.

Slurm topology/tree: the lowest-level switch whose subtree holds the job (the one with the
fewest free slots among those), then its leaf switches (racks): a leaf that alone fits the
remainder, tightest first, else the leaf with the most free slots; nodes in order inside a leaf.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from scheduler.model.topology import Tier
from scheduler.placement.baselines.required import restrict
from scheduler.placement.baselines.take import take
from scheduler.placement.capacity import Capacity

Pick = Callable[[list[tuple[int, int]], int], list[tuple[int, int]]]


def _best_fit(children: list[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    """(domain, capacity) pairs to use, each with its share, largest first, tightest last."""
    out: list[tuple[int, int]] = []
    rest = sorted(children, key=lambda dc: (-dc[1], dc[0]))
    while n > 0 and rest:
        fitting = [dc for dc in rest if dc[1] >= n]
        if fitting:
            d, _ = min(fitting, key=lambda dc: (dc[1], dc[0]))
            out.append((d, n))
            return out
        d, c = rest.pop(0)
        out.append((d, c))
        n -= c
    return out


def _least_free(children: list[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    fitting = [dc for dc in children if dc[1] >= n]
    if fitting:
        d, _ = min(fitting, key=lambda dc: (dc[1], dc[0]))
        return [(d, n)]
    out: list[tuple[int, int]] = []
    for d, c in sorted(children, key=lambda dc: (dc[1], dc[0])):
        if n <= 0:
            break
        out.append((d, min(c, n)))
        n -= c
    return out


def _start(capacity: Capacity) -> tuple[int, int] | None:
    """(level, domain): the lowest level where one domain holds the gang, tightest such."""
    gang = capacity.gang
    n = gang.pods
    fabric = capacity.snapshot.fabric
    top = fabric.top if gang.required_level is None else fabric.index(gang.required_level)
    plain = gang.tp_pods == 1 and not gang.slices and gang.max_pods_per_rack is None
    for level in range(1, top + 1):
        if plain:  # capacities are plain sums: one vectorised pass per level
            sums = np.bincount(
                capacity.snapshot.fabric.columns[level][capacity.hosts], weights=capacity.pods
            )
            fits = np.nonzero(sums >= n)[0]
            if len(fits):
                return level, int(fits[np.argmin(sums[fits])])
            continue
        fitting = [(c, d) for d, c in capacity.per_domain[level].items() if c >= n]
        if fitting:
            return level, min(fitting)[1]
    return None


def _kueue(capacity: Capacity, pick: Pick) -> dict[int, int] | None:
    start = _start(capacity)
    if start is None:
        if capacity.gang.required_level is not None:
            return None
        level, shares = (
            capacity.snapshot.fabric.top,
            pick(list(capacity.per_domain[-1].items()), capacity.gang.pods),
        )
    else:
        level, shares = start[0], [(start[1], capacity.gang.pods)]
        capacity = restrict(capacity, *start)  # descend inside the chosen domain only
    while level > 1:
        children = _children(capacity, level - 1, level)
        level, shares = level - 1, [x for d, s in shares for x in pick(children.get(d, []), s)]
    hosts = _children(capacity, 0, 1)
    counts: dict[int, int] = {}
    for domain, share in shares:
        by_fit = sorted(hosts[domain], key=lambda hc: (-hc[1], hc[0]))
        got = take(capacity, [h for h, _ in by_fit], share, within=Tier.NVLINK)
        if got is None:
            return None
        counts.update(got)
    return counts if sum(counts.values()) == capacity.gang.pods else None


def _children(capacity: Capacity, child: int, level: int) -> dict[int, list[tuple[int, int]]]:
    """domain of `level` -> its (child domain, capacity) pairs."""
    up = capacity.snapshot.fabric.ancestor[child][level]
    out: dict[int, list[tuple[int, int]]] = {}
    for d, c in capacity.per_domain[child].items():
        out.setdefault(up[d], []).append((d, c))
    return out


def kueue_best_fit(capacity: Capacity, _seed: int) -> dict[int, int] | None:
    return _kueue(capacity, _best_fit)


def kueue_least_free(capacity: Capacity, _seed: int) -> dict[int, int] | None:
    return _kueue(capacity, _least_free)


def kai_bin_pack(capacity: Capacity, _seed: int) -> dict[int, int] | None:
    """KAI scheduler's default: bin-packing (the fullest place that still fits, at every level:
    Kueue's LeastFreeCapacity descent), from the lowest domain that holds the gang."""
    return _kueue(capacity, _least_free)


def slurm_tree(capacity: Capacity, _seed: int) -> dict[int, int] | None:
    return _slurm(capacity, Tier.RACK)


def slurm_block(capacity: Capacity, _seed: int) -> dict[int, int] | None:
    """Slurm topology/block: the base blocks are the NVLink domains where the fabric has
    multi-host ones (one block per NVL72 rack, `BlockSizes=18`), else the racks; the job goes
    to as few blocks as hold it, tightest first, as topology/tree does with its leaves."""
    leaf = Tier.NVLINK if capacity.snapshot.fabric.real_nvlink else Tier.RACK
    return _slurm(capacity, leaf)


def _slurm(capacity: Capacity, leaf: int) -> dict[int, int] | None:
    start = _start(capacity)
    if start is None:
        if capacity.gang.required_level is not None:
            return None
        level, domain = capacity.snapshot.fabric.depth, -1
    else:
        level, domain = start
    scope = capacity if domain < 0 else restrict(capacity, level, domain)
    if level <= leaf:
        return take(scope, sorted(scope.slots))
    leaves = list(scope.per_domain[leaf].items())
    order: list[int] = []
    n = capacity.gang.pods
    while n > 0 and leaves:
        fitting = [dc for dc in leaves if dc[1] >= n]
        d, c = (
            min(fitting, key=lambda dc: (dc[1], dc[0]))
            if fitting
            else max(leaves, key=lambda dc: (dc[1], -dc[0]))
        )
        leaves.remove((d, c))
        order.append(d)
        n -= c
    column = capacity.snapshot.fabric.domain[leaf]
    # the leaves chosen first, then the switch's others in order: where the chosen leaves'
    # free slots cannot be cut into the gang's slices, the job goes on to the next leaf
    position = {d: i for i, d in enumerate(order)}
    hosts = sorted(scope.slots, key=lambda h: (position.get(column[h], len(order)), column[h], h))
    return take(scope, hosts)
