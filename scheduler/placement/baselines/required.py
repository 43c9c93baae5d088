"""Give a topology-blind baseline the gang's required level: try each domain of that level in
the baseline's own way and keep the first that holds the whole gang."""

from __future__ import annotations

import functools
from collections.abc import Callable

from scheduler.placement.capacity import Capacity

Choose = Callable[[Capacity, int], dict[int, int] | None]


def restrict(capacity: Capacity, level: int, domain: int) -> Capacity:
    inside = capacity.snapshot.fabric.columns[level][capacity.hosts] == domain
    return Capacity(capacity.snapshot, capacity.gang, capacity.hosts[inside], capacity.pods[inside])


def within_required(choose: Choose) -> Choose:
    @functools.wraps(choose)
    def wrapper(capacity: Capacity, seed: int) -> dict[int, int] | None:
        required = capacity.gang.required_level
        if required is None:
            return choose(capacity, seed)
        level = capacity.snapshot.fabric.index(required)
        for domain, cap in sorted(capacity.per_domain[level].items()):
            if cap >= capacity.gang.pods:
                found = choose(restrict(capacity, level, domain), seed)
                if found is not None:
                    return found
        return None

    return wrapper
