"""Baseline placement policies, re-implemented from their public descriptions.

Each is `choose(capacity, seed) -> {host index: pods}` or None when it finds no placement; the
same `place()` wraps them and the CP-SAT policy, so every report compares like with like."""

from collections.abc import Callable

from scheduler.placement.baselines.greedy import first_fit, least_allocated, random_fit
from scheduler.placement.baselines.topology_aware import (
    kai_bin_pack,
    kueue_best_fit,
    kueue_least_free,
    slurm_block,
    slurm_tree,
)
from scheduler.placement.capacity import Capacity

Chooser = Callable[[Capacity, int], dict[int, int] | None]

BASELINES: dict[str, Chooser] = {
    "first-fit": first_fit,
    "random-fit": random_fit,
    "least-allocated": least_allocated,
    "kueue-best-fit": kueue_best_fit,
    "kueue-least-free": kueue_least_free,
    "slurm-tree": slurm_tree,
    "kai-bin-pack": kai_bin_pack,
    "slurm-block": slurm_block,
}

# the baselines CP-SAT starts from (cpsat/solve.py): the two peers' readings added later
# (KAI's is LeastFree's descent; Slurm block's is tree's on NVLink leaves) are left out, so
# rackwise's decisions stay what they were
WARM_STARTS: tuple[Chooser, ...] = tuple(
    BASELINES[name]
    for name in (
        "first-fit",
        "random-fit",
        "least-allocated",
        "kueue-best-fit",
        "kueue-least-free",
        "slurm-tree",
    )
)

__all__ = ["BASELINES", "WARM_STARTS", "Chooser"]
