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
HISTORY = 1_000_000  # cost cells merge_many keeps for the trace-back; past it, it recomputes
BLOCK = 131_072  # candidate cells (parents x offers x width) merge_many builds at once
BLOCK_OFFERS = 16  # ... but never fewer offers than this at once


@dataclass
class Replay:
    """One parent's choices in `merge_many`, made again where the trace-back asks: keeping
    every parent's choices would cost an argmin across the offers per cell, and the trace-back
    visits only the parents it places pods in. From the cost vectors the batch had before each
    child (`before`, rows of the batch's; kept where they are small), one choice is one lookup;
    otherwise `knapsack` on the same offers in the same order makes the same sums again."""

    caps: Ints  # (child, offer): capacity; offers end where prices turn infinite
    prices: Vector  # (child, offer)
    n: int
    before: list[Vector] | None = None  # per child: (parent, x) before it, shared by the batch
    row: int = 0  # this parent's row in `before`
    choices: list[npt.NDArray[np.int32]] | None = None

    def offer(self, child: int, x: int) -> int:
        """The first cheapest offer at x, if it beats not using the child (-1)."""
        if self.before is not None:
            before = self.before[child][self.row]
            cand = before[np.maximum(x - self.caps[child], 0)] + self.prices[child]
            j = int(cand.argmin())
            return j if cand[j] < before[x] else -1
        if self.choices is None:
            real = np.isfinite(self.prices)
            items = [(c[r], p[r]) for c, p, r in zip(self.caps, self.prices, real, strict=True)]
            self.choices = knapsack(self.n, items)[1]
        return int(self.choices[child][x])


Choices = list[npt.NDArray[np.int32]] | Replay  # merge's, or merge_many's made again


@dataclass(frozen=True)
class Merged:
    cost: Vector  # an upper bound on F (exact at scale 1), by pods
    scale: int  # pods per knapsack unit
    # per child (a list, or the rows of one matrix when merged with others: merge_many)
    units: list[Ints] | Ints  # each kept offer's size in units
    caps: list[Ints] | Ints  # the same offer's capacity in pods
    choices: Choices  # per child, per units: the offer taken, or -1

    def taken(self, child: int, units: int) -> int:
        if isinstance(self.choices, Replay):
            return self.choices.offer(child, units)
        return int(self.choices[child][units])


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


Family = list[tuple[Vector, float]]  # a parent's children: (cost vector, extra per use)


def merge_many(n: int, families: list[Family], work: float = WORK) -> list[Merged | None]:
    """Many parents' exact merges at once: the same answers as `merge` at scale 1, computed as
    one knapsack over all of them (a level of a wide fabric has thousands of small parents, and
    one at a time they cost more in interpreter overhead than in arithmetic). A parent whose
    knapsack is wider than `work` cells is left out (None): the caller merges it coarse."""
    if not families:
        return []
    caps, prices, counts = _frontiers([c for f in families for c, _ in f], families)
    sizes = np.fromiter((len(f) for f in families), dtype=np.int64, count=len(families))
    parent = np.repeat(np.arange(len(families)), sizes)
    offers = np.bincount(parent, weights=counts, minlength=len(families))
    reach = np.bincount(parent, weights=caps.max(axis=1, initial=0), minlength=len(families))
    lengths = np.minimum(reach, n).astype(np.int64) + 1
    exact = (n + 1) * offers <= work
    chosen = np.flatnonzero(exact)
    if len(chosen) == 0:
        return [None] * len(families)
    rows = np.isin(parent, chosen)
    position = np.arange(len(parent)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    where = np.searchsorted(chosen, parent[rows])
    cost, caps_k, prices_k, before = _knapsack_many(
        caps[rows], prices[rows], where, position[rows], len(chosen), lengths[chosen]
    )
    out: list[Merged | None] = [None] * len(families)
    for i, p in enumerate(chosen.tolist()):
        k, length = int(sizes[p]), int(lengths[p])
        caps_i = caps_k[:k, i]
        replay = Replay(caps_i, prices_k[:k, i], n, before, i)
        out[p] = Merged(cost[i, :length].copy(), 1, caps_i, caps_i, replay)
    return out


def _frontiers(costs: list[Vector], families: list[Family]) -> tuple[Ints, Vector, Ints]:
    """Every child's frontier (`frontier`) as rows of one padded matrix: capacities (0 where
    a child has fewer offers) and prices (inf there), with the number of offers per child."""
    extras = np.fromiter((e for f in families for _, e in f), dtype=np.float64)
    lengths = np.fromiter((len(c) for c in costs), dtype=np.int64, count=len(costs))
    width = int(lengths.max()) + 1
    matrix = np.full((len(costs), width), INF)
    row = np.repeat(np.arange(len(costs)), lengths)
    column = np.arange(len(row)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    matrix[row, column] = np.concatenate(costs)
    steps = np.isfinite(matrix[:, :-1]) & (matrix[:, :-1] < matrix[:, 1:])
    steps[:, 0] = False
    counts = steps.sum(axis=1)
    offer_row, offer_cap = np.nonzero(steps)
    rank = np.arange(len(offer_row)) - np.repeat(np.cumsum(counts) - counts, counts)
    caps = np.zeros((len(costs), max(1, int(counts.max()))), dtype=np.int64)
    prices = np.full(caps.shape, INF)
    caps[offer_row, rank] = offer_cap
    prices[offer_row, rank] = matrix[offer_row, offer_cap] + extras[offer_row]
    return caps, prices, counts


def _knapsack_many(
    caps: Ints, prices: Vector, parent: Ints, position: Ints, parents: int, lengths: Ints
) -> tuple[Vector, Ints, Vector, list[Vector] | None]:
    """`knapsack`'s costs for every parent at once, children taken in the same order (child k
    of every parent in step k). Returns each parent's cost (by row); the offers by step,
    parent and offer: capacities and prices (inf where a child has fewer offers); and, when
    they are small (HISTORY cells), the costs before each step (Replay)."""
    steps, offers = int(position.max()) + 1, caps.shape[1]
    length = int(lengths.max())
    caps_k = np.zeros((steps, parents, offers), dtype=np.int64)
    prices_k = np.full((steps, parents, offers), INF)
    caps_k[position, parent] = caps
    prices_k[position, parent] = prices
    # cost lives at padded[:, length:]; the zeros before it stand for cost[0] = 0, so the
    # window starting `cap` early reads cost[max(x - cap, 0)] (more than the length reads 0)
    padded = np.zeros((parents, 2 * length))
    padded[:, length + 1 :] = INF
    windows = sliding_window_view(padded, length, axis=1)
    cost = padded[:, length:]
    every = np.arange(parents)[:, None]
    # how far any parent's vector reaches after each step: the rest stays infinite
    reach = np.minimum(np.cumsum(caps_k.max(axis=2), axis=0).max(axis=1) + 1, length)
    before: list[Vector] | None = [] if parents * int(reach.sum()) <= HISTORY else None
    # offers in blocks of about BLOCK cells: a (parents, offers, width) candidate array of the
    # top levels of a 6-level fabric is tens of MB, and built whole it runs at memory speed;
    # but each block costs a pass more, so a few offers (a 5-level top) stay one block
    block = max(BLOCK_OFFERS, BLOCK // max(1, parents * length))
    for k, width in enumerate(reach.tolist()):
        starts = length - np.minimum(caps_k[k], length)
        if before is not None:
            before.append(cost[:, :width].copy())
        best = _least(windows, every, prices_k[k], starts, 0, block, width)
        for o in range(block, offers, block):  # cost changes only after the step's last block
            least = _least(windows, every, prices_k[k], starts, o, block, width)
            np.minimum(best, least, out=best)
        np.minimum(cost[:, :width], best, out=cost[:, :width])
    return cost, caps_k, prices_k, before


def _least(
    windows: Vector, every: Ints, prices: Vector, starts: Ints, first: int, block: int, width: int
) -> Vector:
    """Per parent and size, the least of cost before the child plus the price over the offers
    `first` to `first + block` (`windows[p, start]` reads the cost vector `start` early)."""
    cand = windows[every, starts[:, first : first + block], :width]
    cand += prices[:, first : first + block, None]
    least: Vector = cand.min(axis=1)
    return least
