"""Gangs of several parts (workers and roles) against an exact reference written apart from the
engines: every way to spread every part over the hosts, with the hosts' resources shared, each
part's node constraints, a role's own required level, the gang's group-wide required level, and
J over the gradient ring (the workers and the roles with `gradients`). Seeded, both engines:
never refuse a feasible gang, never place an infeasible one, J equal to the optimum wherever
`optimal` is claimed, and J within 1% of it for every gang (all of them have at most 16 pods)."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from dataclasses import dataclass

import pytest

from scheduler.model import GangRequest, PlaceConfig
from scheduler.model.gang import Role
from scheduler.placement import Snapshot, place, validate
from scheduler.placement.api import j_value
from scheduler.placement.capacity import Capacity
from scheduler.placement.roles import as_gang
from scheduler.topology import Fabric, generate
from tests.unit.placement.bruteforce import spreads

FABRIC = Fabric(generate(blocks=1, racks=3, hosts=2, gpus=8))  # 6 hosts, 3 racks
CASES = 300
CONFIG = PlaceConfig.of(work_limit=5.0)


def engine_config(engine: str) -> PlaceConfig:
    return PlaceConfig.of(work_limit=5.0, engine=engine)


def scene(seed: int) -> tuple[Snapshot, GangRequest]:
    """Up to 7 pods in up to 3 parts, on 6 hosts of varied free GPUs and CPU."""
    rng = random.Random(seed)
    snapshot = Snapshot(FABRIC)
    for h in range(len(FABRIC.hosts)):
        snapshot.free_gpus[h] = rng.choice([0, 2, 4, 6, 8, 8])
        snapshot.free_cpu[h] = rng.choice([2000, 8000, 64000])
    roles = []
    for i in range(rng.choice([1, 1, 2])):
        roles.append(
            Role(
                name=f"r{i}",
                pods=rng.randint(1, 2),
                gpus_per_pod=rng.choice([0, 2, 4, 6]),
                cpu_milli_per_pod=rng.choice([0, 1000, 4000]),
                gradients=rng.random() < 0.5,
                required_level=rng.choice([None, None, None, "host"]),
                in_group=rng.random() < 0.8,
            )
        )
    gang = GangRequest(
        name="g",
        pods=rng.randint(1, 3),
        gpus_per_pod=rng.choice([2, 4, 8]),
        cpu_milli_per_pod=rng.choice([0, 1000]),
        required_level=rng.choice([None, None, "rack"]),
        roles=tuple(roles),
    )
    return snapshot, gang


@dataclass(frozen=True)
class Reference:
    value: float | None  # the least J over every valid placement; None: none exists


def reference(snapshot: Snapshot, gang: GangRequest) -> Reference:
    fabric = snapshot.fabric
    parts = [("", gang), *((r.name, as_gang(gang, r)) for r in gang.roles)]
    ring = {""} | {r.name for r in gang.roles if r.gradients}
    own = {r.name: r.required_level for r in gang.roles}
    free = {r.name for r in gang.roles if r.required_level is None and not r.in_group}
    options = [
        list(spreads(sorted(Capacity.of(snapshot, g).slots.items()), g.pods)) for _, g in parts
    ]
    workers = Capacity.of(snapshot, gang)
    best = None
    for combo in itertools.product(*options):
        if not _fits(snapshot, parts, combo):
            continue
        if not _levels(fabric, gang, parts, combo, own, free):
            continue
        counts: Counter[int] = Counter()
        for (name, _), spread in zip(parts, combo, strict=True):
            if name in ring:
                counts.update(spread)
        value = j_value(workers, dict(counts), CONFIG)
        best = value if best is None else min(best, value)
    return Reference(best)


def _fits(snapshot: Snapshot, parts: list[tuple[str, GangRequest]], combo: tuple) -> bool:
    gpus: Counter[int] = Counter()
    cpu: Counter[int] = Counter()
    pods: Counter[int] = Counter()
    for (_, g), spread in zip(parts, combo, strict=True):
        for h, n in spread.items():
            gpus[h] += n * g.gpus_per_pod
            cpu[h] += n * g.cpu_milli_per_pod
            pods[h] += n
    return all(
        gpus[h] <= snapshot.free_gpus[h]
        and cpu[h] <= snapshot.free_cpu[h]
        and pods[h] <= snapshot.free_pods[h]
        for h in pods
    )


def _levels(fabric, gang, parts, combo, own, free) -> bool:
    group: set[int] = set()
    for (name, _), spread in zip(parts, combo, strict=True):
        if name in free:  # outside the gang's group: no level holds it
            continue
        level = own.get(name)
        if level is not None:
            column = fabric.columns[fabric.index(level)]
            if len({int(column[h]) for h in spread}) > 1:
                return False
        else:
            group.update(spread)
    if gang.required_level is None:
        return True
    column = fabric.columns[fabric.index(gang.required_level)]
    return len({int(column[h]) for h in group}) <= 1


@pytest.mark.parametrize("engine", ["auto", "cp-sat"])
def test_multi_part_gangs_against_the_exact_reference(engine):
    refused = above = wrong = 0
    ring_gangs = ring_above = 0
    for seed in range(CASES):
        snapshot, gang = scene(seed)
        ref = reference(snapshot, gang)
        [placement] = place(snapshot, [gang], engine_config(engine))
        if ref.value is None:
            assert not placement.placed, (seed, placement)
            continue
        if not placement.placed:
            refused += 1
            continue
        validate(snapshot, gang, placement)
        ring = any(r.gradients for r in gang.roles)
        ring_gangs += ring
        if placement.objective > ref.value * 1.01 + 1e-9:
            above += 1
            ring_above += ring
        if placement.optimal and placement.objective > ref.value * (1 + 1e-9) + 1e-12:
            wrong += 1
    assert refused == 0
    assert wrong == 0
    assert above == 0
    assert ring_gangs >= 100  # the set does exercise ring roles


SMALL = Fabric(generate(blocks=1, racks=2, hosts=2, gpus=8))  # 4 hosts, 2 racks


def large(seed: int) -> tuple[Snapshot, GangRequest]:
    """Gangs of 9 to 16 pods: 7 to 14 workers of 1 or 2 GPUs and a ring role of 1 or 2 pods."""
    rng = random.Random(seed)
    snapshot = Snapshot(SMALL)
    for h in range(len(SMALL.hosts)):
        snapshot.free_gpus[h] = rng.choice([2, 4, 6, 8])
    role = Role(name="dp", pods=rng.randint(1, 2), gpus_per_pod=rng.choice([1, 3]), gradients=True)
    gang = GangRequest(
        name="g", pods=rng.randint(7, 14), gpus_per_pod=rng.choice([1, 2]), roles=(role,)
    )
    return snapshot, gang


@pytest.mark.parametrize("engine", ["auto", "cp-sat"])
def test_gangs_of_up_to_16_pods_are_within_1_percent_of_the_optimum(engine):
    placed = 0
    for seed in range(40):
        snapshot, gang = large(seed)
        ref = reference(snapshot, gang)
        [placement] = place(snapshot, [gang], engine_config(engine))
        assert placement.placed == (ref.value is not None), seed
        if ref.value is None:
            continue
        placed += 1
        validate(snapshot, gang, placement)
        assert placement.objective <= ref.value * 1.01 + 1e-9, seed
        if placement.optimal:
            assert placement.objective <= ref.value * (1 + 1e-9) + 1e-12, seed
    assert placed >= 20


@pytest.mark.parametrize("engine", ["auto", "cp-sat"])
def test_a_pool_too_large_for_one_model_is_tried_domain_by_domain(engine):
    """320 hosts with room (over MAX_HOSTS): the joint model runs on the smallest domains that
    could hold every part. Every host has 2 free GPUs but two of rack 0, with 6 and 4; workers
    2 x 2 GPUs and a role of one 6-GPU pod: the role fits only on the 6-GPU host."""
    from scheduler.placement.parts import MAX_HOSTS, _regions, parts_of

    fabric = Fabric(generate(blocks=1, racks=40, hosts=8, gpus=8))
    snapshot = Snapshot(fabric)
    snapshot.free_gpus[:] = 2
    snapshot.free_gpus[0], snapshot.free_gpus[1] = 6, 4
    gang = GangRequest(
        name="g", pods=2, gpus_per_pod=2, roles=(Role(name="big", pods=1, gpus_per_pod=6),)
    )
    regions = _regions(snapshot, parts_of(snapshot, gang))
    assert len(fabric.hosts) > MAX_HOSTS
    assert regions[0] == list(range(8))  # rack 0, the only one whose room holds every part
    [placement] = place(snapshot, [gang], engine_config(engine))
    assert placement.placed, placement.reason
    validate(snapshot, gang, placement)
    assert placement.hosts("big") == {fabric.hosts[0].name: 1}
