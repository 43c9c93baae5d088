"""Patience: a queue rule that lets a gang wait, for a while, for a placement inside one block.

Contract. Takes a gang's capacity, the best placement found now and the call's config (the
patience `compact_wait_s` and how long the gang has waited on the caller's clock). Decides
whether the gang waits instead: when the placement spans blocks (the level above racks) but one
block of its pool would hold the gang were it free, and the gang is within its patience.
Promises: a reason to wait naming the time left, or None; any policy may have the rule.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from scheduler.model.placement import PlaceConfig
from scheduler.placement.capacity import Capacity


def reason(capacity: Capacity, counts: Mapping[int, int], config: PlaceConfig) -> str | None:
    """A reason to wait when the best placement now spans blocks (the level above racks:
    spines by default) but the gang fits in one block of its pool when that is free, and the
    gang is still within its patience."""
    if config.waited_s >= config.scheduling.compact_wait_s:  # a queue rule: any policy may have it
        return None
    fabric = capacity.snapshot.fabric
    if fabric.block is None:
        return None
    spines = {fabric.domain[fabric.block][h] for h, n in counts.items() if n > 0}
    if len(spines) <= 1 or not fits_one_block(capacity, fabric.block):
        return None
    left = config.scheduling.compact_wait_s - config.waited_s
    return (
        f"waiting up to {left:.0f} s more for a placement inside one {fabric.levels[fabric.block]} "
        f"(the best now spans {len(spines)})"
    )


def fits_one_block(capacity: Capacity, block: int) -> bool:
    """Would one block of the gang's pool hold it if nothing else ran there?"""
    gang = capacity.gang
    fabric = capacity.snapshot.fabric
    pool = fabric.pool_mask.get(gang.pool)
    if pool is None or not gang.gpus_per_pod:
        return False
    pods = np.bincount(fabric.columns[block][pool], weights=fabric.gpus[pool] // gang.gpus_per_pod)
    return bool(pods.max(initial=0) >= gang.pods)
