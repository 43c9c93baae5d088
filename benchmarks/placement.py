"""Placement benchmark (issue 2): a generated 100k-GPU fabric and the Lingjun topology.

Per fabric: 60% of GPUs taken at random (each GPU independently, seeded), gangs of 8 .. 1,024
GPUs (1 GPU per pod: random occupancy leaves almost no whole 8-GPU hosts), 30 seeds per size.
rackwise and every baseline decide on the same snapshot; the table gives rackwise's solve time,
its share of decisions proven optimal or within 1% of the lower bound, its mean gap, and each
baseline's cost divided by rackwise's (mean, and min: >= 1.00 means never cheaper than rackwise).
`--cpsat-seeds N` also runs the CP-SAT model alone (engine=cp-sat: warm start from the best
baseline, 1 s limit, no tree DP) on N seeds, and gives its cost divided by rackwise's.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchmarks.common import table
from scheduler.model import GangRequest, PlaceConfig
from scheduler.placement import POLICIES, place_one, validate
from scheduler.placement.baselines import BASELINES
from scheduler.placement.snapshot import random_occupancy
from scheduler.simulation.metrics import percentile
from scheduler.topology import Fabric, from_lingjun_csv, generate

SIZES = (8, 64, 256, 512, 1024)
LINGJUN = Path(__file__).resolve().parents[1] / "simulations" / "traces" / "lingjun-topo.csv"


def run(fabric: Fabric, seeds: int, cpsat_seeds: int) -> str:
    rows = []
    for size in SIZES:
        gang = GangRequest(name=f"g{size}", pods=size, gpus_per_pod=1)
        times, good, gaps, cpsat_times, cpsat_ratio = [], 0, [], [], []
        ratios: dict[str, list[float]] = {b: [] for b in BASELINES}
        for seed in range(seeds):
            snapshot = random_occupancy(fabric, 0.6, seed)
            ours = place_one(snapshot, gang, PlaceConfig.of(seed=seed))
            validate(snapshot, gang, ours)
            times.append(ours.solve_seconds)
            gap = 1.0 if ours.gap is None else ours.gap
            gaps.append(gap)
            good += ours.optimal or gap <= 0.01
            for policy in BASELINES:
                theirs = place_one(snapshot, gang, PlaceConfig.of(policy=policy, seed=seed))
                validate(snapshot, gang, theirs)
                if theirs.placed and ours.cost > 0:
                    ratios[policy].append(theirs.cost / ours.cost)
                elif theirs.placed:
                    ratios[policy].append(1.0 if theirs.cost == 0 else float("inf"))
            if seed < cpsat_seeds:
                alone = place_one(snapshot, gang, PlaceConfig.of(seed=seed, engine="cp-sat"))
                cpsat_times.append(alone.solve_seconds)
                cpsat_ratio.append(alone.cost / ours.cost if ours.cost else 1.0)
        row: list[object] = [
            size,
            f"{percentile(times, 50) * 1000:.0f}",
            f"{percentile(times, 99) * 1000:.0f}",
            f"{good / seeds:.0%}",
            f"{sum(gaps) / len(gaps):.2%}",
        ]
        row += [ratio_cell(ratios[policy]) for policy in BASELINES]
        if cpsat_seeds:
            row += [f"{percentile(cpsat_times, 99) * 1000:.0f}", ratio_cell(cpsat_ratio)]
        rows.append(row)
    header = ["GPUs", "p50 ms", "p99 ms", "opt/<=1%", "mean gap", *BASELINES]
    if cpsat_seeds:
        header += ["cp-sat only p99 ms", "cp-sat only"]
    return table(header, rows)


def ratio_cell(ratios: list[float]) -> str:
    """mean/min of cost ratios; "inf" counts decisions where rackwise stayed on one host (cost
    0) and the other policy did not."""
    if not ratios:
        return "-"
    finite = [r for r in ratios if r != float("inf")]
    worse = len(ratios) - len(finite)
    if worse:
        return f"inf {worse}/{len(ratios)}"
    return f"{sum(finite) / len(finite):.3f}/{min(finite):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--cpsat-seeds", type=int, default=5)
    args = parser.parse_args()
    assert "rackwise" in POLICIES
    generated = Fabric(generate(blocks=16, racks=98, hosts=8, gpus=8))
    lingjun = Fabric(from_lingjun_csv(LINGJUN, gpus=8))
    for name, fabric in (("generated 16x98x8x8", generated), ("Lingjun 847 hosts x 8", lingjun)):
        gpus = sum(h.gpus for h in fabric.hosts)
        print(f"\n== {name}: {len(fabric.hosts)} hosts, {gpus} GPUs, 60% taken, {args.seeds} seeds")
        print("baseline columns: cost / rackwise cost, mean/min")
        start = time.perf_counter()
        print(run(fabric, args.seeds, args.cpsat_seeds))
        print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
