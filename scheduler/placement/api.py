"""`place()`: the one entry point the CLI, the simulator and the operator share."""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from scheduler.model.gang import GangRequest, objective_of
from scheduler.model.placement import PlaceConfig, Placement, PlacementStatus, PodAssignment
from scheduler.placement import (
    collector,
    cpsat,
    hints,
    parts,
    patience,
    roles,
    slices,
    spread,
    stages,
)
from scheduler.placement.baselines import BASELINES
from scheduler.placement.bounds import lower_bound, objective_bound
from scheduler.placement.capacity import Capacity
from scheduler.placement.cost import domains_spanned, traffic
from scheduler.placement.fragments import Breakage, broken_by
from scheduler.placement.ranks import ranks_of
from scheduler.placement.reasons import explain, not_found, unknown_levels
from scheduler.placement.scoring import (
    fresh_rack_weight,
    level_weights,
    objective,
    preference_weights,
)
from scheduler.placement.snapshot import Snapshot

RACKWISE = hints.RACKWISE
POLICIES: tuple[str, ...] = (RACKWISE, *BASELINES)


class UnknownPolicyError(ValueError):
    pass


def place(
    snapshot: Snapshot, gangs: Iterable[GangRequest], config: PlaceConfig | None = None
) -> list[Placement]:
    """Place gangs one at a time in priority order (stable), all-or-nothing each.

    The snapshot is not changed; each gang sees the capacity the earlier ones left."""
    config = config or PlaceConfig()
    if config.policy not in POLICIES:
        raise UnknownPolicyError(
            f"unknown policy {config.policy!r}; choose from {', '.join(POLICIES)}"
        )
    work = snapshot.copy()
    ordered = sorted(gangs, key=lambda g: -g.priority)
    results: dict[str, Placement] = {}
    for gang in ordered:
        placement = place_one(work, gang, config)
        if placement.placed:
            work.apply(gang, placement)
        results[gang.name] = placement
    return [results[g.name] for g in ordered]


def place_one(snapshot: Snapshot, gang: GangRequest, config: PlaceConfig) -> Placement:
    with collector.paused():
        return _place_one(snapshot, gang, config)


def _place_one(snapshot: Snapshot, gang: GangRequest, config: PlaceConfig) -> Placement:
    """The gang as its users state it to the policy (hints.told); preferred slices kept where
    a placement keeps them, the gang placed without them where none does. For rackwise, which
    reads the expert-parallel block as preferred, its objective for such a gang is (blocks
    split, J), in that order, and its labels are for J among the placements that split none
    when one exists."""
    fabric = snapshot.fabric
    if config.hints:
        gang = hints.told(fabric, gang, config.policy)
    if gang.preferred_slices and unknown_levels(fabric, gang) is None:
        first = hints.kept(gang)
        if slices.problem(fabric, first) is None:
            found = _place(snapshot, first, config)
            if found.placed:
                return found
        found = _place(snapshot, hints.dropped(gang), config)
        return found.model_copy(update={"unkept": gang.preferred_slices}) if found.placed else found
    return _place(snapshot, gang, config)


def _place(snapshot: Snapshot, gang: GangRequest, config: PlaceConfig) -> Placement:
    start = time.perf_counter()
    capacity = Capacity.of(snapshot, gang)
    fabric = snapshot.fabric
    reason = (
        unknown_levels(fabric, gang)
        or slices.problem(fabric, gang)
        or roles.problem(fabric, gang)
        or spread.problem(capacity)
        or explain(capacity)
    )
    if reason is not None:
        return _unplaceable(gang, config.policy, reason, start)
    if gang.spread:
        return _spread(capacity, config, start)
    weights = level_weights(fabric, gang)
    ring = functools.cache(lambda: lower_bound(capacity, weights))
    prefs = preference_weights(fabric, gang, weights)
    j_bound = functools.cache(lambda: objective_bound(ring(), prefs))
    proven: float | None = None
    premium, breakage = 0.0, None
    if config.policy == RACKWISE:
        solution = cpsat.solve(capacity, ring, weights, config, j_bound)
        counts = solution.counts if solution else None
        proven = solution.bound if solution else None
        engine = solution.engine if solution else "cp-sat"
        if solution is not None:
            premium, breakage = solution.premium, solution.breakage
    else:
        counts, engine = BASELINES[config.policy](capacity, config.seed), config.policy
    if counts is None:
        return _unplaceable(gang, config.policy, not_found(config.policy, RACKWISE), start)
    wait = patience.reason(capacity, counts, config)
    if wait is not None:
        return _unplaceable(gang, config.policy, wait, start, PlacementStatus.WAITING)
    value = j_value(capacity, counts, config)
    if config.policy == RACKWISE and gang.constraints.preferred:
        liked = _liked(capacity, counts, value, config, weights)
        if liked is not None:
            optimum = value / (1 + premium)  # J of the J-optimal placement (the bound's)
            counts, value = liked
            premium = max(0.0, value / optimum - 1) if optimum > 0 else 0.0
    bound = _bound(gang, proven, config.report_bound, j_bound)
    placement = finalize(
        capacity, counts, config.policy, value, bound, start, engine, config.stage_ranks
    )
    broken = _broken(snapshot, gang, counts, breakage) if config.report_broken else {}
    placement = placement.model_copy(update={"broken": broken, "premium": premium})
    return _with_roles(capacity, placement, counts, start, config)


def _broken(
    snapshot: Snapshot, gang: GangRequest, counts: Mapping[int, int], breakage: Breakage | None
) -> dict[str, int]:
    """The whole domains the placement breaks (from the solver's prices when it weighed them)."""
    if not gang.gpus_per_pod:  # its pods take no GPU: every domain's GPUs stay free
        return {}
    if breakage is None:
        return broken_by(snapshot, gang.pool, counts)
    return breakage.broken(snapshot, counts)


def _liked(
    capacity: Capacity,
    counts: Mapping[int, int],
    value: float,
    config: PlaceConfig,
    weights: list[float],
) -> tuple[dict[int, int], float] | None:
    """Preferred node affinity as a tie-break: the same gang solved again on the hosts the gang
    prefers most (the highest summed weight of matching preferred terms), kept when its J is no
    higher (the bound found before still holds: it is a bound on J over every host). None when
    the placement is on those hosts already or they cannot hold one as cheap."""
    gang, fabric = capacity.gang, capacity.snapshot.fabric
    score = np.array([gang.constraints.score(fabric.hosts[h].labels) for h in capacity.hosts])
    top = int(score.max(initial=0))
    keep = score == top
    on = dict(zip(capacity.hosts.tolist(), keep.tolist(), strict=True))
    if top == 0 or all(on[h] for h, n in counts.items() if n > 0):
        return None
    narrowed = Capacity(capacity.snapshot, gang, capacity.hosts[keep], capacity.pods[keep])
    if narrowed.total < gang.pods:
        return None
    ring = functools.cache(lambda: lower_bound(narrowed, weights))
    prefs = preference_weights(fabric, gang, weights)
    found = cpsat.solve(narrowed, ring, weights, config, lambda: objective_bound(ring(), prefs))
    if found is None:
        return None
    other = j_value(capacity, found.counts, config)
    return (dict(found.counts), other) if other <= value * (1 + 1e-9) else None


def _spread(capacity: Capacity, config: PlaceConfig, start: float) -> Placement:
    """Every policy places a gang with spread constraints the same way: as evenly as asked
    (placement/spread.py); J is reported for what it is, with no bound."""
    found = spread.place(capacity)
    if isinstance(found, str):
        return _unplaceable(capacity.gang, config.policy, found, start)
    value = j_value(capacity, found, config)
    placement = finalize(capacity, found, config.policy, value, None, start, "spread")
    return _with_roles(capacity, placement, found, start, config)


def j_value(capacity: Capacity, counts: Mapping[int, int], config: PlaceConfig) -> float:
    """J of the workers' `counts` (host -> pods) on the capacity's snapshot, as `place_one`
    reports it for a placement it makes there."""
    weights = level_weights(capacity.snapshot.fabric, capacity.gang)
    fresh = fresh_rack_weight(capacity, weights, config.scheduling.fragmentation_weight)
    return objective(capacity, counts, weights, fresh)


def j_floor(capacity: Capacity) -> float:
    """A lower bound on J of every placement `place_one` can make for the capacity's gang on
    its snapshot (the ring bound and the preferred levels' extra domains, as the `bound` it
    reports; inf when nothing fits): no placement there can cost less."""
    fabric, gang = capacity.snapshot.fabric, capacity.gang
    weights = level_weights(fabric, gang)
    prefs = preference_weights(fabric, gang, weights)
    return objective_bound(lower_bound(capacity, weights), prefs)


def _with_roles(
    capacity: Capacity,
    placement: Placement,
    counts: Mapping[int, int],
    start: float,
    config: PlaceConfig,
) -> Placement:
    """The roles' pods after the workers' (placement/roles.py); for rackwise, every part in
    one model (placement/parts.py) when that order leaves a part without room, or when a ring
    role's J is not proven optimal: the better of the two, or the gang unplaceable (all or
    nothing) when neither places it."""
    snapshot, gang = capacity.snapshot, capacity.gang
    if not gang.roles:
        return placement
    work = snapshot.copy()
    work.apply(gang, placement)
    others = roles.place_roles(work, gang, [h for h, n in counts.items() if n > 0])
    found = None if isinstance(others, str) else _whole(capacity, placement, others, config)
    if config.policy == RACKWISE and (found is None or _improvable(gang, found)):
        joint = _joint(capacity, placement.bound, config)
        if joint is not None and (found is None or joint.objective < found.objective * (1 - 1e-9)):
            found = joint
    if found is None:
        why = _why_not(gang, str(others)) if config.policy == RACKWISE else str(others)
        return _unplaceable(gang, placement.policy, why, start)
    return found.model_copy(update={"solve_seconds": time.perf_counter() - start})


def _why_not(gang: GangRequest, first: str) -> str:
    """Why no part order places the gang: with a group-wide level, that no domain of it holds
    the group; else why the first role that did not fit after the workers did not."""
    group = [r.name for r in gang.roles if roles.grouped(gang, r)]
    if gang.required_level is None or not group:
        return first
    return f"no {gang.required_level} holds the workers and {', '.join(group)} together ({first})"


def _whole(
    capacity: Capacity, placement: Placement, others: list[PodAssignment], config: PlaceConfig
) -> Placement:
    whole = placement.model_copy(update={"pods": (*placement.pods, *others)})
    if any(r.gradients for r in capacity.gang.roles):
        whole = _in_ring(capacity, whole, config)
    return whole


# gangs up to this many pods (all parts) are placed again jointly when a ring role leaves J
# unproven; larger ones keep the nearest-first ring (its gap is reported): the joint model
# grows with the hosts a gang may use, and the engines' speed on large gangs matters more
JOINT_PODS = 64


def _improvable(gang: GangRequest, placement: Placement) -> bool:
    """A ring role's pods count in J: placed after the workers, J may be above the best."""
    ring = any(r.gradients for r in gang.roles)
    size = gang.pods + sum(r.pods for r in gang.roles)
    return ring and size <= JOINT_PODS and not placement.optimal and placement.bound is not None


def _joint(capacity: Capacity, bound: float | None, config: PlaceConfig) -> Placement | None:
    """Every part in one model; the workers' bound stays the bound (a ring only adds hosts)."""
    start = time.perf_counter()
    gang, fabric = capacity.gang, capacity.snapshot.fabric
    weights = level_weights(fabric, gang)
    fresh = fresh_rack_weight(capacity, weights, config.scheduling.fragmentation_weight)
    work = config.solver.work_limit or config.solver.time_limit_s
    found = parts.solve(capacity.snapshot, gang, weights, fresh, work)
    if found is None:
        return None
    workers = found.counts[parts.WORKERS]
    value = j_value(capacity, workers, config)
    placement = finalize(capacity, workers, config.policy, value, bound, start, "joint")
    first, others = gang.pods, []
    for role in gang.roles:
        others += roles.assign(fabric, role, found.counts[role.name], first)
        first += role.pods
    return _whole(capacity, placement, others, config)


def _in_ring(capacity: Capacity, placement: Placement, config: PlaceConfig) -> Placement:
    """J, the traffic and the domains of a gang whose roles join the gradient ring count their
    pods too. The bound (the workers' alone) stays valid, since the ring only adds hosts; the
    placement is optimal only where J still meets it (roles are placed greedily, nearest)."""
    fabric, gang = capacity.snapshot.fabric, capacity.gang
    ring = {r.name for r in gang.roles if r.gradients}
    counts = Counter(fabric.host_index[p.host] for p in placement.pods if p.role in ring | {""})
    value = j_value(capacity, counts, config)
    flow = traffic(fabric, gang, placement.pods)
    bound = placement.bound
    return placement.model_copy(
        update={
            "objective": value,
            "cost": flow.cost,
            "traffic_gb": {lv: round(gb, 6) for lv, gb in zip(fabric.levels, flow.gb, strict=True)},
            "domains": domains_spanned(fabric, list(counts)),
            **dict(zip(("optimal", "gap"), _claim(value, bound), strict=True)),
        }
    )


def _claim(value: float, bound: float | None) -> tuple[bool, float | None]:
    """(optimal, gap) of J `value` against a valid lower bound: optimal only where it is met."""
    if bound is None:
        return False, None
    gap = max(0.0, (value - bound) / value) if value > 0 else 0.0
    return value <= bound * (1 + 1e-9) + 1e-12, gap


def _bound(
    gang: GangRequest, proven: float | None, wanted: bool, j_bound: Callable[[], float]
) -> float | None:
    """A valid lower bound on J: the DP's (its exact minimum, or its coarse merge's bound),
    else the computed bound if asked for.
    Inference pools optimise their own objective (fill, spread), not J: nothing is claimed."""
    if objective_of(gang) != "pack":
        return None
    if proven is not None:
        return proven
    return j_bound() if wanted else None


def finalize(
    capacity: Capacity,
    counts: Mapping[int, int],
    policy: str,
    value: float,
    bound: float | None,
    start: float,
    engine: str,
    stage_ranks: bool = False,
) -> Placement:
    """`value` is J of `counts`; `bound` a valid lower bound on J or None. Optimal means the
    value meets the bound: proven for J, never for anything else. `stage_ranks`: rackwise
    numbers the pods by the gang's shape (placement/stages.py)."""
    fabric = capacity.snapshot.fabric
    gang = capacity.gang
    pods = ranks_of(fabric, counts)
    if stage_ranks and policy == RACKWISE:  # peers number pods by index
        pods = stages.ranked(fabric, gang, pods)
    hosts = [h for h, n in counts.items() if n > 0]
    flow = traffic(fabric, gang, pods)
    optimal, gap = _claim(value, bound)
    return Placement(
        gang=gang.name,
        policy=policy,
        status=PlacementStatus.PLACED,
        pods=pods,
        domains=domains_spanned(fabric, hosts),
        traffic_gb={lv: round(gb, 6) for lv, gb in zip(fabric.levels, flow.gb, strict=True)},
        cost=flow.cost,
        objective=value,
        bound=bound,
        gap=gap,
        optimal=optimal,
        solve_seconds=time.perf_counter() - start,
        engine=engine,
    )


def _unplaceable(
    gang: GangRequest,
    policy: str,
    reason: str,
    start: float,
    status: PlacementStatus = PlacementStatus.UNPLACEABLE,
) -> Placement:
    return Placement(
        gang=gang.name,
        policy=policy,
        status=status,
        reason=reason,
        solve_seconds=time.perf_counter() - start,
    )
