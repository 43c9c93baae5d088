"""Fabric graph: switches and hosts as vertices, links with bandwidth, plus per-level tables.

Placement works on integer tables (host index -> domain index per level) because a 100k-GPU
fabric has ~12,500 hosts and solver set-up must stay in milliseconds; the networkx graph is the
source of truth for structure and is what `topology show` and link-level questions walk.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import networkx as nx
import numpy as np
import numpy.typing as npt

from scheduler.model.constraints import NodeConstraints
from scheduler.model.topology import HostSpec, LevelSpec, Tier, TopologySpec

ROOT = "fabric"
ADMITS_KEPT = 4096  # host masks kept per fabric, one per constraint set seen


class UnknownLevelError(ValueError):
    """A level name the fabric does not have."""


def domain_keys(host: HostSpec, levels: tuple[LevelSpec, ...]) -> tuple[str, ...]:
    """Qualified domain key per level, host first: names repeat under different parents
    (Lingjun reuses ToR names across aggregation groups), so a key is the path from the top. A
    host without an NVLink domain is alone in its own; one without an optional level's domain
    shares one named after the level."""
    keys: list[str] = []
    path = ""
    for level in reversed(levels[1:]):
        alone = "~" + host.name if level.nvlink else level.name
        path = (
            f"{path}/{host.domains.get(level.name, alone)}"
            if path
            else host.domains.get(level.name, alone)
        )
        keys.append(path)
    return (host.name, *reversed(keys))


@dataclass(frozen=True)
class Fabric:
    spec: TopologySpec
    hosts: tuple[HostSpec, ...] = field(init=False)
    # domain[level][host index] -> domain index at that level (level 0 is the host itself)
    domain: tuple[tuple[int, ...], ...] = field(init=False)
    # names[level][domain index] -> qualified key
    names: tuple[tuple[str, ...], ...] = field(init=False)
    # parent[level][domain index] -> domain index at level + 1 (empty for the top level)
    parent: tuple[tuple[int, ...], ...] = field(init=False)
    # nvlink domains with more than one host (real NVLink); others are a host on its own
    real_nvlink: frozenset[int] = field(init=False)

    def __post_init__(self) -> None:
        hosts = self.spec.hosts
        keys = [domain_keys(h, self.spec.levels) for h in hosts]
        domain: list[list[int]] = []
        names: list[list[str]] = []
        for level in range(self.depth):
            index: dict[str, int] = {}
            column = [index.setdefault(k[level], len(index)) for k in keys]
            domain.append(column)
            names.append(list(index))
        parent: list[tuple[int, ...]] = []
        for level in range(self.depth - 1):
            up = [0] * len(names[level])
            for h in range(len(hosts)):
                up[domain[level][h]] = domain[level + 1][h]
            parent.append(tuple(up))
        parent.append(())
        sizes = [0] * len(names[Tier.NVLINK])
        for d in domain[Tier.NVLINK]:
            sizes[d] += 1
        object.__setattr__(self, "hosts", hosts)
        object.__setattr__(self, "domain", tuple(tuple(c) for c in domain))
        object.__setattr__(self, "names", tuple(tuple(n) for n in names))
        object.__setattr__(self, "parent", tuple(parent))
        object.__setattr__(
            self, "real_nvlink", frozenset(d for d, size in enumerate(sizes) if size > 1)
        )

    @property
    def levels(self) -> tuple[str, ...]:
        """Level names from the bottom up (Tier positions hold whatever the names)."""
        return self.spec.names

    @property
    def depth(self) -> int:
        return len(self.spec.levels)

    @property
    def top(self) -> int:
        return self.depth - 1

    def index(self, name: str) -> int:
        """The position of a named level; UnknownLevelError names the ones there are."""
        try:
            return self.levels.index(name)
        except ValueError:
            raise UnknownLevelError(
                f"unknown level {name!r}; levels are {', '.join(self.levels)}"
            ) from None

    @property
    def block(self) -> int | None:
        """Tier.BLOCK when the fabric has a level above its racks."""
        return Tier.BLOCK if self.depth > Tier.BLOCK else None

    @cached_property
    def host_index(self) -> dict[str, int]:
        return {h.name: i for i, h in enumerate(self.hosts)}

    @cached_property
    def gb_cost(self) -> tuple[float, ...]:
        """Objective weight of one GB crossing each level."""
        return tuple(float(level.cost_weight or 0.0) for level in self.spec.levels)

    @cached_property
    def gbps(self) -> tuple[float, ...]:
        """Effective per-host bandwidth of the links crossed at each level."""
        return tuple(level.effective_gbps for level in self.spec.levels)

    @cached_property
    def dfs_order(self) -> tuple[int, ...]:
        """Hosts in depth-first order along the tree: ranks follow it so ring neighbours share
        the lowest possible switch."""
        # lexsort's last key sorts first: the top level, then each level below it
        return tuple(np.lexsort(self.columns).tolist())

    @cached_property
    def graph(self) -> nx.DiGraph:
        """Tree from the fabric root to hosts; edges carry the uplink bandwidth of the child."""
        g = nx.DiGraph()
        g.add_node(ROOT, level="root")
        for h, host in enumerate(self.hosts):
            child = host.name
            g.add_node(child, level="host", gpus=host.gpus, pool=host.pool)
            for level in range(1, self.depth):
                node = self.names[level][self.domain[level][h]]
                g.add_node(node, level=self.levels[level])
                g.add_edge(node, child, bandwidth_gbps=self.gbps[level - 1])
                child = node
            g.add_edge(ROOT, child, bandwidth_gbps=self.gbps[self.top])
        return g

    @cached_property
    def columns(self) -> tuple[npt.NDArray[np.int64], ...]:
        """domain[level] as numpy arrays, for vectorised capacity sums."""
        return tuple(np.asarray(c, dtype=np.int64) for c in self.domain)

    @cached_property
    def parent_columns(self) -> tuple[npt.NDArray[np.int64], ...]:
        """parent[level] as numpy arrays (empty for the top level)."""
        return tuple(np.asarray(p, dtype=np.int64) for p in self.parent)

    @cached_property
    def parents_ascend(self) -> tuple[bool, ...]:
        """Per level: whether its domains' parents never go down as the domains go up (each
        parent numbered in its children's order), so ascending domains have ascending parents."""
        return tuple(bool((np.diff(p) >= 0).all()) for p in self.parent_columns)

    @cached_property
    def extended_names(self) -> tuple[str, ...]:
        """Extended resources any host offers."""
        return tuple(sorted({name for h in self.hosts for name in h.extended}))

    @cached_property
    def gpus(self) -> npt.NDArray[np.int64]:
        return np.asarray([h.gpus for h in self.hosts], dtype=np.int64)

    @cached_property
    def cpu_milli(self) -> npt.NDArray[np.int64]:
        return np.asarray([h.cpu_milli for h in self.hosts], dtype=np.int64)

    @cached_property
    def max_pods(self) -> npt.NDArray[np.int64]:
        return np.asarray([h.max_pods for h in self.hosts], dtype=np.int64)

    @cached_property
    def host_pool(self) -> dict[str, str]:
        """host name -> its pool."""
        return {h.name: h.pool for h in self.hosts}

    @cached_property
    def pool_mask(self) -> dict[str, npt.NDArray[np.bool_]]:
        pools = np.asarray([h.pool for h in self.hosts])
        return {str(p): pools == p for p in np.unique(pools)}

    @cached_property
    def pool_span(self) -> dict[str, slice | npt.NDArray[np.int64]]:
        """Per pool, its hosts as a slice where they are consecutive (reading a column through
        it copies nothing), else their indexes."""
        out: dict[str, slice | npt.NDArray[np.int64]] = {}
        for pool, mask in self.pool_mask.items():
            hosts = np.flatnonzero(mask)
            consecutive = hosts[-1] - hosts[0] + 1 == len(hosts)
            out[pool] = slice(int(hosts[0]), int(hosts[-1]) + 1) if consecutive else hosts
        return out

    @cached_property
    def largest_nvlink(self) -> dict[str, int]:
        """Per pool, the GPUs of its largest NVLink domain in service (a compact step's)."""
        return {pool: int(nvlink_gpus(self, mask).max()) for pool, mask in self.pool_mask.items()}

    @property
    def spares(self) -> int:
        """Hosts each multi-host NVLink domain keeps out of service (placement/spares.py)."""
        return self.spec.levels[Tier.NVLINK].spares

    def gpus_in_service(self, mask: npt.NDArray[np.bool_]) -> int:
        """GPUs of the hosts in `mask` that can hold pods at once: less each domain's spares."""
        return int(nvlink_gpus(self, mask).sum())

    def admits(self, constraints: NodeConstraints) -> npt.NDArray[np.bool_]:
        """Hosts whose labels and taints admit a pod with these constraints. Gangs mostly share
        a handful of constraint sets, so each mask is computed once per fabric."""
        mask = self._admits.get(constraints)
        if mask is None:
            keys = constraints.label_keys
            kinds: dict[tuple[object, ...], bool] = {}
            mask = np.empty(len(self.hosts), dtype=bool)
            for h, host in enumerate(self.hosts):
                # hosts alike in the labels it reads and in their taints get the same answer
                kind = (host.taints, *(host.labels.get(k) for k in keys))
                found = kinds.get(kind)
                if found is None:
                    found = kinds[kind] = constraints.admits(host.labels, host.taints)
                mask[h] = found
            if len(self._admits) >= ADMITS_KEPT:  # pod rules change with the pods: stay bounded
                self._admits.clear()
            self._admits[constraints] = mask
        return mask

    @cached_property
    def _admits(self) -> dict[NodeConstraints, npt.NDArray[np.bool_]]:
        return {}

    @cached_property
    def dfs_position(self) -> dict[int, int]:
        return {h: i for i, h in enumerate(self.dfs_order)}

    @cached_property
    def dfs_rank(self) -> npt.NDArray[np.int64]:
        """dfs_position as an array, for sorting many hosts at once."""
        rank = np.empty(len(self.hosts), dtype=np.int64)
        rank[list(self.dfs_order)] = np.arange(len(self.hosts))
        return rank

    @cached_property
    def ancestor(self) -> tuple[tuple[tuple[int, ...], ...], ...]:
        """ancestor[low][high][d]: the level-`high` domain above level-`low` domain d."""
        table: list[list[tuple[int, ...]]] = []
        for low in range(self.depth):
            row: list[tuple[int, ...]] = []
            for high in range(self.depth):
                up = [0] * len(self.names[low])
                if high > low:
                    for h in range(len(self.hosts)):
                        up[self.domain[low][h]] = self.domain[high][h]
                row.append(tuple(up))
            table.append(row)
        return tuple(tuple(r) for r in table)

    def lowest_common_level(self, a: int, b: int) -> int:
        """Lowest level index at which hosts a and b share a domain (0 when a == b)."""
        for level in range(self.depth):
            if self.domain[level][a] == self.domain[level][b]:
                return level
        return self.depth

    def display(self, level: int, index: int) -> str:
        """Short name of a domain: the last part of its qualified key."""
        name = self.names[level][index]
        return name.rsplit("/", 1)[-1].lstrip("~")


def nvlink_gpus(fabric: Fabric, mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """GPUs per NVLink domain of the hosts in `mask` that can be in service at once: all
    of a host alone; of a multi-host domain, its largest hosts less the spares."""
    column = fabric.columns[Tier.NVLINK]
    n = len(fabric.names[Tier.NVLINK])
    gpus = np.where(mask, fabric.gpus, 0)
    if not fabric.spares:
        return np.bincount(column, weights=gpus, minlength=n).astype(np.int64)
    order = np.lexsort((-gpus, column))  # each domain's hosts, the largest first
    ranked = column[order]
    rank = ranks(ranked)
    sizes = np.bincount(column, minlength=n)
    limit = np.where(sizes > 1, sizes - fabric.spares, sizes)
    kept = np.zeros(len(column), dtype=bool)
    kept[order] = rank < limit[ranked]
    return np.bincount(column, weights=np.where(kept, gpus, 0), minlength=n).astype(np.int64)


def ranks(groups: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Each element's position within its run of equal values, `groups` sorted."""
    return np.arange(len(groups)) - np.searchsorted(groups, groups)
