"""Multi-part gangs against the exact reference: how many each engine refuses that fit, and how
many ring-role gangs it places above the optimum (the issue's two figures).

The generator and the exhaustive reference are the property test's
(tests/unit/placement/test_parts.py): gangs of up to 7 pods in 1-3 parts (workers, roles with
or without `gradients`, own required levels, in or out of the workers' group) on 6 hosts with
varied free GPUs and CPU. Prints, per engine: feasible gangs, refused ones, ring-role gangs, how
many of them are above the optimum (and the worst ratio), optimal claims above it, and
infeasible gangs placed. A measurement, not a test (the test asserts the bounds)."""

from __future__ import annotations

import argparse

from scheduler.placement import place
from tests.unit.placement.test_parts import engine_config, reference, scene


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=400)
    args = parser.parse_args()
    for engine in ("auto", "cp-sat"):
        counts = dict.fromkeys(
            ("feasible", "refused", "ring", "ring_above", "wrong_optimal", "infeasible_placed"), 0
        )
        worst = 1.0
        for seed in range(args.seeds):
            snapshot, gang = scene(seed)
            ref = reference(snapshot, gang)
            [p] = place(snapshot, [gang], engine_config(engine))
            if ref.value is None:
                counts["infeasible_placed"] += p.placed
                continue
            counts["feasible"] += 1
            ring = any(r.gradients for r in gang.roles)
            counts["ring"] += ring
            if not p.placed:
                counts["refused"] += 1
                continue
            above = p.objective > ref.value * (1 + 1e-9) + 1e-12
            counts["ring_above"] += ring and above
            counts["wrong_optimal"] += p.optimal and above
            if ref.value > 0:
                worst = max(worst, p.objective / ref.value)
        print(engine, counts, f"worst J / optimum {worst:.7f}", flush=True)


if __name__ == "__main__":
    main()
