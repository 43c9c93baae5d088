"""Give a topology-blind baseline the gang's required level: try each domain of that level in
the baseline's own way and keep the first that holds the whole gang."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

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
        domains = sorted(capacity.per_domain[level])
        return first_inside(capacity, level, domains, lambda inside: choose(inside, seed))

    return wrapper


def first_inside(
    capacity: Capacity,
    level: int,
    domains: Iterable[int],
    choose: Callable[[Capacity], dict[int, int] | None],
) -> dict[int, int] | None:
    """What `choose` finds inside the first of `domains` (of `level`) with room for the whole
    gang where it finds something."""
    room = capacity.per_domain[level]
    for domain in domains:
        if room.get(domain, 0) >= capacity.gang.pods:
            found = choose(restrict(capacity, level, domain))
            if found is not None:
                return found
    return None
