"""The rackwise policy for one gang: exact tree DP where the objective decomposes along the
fabric tree, the CP-SAT model everywhere else, each warm-started by the best answer known."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ortools.sat.python import cp_model

from scheduler.model.gang import objective_of
from scheduler.model.placement import PlaceConfig
from scheduler.placement.baselines import WARM_STARTS
from scheduler.placement.bounds import Bound
from scheduler.placement.capacity import Capacity
from scheduler.placement.cost import domains_spanned
from scheduler.placement.cpsat.bins import Bin, bins_of, fill, make_bins
from scheduler.placement.cpsat.model import SCALE, GangModel, build
from scheduler.placement.fragments import Breakage, Prices
from scheduler.placement.scoring import (
    crossing_prices,
    fresh_rack_weight,
    objective,
    preference_weights,
    ring_cost,
)
from scheduler.placement.treedp import DPResult, Racks, solve_tree
from scheduler.placement.treejudge import Prior


@dataclass(frozen=True)
class Solution:
    counts: dict[int, int]
    # a valid lower bound on the reported objective J where the engine proved one: the tree
    # DP's optimum (exhaustive for J), or its coarse merge's bound; None otherwise. CP-SAT's
    # own optimality is for its scaled model, so its answers are proven only by meeting a
    # valid bound on J (placement.api).
    bound: float | None
    engine: str
    # J paid over the J-optimal placement for breaking less (fragments.py), as a share of it
    premium: float = 0.0
    # the prices it weighed, when it did: placement.api reports what was broken from them
    breakage: Breakage | None = None


def solve(
    capacity: Capacity,
    bound: Callable[[], Bound],
    weights: list[float],
    config: PlaceConfig,
    objective_bound: Callable[[], float],
) -> Solution | None:
    """`bound` (ring crossings) and `objective_bound` (J) are computed on first use: the exact
    DP needs neither."""
    gang = capacity.gang
    fresh = fresh_rack_weight(capacity, weights, config.scheduling.fragmentation_weight)
    if (
        config.solver.engine == "auto"
        and objective_of(gang) == "pack"
        and gang.max_pods_per_rack is None
    ):
        found = _tree(capacity, weights, fresh)
        if found is not None:
            return _less_broken(capacity, weights, fresh, found, config)
    # engine "cp-sat" is the CP-SAT model as designed: warm start from the best baseline only
    hint = _best_baseline(capacity, weights, config.seed)
    packing = objective_of(gang) == "pack"
    if (
        packing
        and hint is not None
        and objective(capacity, hint, weights, fresh) <= objective_bound() * (1 + 1e-9)
    ):
        return Solution(hint, None, "warm-start")
    return model_solve(capacity, bound(), weights, config, hint)


def _tree(
    capacity: Capacity,
    weights: list[float],
    fresh: float,
    breaks: Prices | None = None,
    racks: Racks | None = None,
    prior: Prior | None = None,
) -> DPResult | None:
    gang = capacity.gang
    fabric = capacity.snapshot.fabric
    top = fabric.index(gang.required_level) if gang.required_level else fabric.top
    prefs = preference_weights(fabric, gang, weights)
    load = crossing_prices(capacity.snapshot, weights)
    return solve_tree(
        capacity, weights, top, fresh, prefs, breaks=breaks, racks=racks, prior=prior, crossing=load
    )


def _less_broken(
    capacity: Capacity, weights: list[float], fresh: float, best: DPResult, config: PlaceConfig
) -> Solution:
    """The J-optimal placement, or one that breaks less (fragments.py, priced by who asks for
    whole domains: `config.demand`) for at most `share` (the policy's fragmentation share)
    more J. Minimising J + lam F with lam = share J0 / F0 gives J1 + lam F1 <= J0 + lam F0, so
    J1 <= (1 + share) J0 whatever F1 is; J1 is still checked, exactly, before it is kept. The
    bound stays the J-optimum's: a valid lower bound on J for either."""
    kept = Solution(best.counts, best.bound, "tree-dp")
    share = config.scheduling.fragmentation_share
    j0 = objective(capacity, best.counts, weights, fresh)
    if share <= 0 or j0 <= 0 or len(best.counts) < 2:  # one host: best_fit_host chose already
        return kept
    breakage = Breakage.of(capacity.snapshot, capacity.gang.pool, config.demand)
    kept = Solution(best.counts, best.bound, "tree-dp", breakage=breakage)
    f0 = breakage.value(capacity.snapshot, best.counts)
    if f0 <= 0:
        return kept
    # the tree below the racks carries no prices: the second solve starts from the first's,
    # and skips the domains whose J alone is above what P0 costs with its prices
    lam = share * j0 / f0
    prior = Prior(best.lows, best.value + lam * f0) if best.lows is not None else None
    other = _tree(capacity, weights, fresh, breakage.scaled(lam), best.racks, prior)
    if other is None:
        return kept
    j1 = objective(capacity, other.counts, weights, fresh)
    f1 = breakage.value(capacity.snapshot, other.counts)
    if (
        f1 >= f0
        or j1 > j0 * (1 + share) * (1 + 1e-9)
        or _wider(capacity, other.counts, best.counts)
    ):
        return kept
    # a coarse first solve may leave P0 up to 1% above the optimum: P1 can then cost less
    premium = max(0.0, j1 / j0 - 1)
    return Solution(other.counts, best.bound, "tree-dp", premium, breakage)


def _wider(capacity: Capacity, new: dict[int, int], old: dict[int, int]) -> bool:
    """Does `new` span more domains than `old` at some level? The gang's own footprint is not
    traded for the capacity others keep: a trade only moves it within the same shape."""
    fabric = capacity.snapshot.fabric
    spans = (domains_spanned(fabric, list(c)) for c in (new, old))
    wide, narrow = next(spans), next(spans)
    return any(wide[level] > narrow[level] for level in wide)


def model_solve(
    capacity: Capacity,
    bound: Bound,
    weights: list[float],
    config: PlaceConfig,
    hint: dict[int, int] | None,
) -> Solution | None:
    """The CP-SAT model alone (warm-started from `hint` when given); tests call it with none
    so that the model itself, not a baseline, answers."""
    bins = make_bins(capacity)
    gm = build(capacity, bins, bound, [round(w * SCALE) for w in weights])
    if hint is not None:
        _add_hint(gm, bins, hint)
    solver = cp_model.CpSolver()
    _configure(solver, config)
    status = solver.solve(gm.model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Solution(hint, None, "warm-start") if hint is not None else None
    counts = fill(bins, [solver.value(x) for x in gm.pods], [solver.value(u) for u in gm.used])
    # the warm start stays the answer when the solver, stopped by its budget, did worse on J
    # (what is reported: its preference and fresh-rack terms too, not the traffic alone)
    packing = objective_of(capacity.gang) == "pack"
    fresh = fresh_rack_weight(capacity, weights, config.scheduling.fragmentation_weight)
    if (
        packing
        and hint is not None
        and objective(capacity, hint, weights, fresh) < objective(capacity, counts, weights, fresh)
    ):
        return Solution(hint, None, "warm-start")
    return Solution(counts, None, "cp-sat")


def _best_baseline(capacity: Capacity, weights: list[float], seed: int) -> dict[int, int] | None:
    best: dict[int, int] | None = None
    best_cost = float("inf")
    for choose in WARM_STARTS:
        counts = choose(capacity, seed)
        if counts is not None:
            cost = ring_cost(capacity, counts, weights)
            if cost < best_cost:
                best, best_cost = counts, cost
    return best


def _add_hint(gm: GangModel, bins: list[Bin], hint: dict[int, int]) -> None:
    for (pods, hosts), x, u in zip(bins_of(bins, hint), gm.pods, gm.used, strict=True):
        gm.model.add_hint(x, pods)
        gm.model.add_hint(u, hosts)


def _configure(solver: cp_model.CpSolver, config: PlaceConfig) -> None:
    params = solver.parameters
    params.max_time_in_seconds = config.solver.time_limit_s
    params.num_workers = config.solver.workers
    params.random_seed = config.seed
    params.relative_gap_limit = config.solver.relative_gap
    if config.solver.work_limit is not None:
        params.max_deterministic_time = config.solver.work_limit
