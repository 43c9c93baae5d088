"""The tree DP's merge step: a parent's cost vector from its children's offers.

Takes each child's cost vector F (least cost of holding >= x pods; nondecreasing, infinite
past its end) and the extra the parent pays per child used. Decides F of the parent: a 0/1
knapsack where each child is taken with at most one offer from its Pareto frontier.

Promises: `merge` at scale 1 is exact. Where the frontiers are wide (n x offers above
`WORK` cells; the top levels of a 100k+ GPU fabric) it may solve in units of `scale` pods
instead, twice: offers rounded down give a feasible placement (an upper bound, the vector the
parent uses and traces back), offers rounded up give a valid lower bound (any real choice of
offers with capacity >= x also has rounded-up units >= ceil(x / scale)). The caller reports
the gap between the two, or solves again at scale 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

Vector = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Offers = tuple[Ints, Vector]  # a child's (capacities, costs), both increasing
INF = float("inf")
WORK = 4_000_000  # knapsack cells (offers x vector length) a parent solves exactly


@dataclass(frozen=True)
class Merged:
    cost: Vector  # an upper bound on F (exact at scale 1), by pods
    scale: int  # pods per knapsack unit
    units: list[Ints]  # per child: each kept offer's size in units
    caps: list[Ints]  # per child: the same offer's capacity in pods
    choices: list[npt.NDArray[np.int32]]  # per child, per units so far: the offer taken or -1


def frontier(cost: Vector, extra: float) -> Offers:
    """(capacity, cost + extra) at each x where F steps up: the child's useful offers."""
    steps = np.isfinite(cost) & (cost < np.append(cost[1:], INF))
    steps[0] = False
    caps = np.nonzero(steps)[0]
    return caps, cost[caps] + extra


def scale_for(n: int, offers: list[Offers], limit: float = WORK) -> int:
    """1 when the exact knapsack is small enough, else the unit that brings it near `limit`."""
    work = (n + 1) * sum(len(caps) for caps, _ in offers)
    return 1 if work <= limit else math.ceil(math.sqrt(work / limit))


def shrink(offers: Offers, scale: int, up: bool) -> tuple[Ints, Vector, Ints]:
    """The offers in units of `scale` pods (rounded up or down), the cheapest per unit count."""
    caps, prices = offers
    if scale == 1:  # frontier capacities are distinct and positive already
        return caps, prices, caps
    units = -(-caps // scale) if up else caps // scale
    keep = units > 0
    keep[1:] &= units[1:] != units[:-1]  # prices increase with caps: the first is cheapest
    return units[keep], prices[keep], caps[keep]


def merge(n: int, offers: list[Offers], scale: int, up: bool = False) -> Merged:
    """The parent's vector by pods; rounded up (`up`) it is a lower bound, else an upper one."""
    shrunk = [shrink(o, scale, up) for o in offers]
    cost, choices = knapsack(-(-n // scale), [(u, p) for u, p, _ in shrunk])
    if scale > 1:  # back to pods: x pods need ceil(x / scale) units
        units = -(-np.arange(n + 1) // scale)
        cost = cost[units[units < len(cost)]]
    return Merged(cost, scale, [u for u, _, _ in shrunk], [c for _, _, c in shrunk], choices)


def knapsack(n: int, items: list[Offers]) -> tuple[Vector, list[npt.NDArray[np.int32]]]:
    """0/1 knapsack over children, each taken with at most one of its offers.

    The vector only grows as far as the children's capacity reaches (beyond it the cost is
    infinite), so a parent of small children works on short vectors."""
    n = min(n, sum(int(caps[-1]) for caps, _ in items if len(caps)))
    # cost lives at padded[n + 1:]; the zeros before it stand for cost[0] = 0, so the window
    # starting `cap` early reads cost[max(x - cap, 0)] without building an index
    padded = np.zeros(2 * n + 2)
    padded[n + 2 :] = INF
    windows = sliding_window_view(padded, n + 1)
    length = 1
    choices = []
    for caps, prices in items:
        if len(caps) == 0:
            choices.append(np.full(length, -1, dtype=np.int32))
            continue
        length = min(n, length - 1 + int(caps[-1])) + 1
        cand = windows[n + 1 - np.minimum(caps, n), :length]  # more than n counts as n
        cand += prices[:, None]
        best = cand.argmin(axis=0)
        value = cand.min(axis=0)
        cost = padded[n + 1 : n + 1 + length]
        take = value < cost
        np.copyto(cost, value, where=take)
        best[~take] = -1
        choices.append(best.astype(np.int32))
    return padded[n + 1 : n + 1 + length].copy(), choices
