"""Seeded tiny fabrics and gangs for checking the engines' labels against brute force.

Each case is small enough to enumerate every spread, and built to hold what tripped the engines
before: domain names that repeat under different parents (rack r0 under both spines, NVLink
domain nv0 in several racks), racks where some hosts share an NVLink domain and others have
none, tainted, labelled, pod-capped and down hosts, CPU already used, slices at every level at
or below the required level (and TP groups across hosts), preferred levels, running gangs on
the uplinks."""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from scheduler.model import GangRequest, ParallelShape
from scheduler.model.constraints import NodeConstraints, Taint, TaintEffect, Toleration
from scheduler.model.gang import Slice
from scheduler.model.topology import LEVELS, HostSpec, Tier, TopologySpec
from scheduler.placement import Snapshot
from scheduler.topology import Fabric

TAINT = Taint(key="accel", value="h200", effect=TaintEffect.NO_SCHEDULE)
TOLERATE = Toleration(key="accel", value="h200")


@dataclass(frozen=True)
class Case:
    seed: int
    snapshot: Snapshot
    gang: GangRequest

    def __repr__(self) -> str:  # pytest prints it when an assertion fails
        return f"Case(seed={self.seed}, gang={self.gang!r})"


def case(seed: int) -> Case:
    rng = random.Random(seed)
    fabric = Fabric(TopologySpec(hosts=tuple(_hosts(rng))))
    snapshot, gang = _occupied(rng, fabric), _gang(rng, fabric)
    _crossed(random.Random(f"uplinks {seed}"), snapshot)  # its own draws: the cases above stay
    return Case(seed, snapshot, gang)


def _crossed(rng: random.Random, snapshot: Snapshot) -> None:
    """In half the cases, running gangs on the uplinks (0-3 per domain, rack level and up):
    J's load term (placement/scoring.py) is then in every engine's objective and label."""
    if rng.random() < 0.5:
        return
    fabric = snapshot.fabric
    load = {
        level: np.array([rng.choice([0, 0, 1, 3]) for _ in fabric.names[level]], dtype=np.int64)
        for level in range(Tier.RACK, fabric.depth)
    }
    snapshot.uplinks = lambda: load


def _hosts(rng: random.Random) -> list[HostSpec]:
    hosts = []
    for s in range(rng.choice([1, 2, 2])):
        for r in range(rng.choice([1, 2, 2])):
            for i in range(rng.randint(2, 3)):
                domains = {"core": "c0", "spine": f"s{s}", "rack": f"r{r}"}
                hosts.append(_host(rng, f"h{s}{r}{i}", domains))
    return hosts


def _host(rng: random.Random, name: str, domains: dict[str, str]) -> HostSpec:
    nvlink = rng.choice([None, None, "nv0", "nv0", "nv1"])  # the same names in every rack
    tainted = rng.random() < 0.15
    return HostSpec(
        name=name,
        gpus=rng.choice([4, 8, 8]),
        cpu_milli=64_000,
        memory_mib=512_000,
        domains=domains | ({"nvlink": nvlink} if nvlink else {}),
        labels={"zone": rng.choice(["a", "b"])} | ({"accel": "h200"} if tainted else {}),
        taints=(TAINT,) if tainted else (),
        max_pods=rng.choice([110, 110, 110, 1, 3]),
    )


def _occupied(rng: random.Random, fabric: Fabric) -> Snapshot:
    snapshot = Snapshot(fabric)
    for h, host in enumerate(fabric.hosts):
        used = rng.choice([0, 0, 1, 2, 3, host.gpus // 2, host.gpus])
        cpu = rng.choice([0, 0, 0, 24_000, 64_000])
        snapshot.use(host.name, min(used, host.gpus), cpu_milli=cpu)
        if rng.random() < 0.07:
            snapshot.down.add(h)
    return snapshot


def _gang(rng: random.Random, fabric: Fabric) -> GangRequest:
    gpus_per_pod = rng.choice([1, 2, 2, 2, 4])
    pods = rng.choice([3, 4, 4, 6, 6, 8])
    required = rng.choice([None, *LEVELS[1:]])
    top = LEVELS.index(required) if required else len(LEVELS) - 1
    fields: dict[str, object] = {
        "required_level": required,
        "constraints": _constraints(rng),
        "cpu_milli_per_pod": rng.choice([0, 0, 8_000]),
    }
    tp = rng.random() < 0.2 and pods % 2 == 0
    if tp:  # TP groups of two pods: an NVLink slice the shape implies
        fields["shape"] = ParallelShape(dp=pods // 2, tp=2 * gpus_per_pod)
    elif rng.random() < 0.7:
        fields["slices"] = _slices(rng, pods, top)
    if top >= 2 and rng.random() < 0.2:
        fields["preferred_levels"] = {rng.choice(LEVELS[2 : top + 1]): 5.0}
    return GangRequest(name="g", pods=pods, gpus_per_pod=gpus_per_pod, **fields)  # type: ignore[arg-type]


def _slices(rng: random.Random, pods: int, top: int) -> tuple[Slice, ...]:
    """One or two nested slices at or below the required level."""
    sizes = [d for d in range(2, pods + 1) if pods % d == 0]
    low = rng.randint(1, top)
    first = Slice(level=LEVELS[low], size=rng.choice(sizes))
    above = [d for d in sizes if d % first.size == 0 and d > first.size]
    if low < top and above and rng.random() < 0.4:
        return (first, Slice(level=LEVELS[rng.randint(low + 1, top)], size=rng.choice(above)))
    return (first,)


def _constraints(rng: random.Random) -> NodeConstraints:
    tolerations = (TOLERATE,) if rng.random() < 0.4 else ()
    selector = (("zone", rng.choice(["a", "b"])),) if rng.random() < 0.2 else ()
    return NodeConstraints(selector=selector, tolerations=tolerations)
