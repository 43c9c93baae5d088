"""Placement at scale: solve time per gang on fabrics of several shapes and sizes.

Every fabric has 60% of its GPUs taken at random (each GPU independently, seeded); gangs take
1 GPU per pod, as in benchmarks/placement.py. Cases:
  3 levels, 100k GPUs: 16 blocks x 98 subblocks x 8 hosts x 8 GPUs named host / subblock /
      block (Kueue-style, no NVLink level: rackwise adds one where each host is alone);
  6 levels, 100k GPUs: host, nvlink (pairs), rack, row (7 racks), spine (98 racks), core
      (4 spines); 20% of hosts tainted `accelerator=h200:NoSchedule` and labelled so; half the
      gangs tolerate and select them (20% of hosts), half run on the rest;
  5 levels (the default profile), 100k and 400k GPUs: 16 and 64 spines of the same shape,
      gangs of 256, 1,024 and 4,096 GPUs (how solve time grows with fabric and gang size);
  5 levels, 100k GPUs with 2:1 rack and 3:1 spine uplinks, J's load term off and on: on,
      every uplink of the rack level and above is crossed by 0-3 running gangs (seeded),
      which J prices per domain (placement/scoring.py); the same seeds, so the two rows'
      ratio is the load term's cost.
Before a fabric's cases, one placement per constraint set fills the fabric's caches (its time
is printed apart, not counted). Per case: p50 / p99 solve time over seeds, the share of
decisions proven optimal, and the share proven optimal or within 1% of a valid lower bound
(wide top-level merges are solved in units of several pods and bounded from below,
placement/knapsack.py). Solve time is wall time on
this machine (2 shared cores): a measurement, not a test. The "roles" row adds to each gang a
launcher (1 pod, no GPU) and 8 parameter servers (1 GPU each, all in one rack, in pairs per
host), placed after the workers, nearest first (placement/roles.py); the "launcher+ring" row a
launcher and 8 ring members of 1 GPU (J counts them; gangs this large keep the nearest-first
ring, placement.api JOINT_PODS)."""

from __future__ import annotations

import argparse
import functools
import random
import time

import numpy as np
import numpy.typing as npt

from benchmarks.common import table
from scheduler.model import GangRequest, PlaceConfig
from scheduler.model.constraints import NodeConstraints, Taint, TaintEffect, Toleration
from scheduler.model.gang import Role, Slice
from scheduler.model.topology import HostSpec, LevelSpec, Tier, TopologySpec
from scheduler.placement import place_one, validate
from scheduler.placement.snapshot import random_occupancy
from scheduler.simulation.metrics import percentile
from scheduler.simulation.profiles import FabricProfile, ProfileName
from scheduler.topology import Fabric, generate

TAINT = Taint(key="accelerator", value="h200", effect=TaintEffect.NO_SCHEDULE)
H200 = NodeConstraints(
    selector=(("accelerator", "h200"),),
    tolerations=(Toleration(key="accelerator", value="h200", effect=TaintEffect.NO_SCHEDULE),),
)


def three_levels() -> Fabric:
    base = generate(blocks=16, racks=98, hosts=8, gpus=8)
    levels = (
        LevelSpec(name="host", bandwidth_gbps=900),
        LevelSpec(name="subblock"),
        LevelSpec(name="block"),
    )
    hosts = tuple(
        h.model_copy(
            update={"domains": {"subblock": h.domains["rack"], "block": h.domains["spine"]}}
        )
        for h in base.hosts
    )
    return Fabric(TopologySpec(levels=levels, hosts=hosts))


def six_levels() -> Fabric:
    base = generate(blocks=16, racks=98, hosts=8, gpus=8, nvlink=2)
    names = ("host", "nvlink", "rack", "row", "spine", "core")
    levels = tuple(
        LevelSpec(name=n, nvlink=n == "nvlink", bandwidth_gbps=900 if n == "host" else 50)
        for n in names
    )
    rng = random.Random("taints")
    hosts = []
    for h in base.hosts:
        rack = int(h.domains["rack"].lstrip("r"))
        spine = int(h.domains["spine"].lstrip("s"))
        domains = {**h.domains, "row": f"row{rack // 7}", "core": f"c{spine // 4}"}
        tainted = rng.random() < 0.2
        hosts.append(
            HostSpec(
                name=h.name,
                gpus=h.gpus,
                domains=domains,
                labels={"accelerator": "h200"} if tainted else {},
                taints=(TAINT,) if tainted else (),
            )
        )
    return Fabric(TopologySpec(levels=levels, hosts=tuple(hosts)))


def default() -> Fabric:
    return Fabric(generate(blocks=16, racks=98, hosts=8, gpus=8))


def oversubscribed() -> Fabric:
    """The default fabric with 2:1 rack and 3:1 spine uplinks: J's load term prices
    oversubscribed ones, and a 1,024-GPU gang spans racks."""
    profile = FabricProfile(name=ProfileName.TOPOLOGY, ratios={"rack": 2.0, "spine": 3.0})
    return Fabric(profile.provisioned(generate(blocks=16, racks=98, hosts=8, gpus=8)))


def loads(fabric: Fabric, seed: int) -> dict[int, npt.NDArray[np.int64]]:
    """0-3 running gangs crossing each uplink of the rack level and above (seeded)."""
    rng = np.random.default_rng(seed)
    return {lv: rng.integers(0, 4, len(fabric.names[lv])) for lv in range(Tier.RACK, fabric.depth)}


def big() -> Fabric:
    return Fabric(generate(blocks=64, racks=98, hosts=8, gpus=8))


ROLES = (
    Role(name="launcher", pods=1, gpus_per_pod=0),
    Role(
        name="ps",
        pods=8,
        gpus_per_pod=1,
        required_level="rack",
        slices=(Slice(level="host", size=2),),
    ),
)


# the pair: the same gang with a launcher and a ring role (data-parallel members of
# another shape in the workers' gradient ring)
RING = (
    Role(name="launcher", pods=1, gpus_per_pod=0),
    Role(name="dp", pods=8, gpus_per_pod=1, gradients=True),
)


def measure(
    fabric: Fabric,
    gpus: int,
    seeds: int,
    constraints: list[NodeConstraints],
    share: float,
    roles: tuple[Role, ...] = (),
    loaded: bool = False,
) -> list[object]:
    times, good, proven = [], 0, 0
    for seed in range(seeds):
        snapshot = random_occupancy(fabric, 0.6, seed)
        if loaded:
            snapshot.uplinks = functools.partial(loads, fabric, seed)
        wanted = constraints[seed % len(constraints)]
        gang = GangRequest(
            name=f"g{gpus}", pods=gpus, gpus_per_pod=1, constraints=wanted, roles=roles
        )
        config = PlaceConfig.of(seed=seed, fragmentation_share=share, contention=loaded)
        placement = place_one(snapshot, gang, config)
        validate(snapshot, gang, placement)
        times.append(placement.solve_seconds)
        proven += placement.optimal
        good += placement.optimal or (placement.gap is not None and placement.gap <= 0.01)
    return [
        f"{percentile(times, 50) * 1000:.0f}",
        f"{percentile(times, 99) * 1000:.0f}",
        f"{proven / seeds:.0%}",
        f"{good / seeds:.0%}",
    ]


def warm(
    fabric: Fabric,
    gpus: int,
    constraints: list[NodeConstraints],
    share: float,
    roles: tuple[Role, ...],
) -> float:
    """One placement per constraint set on a fresh fabric, on a snapshot no seed uses: the
    seconds the first took. A long-lived scheduler pays this once per fabric it loads."""
    snapshot = random_occupancy(fabric, 0.6, 10_000)
    took = []
    for wanted in constraints:
        gang = GangRequest(name="warm", pods=gpus, gpus_per_pod=1, constraints=wanted, roles=roles)
        took.append(
            place_one(snapshot, gang, PlaceConfig.of(fragmentation_share=share)).solve_seconds
        )
    return took[0]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=10)
    # the fragmentation-aware objective solves the tree a second time for multi-host gangs
    parser.add_argument(
        "--fragmentation-share", type=float, default=PlaceConfig().scheduling.fragmentation_share
    )
    parser.add_argument("--only", help="the cases whose name contains this text")
    args = parser.parse_args()
    share = args.fragmentation_share
    print(f"fragmentation share {share} (0: the J-optimum alone)", flush=True)
    plain = [NodeConstraints()]
    tainted = [H200, NodeConstraints()]
    cases = [
        ("3 levels, 100k", three_levels, [1024], plain, (), False),
        ("6 levels, 100k, taints", six_levels, [1024], tainted, (), False),
        ("6 levels, 100k, taints, roles", six_levels, [1024], tainted, ROLES, False),
        ("6 levels, 100k, taints, launcher+ring", six_levels, [1024], tainted, RING, False),
        ("5 levels, 100k", default, [256, 1024, 4096], plain, (), False),
        ("5 levels, 100k, 2:1/3:1", oversubscribed, [1024], plain, (), False),
        ("5 levels, 100k, 2:1/3:1, uplink load", oversubscribed, [1024], plain, (), True),
        ("5 levels, 400k", big, [256, 1024, 4096], plain, (), False),
    ]
    rows = []
    chosen = [c for c in cases if args.only is None or args.only in c[0]]
    for name, build, sizes, constraints, roles, loaded in chosen:
        started = time.perf_counter()
        fabric = build()
        built = time.perf_counter() - started
        gpus = int(fabric.gpus.sum())
        first = warm(fabric, sizes[0], constraints, share, roles)
        for size in sizes:
            measured = measure(fabric, size, args.seeds, constraints, share, roles, loaded)
            rows.append([name, f"{gpus:,}", size, *measured])
        print(
            f"{name}: fabric built in {built:.1f} s; its first placement took "
            f"{first * 1000:.0f} ms (it fills the fabric's caches: node kinds, constraint masks, "
            "depth-first order; not counted above)",
            flush=True,
        )
    print(table(["fabric", "GPUs", "gang GPUs", "p50 ms", "p99 ms", "optimal", "opt/<=1%"], rows))


if __name__ == "__main__":
    main()
