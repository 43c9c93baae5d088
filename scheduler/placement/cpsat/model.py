"""The CP-SAT model of one gang (design.md section 5), one function per constraint family.

Variables: pods x and hosts used u per bin; a boolean y per domain at every level above the
bins' leaf; per level the count k of domains spanned and a boolean `many` for k >= 2, so the
ring crossings at that level are exactly k - 1 + many (0 when the gang stays in one domain);
a boolean z per domain with running gangs on its uplink, set where the gang crosses it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from scheduler.model.gang import objective_of
from scheduler.model.topology import Tier
from scheduler.placement import slices
from scheduler.placement.bounds import Bound
from scheduler.placement.capacity import Capacity
from scheduler.placement.cpsat.bins import Bin
from scheduler.placement.scoring import shared_uplinks

Expr = cp_model.LinearExprT


def total(terms: Iterable[Expr]) -> cp_model.LinearExpr:
    return cp_model.LinearExpr.sum(list(terms))


SCALE = 1_000  # integer objective units per weighted GB (weights are >= 0.05 x 2 GB)
HOST, NVLINK, RACK = Tier.HOST, Tier.NVLINK, Tier.RACK


@dataclass
class GangModel:
    model: cp_model.CpModel
    bins: list[Bin]
    pods: list[cp_model.IntVar]
    used: list[cp_model.IntVar]
    spanned: list[cp_model.LinearExpr] = field(default_factory=list)
    used_domain: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)
    many: list[cp_model.IntVar] = field(default_factory=list)


def build(capacity: Capacity, bins: list[Bin], bound: Bound, weights: list[int]) -> GangModel:
    gang = capacity.gang
    m = cp_model.CpModel()
    pods = [m.new_int_var(0, min(b.capacity, gang.pods), f"x{i}") for i, b in enumerate(bins)]
    used = [m.new_int_var(0, len(b.hosts), f"u{i}") for i, b in enumerate(bins)]
    gm = GangModel(m, bins, pods, used)
    m.add(total(pods) == gang.pods)
    _hosts_used(gm)
    size = slices.sizes(capacity.snapshot.fabric, gang)
    _tp_groups(gm, size)
    _domains(gm, capacity, size)
    _spans(gm, bound, capacity.snapshot.fabric.depth)
    _required(gm, capacity, gang.required_level)
    if gang.max_pods_per_rack is not None:
        _rack_cap(gm, gang.max_pods_per_rack)
    _objective(gm, capacity, weights)
    return gm


def _hosts_used(gm: GangModel) -> None:
    for b, x, u in zip(gm.bins, gm.pods, gm.used, strict=True):
        gm.model.add(x <= b.slots * u)
        gm.model.add(x >= u)


def _tp_groups(gm: GangModel, size: tuple[int, ...]) -> None:
    """Whole groups on every host (host slices) and in every NVLink domain (TP groups, NVLink
    slices): a bin of lone hosts is filled host by host, so its count is a multiple too."""
    per_nvlink: dict[int, list[tuple[Bin, cp_model.IntVar]]] = {}
    for b, x in zip(gm.bins, gm.pods, strict=True):
        own = size[NVLINK] if b.nvlink is None else size[HOST]
        if own > 1:
            _multiple_of(gm.model, [x], b.capacity, own, f"g{id(b)}")
        if b.nvlink is not None:
            per_nvlink.setdefault(b.nvlink, []).append((b, x))
    if size[NVLINK] == 1:
        return
    for v, pairs in per_nvlink.items():
        top = sum(b.capacity for b, _ in pairs)
        _multiple_of(gm.model, [x for _, x in pairs], top, size[NVLINK], f"tpv{v}")


def _multiple_of(
    m: cp_model.CpModel, xs: list[cp_model.IntVar], top: int, group: int, name: str
) -> None:
    groups = m.new_int_var(0, top // group, name)
    m.add(total(xs) == group * groups)


def _domains(gm: GangModel, capacity: Capacity, size: tuple[int, ...]) -> None:
    """y[level, domain] = 1 when the gang has a pod in it; linked through pod counts."""
    fabric = capacity.snapshot.fabric
    m = gm.model
    members: dict[tuple[int, int], list[cp_model.IntVar]] = {}
    for b, x in zip(gm.bins, gm.pods, strict=True):
        host = b.hosts[0]
        first = NVLINK if b.nvlink is not None else RACK
        for level in range(first, fabric.depth):
            members.setdefault((level, fabric.domain[level][host]), []).append(x)
    caps = capacity.per_domain
    for (level, d), xs in members.items():
        y = m.new_bool_var(f"y{level}_{d}")
        m.add(total(xs) <= min(caps[level][d], capacity.gang.pods) * y)
        m.add(total(xs) >= y)
        gm.used_domain[(level, d)] = y
        if level >= RACK and size[level] > 1:  # a slice at this level: whole groups
            _multiple_of(m, xs, caps[level][d], size[level], f"s{level}_{d}")
    # a used domain implies its parent is used: redundant, but it tightens the LP relaxation
    for (level, d), y in gm.used_domain.items():
        if level < fabric.top:
            parent = fabric.parent[level][d]
            m.add_implication(y, gm.used_domain[(level + 1, parent)])


def _spans(gm: GangModel, bound: Bound, depth: int) -> None:
    m = gm.model
    by_level: list[list[cp_model.IntVar]] = [[] for _ in range(depth)]
    for (level, _), y in gm.used_domain.items():
        by_level[level].append(y)
    lone = [u for b, u in zip(gm.bins, gm.used, strict=True) if b.nvlink is None]
    for level in range(depth):
        if level == HOST:
            k: cp_model.LinearExpr = total(gm.used)
        elif level == NVLINK:
            k = total(by_level[NVLINK]) + total(lone)
        else:
            k = total(by_level[level])
        many = m.new_bool_var(f"many{level}")
        m.add(k >= 2).only_enforce_if(many)
        m.add(k <= 1).only_enforce_if(~many)
        # exact per-level bound as a constraint: the LP relaxation is weak without it
        m.add(k >= bound.kstar[level])
        gm.spanned.append(k)
        gm.many.append(many)


def _required(gm: GangModel, capacity: Capacity, level_name: str | None) -> None:
    if level_name is not None:
        gm.model.add(gm.spanned[capacity.snapshot.fabric.index(level_name)] == 1)


def _rack_cap(gm: GangModel, cap: int) -> None:
    per_rack: dict[int, list[cp_model.IntVar]] = {}
    for b, x in zip(gm.bins, gm.pods, strict=True):
        per_rack.setdefault(b.rack, []).append(x)
    for xs in per_rack.values():
        gm.model.add(total(xs) <= cap)


def ring_terms(gm: GangModel, weights: list[int]) -> cp_model.LinearExpr:
    """Weighted ring crossings: k - 1 + many per level (0 inside one domain)."""
    return total(
        w * (k - 1 + many) for w, k, many in zip(weights, gm.spanned, gm.many, strict=True)
    )


def load_terms(gm: GangModel, capacity: Capacity, weights: list[int]) -> cp_model.LinearExpr:
    """J's load term (scoring.py): w_l x the running gangs crossing a used domain's uplink, for
    each domain at a level the gang spans (z >= y + many - 1: a minimisation sets z to it)."""
    loads = shared_uplinks(capacity.snapshot)
    terms = []
    for (level, d), y in gm.used_domain.items():
        gangs = int(loads[level][d]) if level in loads else 0
        if gangs and weights[level]:
            z = gm.model.new_bool_var(f"z{level}_{d}")
            gm.model.add(z >= y + gm.many[level] - 1)
            terms.append(weights[level] * gangs * z)
    return total(terms)


def _objective(gm: GangModel, capacity: Capacity, weights: list[int]) -> None:
    gang = capacity.gang
    objective = objective_of(gang)
    # fragments: a host or rack with nothing running is worth keeping whole for large gangs
    fresh_racks = _fresh_racks(gm, capacity)
    fresh_hosts = total(
        u for b, u in zip(gm.bins, gm.used, strict=True) if b.empty_hosts == len(b.hosts)
    )
    preferred = total(
        round(weight * max(weights)) * (gm.spanned[capacity.snapshot.fabric.index(level)] - 1)
        for level, weight in gang.preferred_levels.items()
    )
    best_fit = total(b.slots * u for b, u in zip(gm.bins, gm.used, strict=True))
    if objective == "pack":
        ring = ring_terms(gm, weights) + load_terms(gm, capacity, weights)
        gm.model.minimize(ring + fresh_racks + preferred)
    elif objective == "fill":
        gm.model.minimize(1000 * fresh_racks + 100 * fresh_hosts + best_fit + preferred)
    else:  # spread: as many racks as the per-rack cap and the gang allow, then fill fragments
        gm.model.minimize(-(10**6) * gm.spanned[RACK] + 100 * fresh_hosts + best_fit + preferred)


def _fresh_racks(gm: GangModel, capacity: Capacity) -> cp_model.LinearExpr:
    busy = capacity.snapshot.busy_racks()
    return total(y for (level, d), y in gm.used_domain.items() if level == RACK and d not in busy)
