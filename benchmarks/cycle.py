"""One scheduling-queue cycle at 100k GPUs with a backlog: the decision time joint placement
adds where it has work to do.

The LLM-era mix of the fair protocol never queues (no gang waits at ~70% offered load), so its
queue-cycle times say nothing about joint placement, which acts only beside a blocked gang.
Here, per seed, on the default 5-level fabric of 100,352 GPUs (16 spines x 98 racks x 8 hosts x
8 GPUs): gangs drawn from the LLM-era size mix below are placed by rackwise
until one no longer fits; a random share of them then end (a quarter: room for the whole
cycle's attempts; 3%: the large gangs of the backlog block), leaving scattered holes; a backlog
of 300 gangs from the same mix is queued. The first cycle on that backlog is the
costliest one a running queue meets (every gang is new to it), timed with joint placement on
(the default, 8 gangs) and off, on the same state; then a second cycle after the starts are
applied, as the next event would run it. Queue rules as in the simulator: EASY backfill,
topology-aware preemption (one priority: nothing to preempt), defragmentation 4 moves per
hour (running gangs checkpoint every 30 min). Wall time on this machine (2 shared cores): a
measurement, not a test."""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import time
from dataclasses import dataclass

from benchmarks.common import table
from scheduler.model import GangRequest, PlaceConfig
from scheduler.placement import Snapshot, place_one
from scheduler.queue import Decisions, QueueConfig, Running, SchedulingQueue
from scheduler.teams import PoolQuota, QueueSpec, Resource, Teams
from scheduler.topology import Fabric, generate

# gang sizes (GPUs) and their share of gangs on a 100k-GPU fabric: our stated assumption
LLM_SIZES = {8: 0.45, 16: 0.15, 32: 0.12, 64: 0.10, 128: 0.08, 256: 0.05, 512: 0.03}
LLM_SIZES |= {1024: 0.015, 2048: 0.005}

BACKLOG = 300
ENDED = (0.25, 0.03)  # shares of the running gangs that end before the cycle


def draw(rng: random.Random, name: str) -> GangRequest:
    gpus = rng.choices(list(LLM_SIZES), list(LLM_SIZES.values()))[0]
    return GangRequest(name=name, pods=gpus // 8, gpus_per_pod=8)


def fill(fabric: Fabric, seed: int, ended: float) -> tuple[Snapshot, list[Running]]:
    """Gangs placed one by one until one does not fit, then a share `ended` of them gone."""
    rng = random.Random(f"cycle/{seed}")
    snapshot, running = Snapshot(fabric), list[Running]()
    config = PlaceConfig.of(seed=seed, workers=1, time_limit_s=0.5)
    while True:
        gang = draw(rng, f"r{len(running)}")
        placement = place_one(snapshot, gang, config)
        if not placement.placed:
            break
        snapshot.apply(gang, placement)
        started = -rng.uniform(0, 7200)
        end = rng.lognormvariate(8.9, 1.5)  # seconds from now: a median of ~2 h
        running.append(Running(gang.name, gang, placement, started, "", 1800.0, end))
    for r in rng.sample(running, int(ended * len(running))):
        snapshot.release(r.gang, r.placement)
        running.remove(r)
    return snapshot, running


def queue(joint: int, seed: int, teams: bool = False) -> SchedulingQueue:
    config = QueueConfig.of(
        report_waits=False,
        seed=seed,
        workers=1,
        time_limit_s=0.5,
        preemption_scope="cluster",
        joint_gangs=joint,
        defrag_moves_per_hour=4.0,
    )
    if teams:
        config = dataclasses.replace(config, teams=TEAMS)
    return SchedulingQueue(config)


# --teams: four teams of one cohort, each owning a quarter of the fabric's GPUs; running and
# queued gangs dealt to them in turn (queue/teams/queues.py: admission, borrowing, reclaim)
TEAMS = Teams(
    queues=tuple(
        QueueSpec(
            name=f"t{i}",
            namespaces=(f"t{i}",),
            cohort="all",
            quotas=(PoolQuota(pool="training", nominal={Resource.GPUS: 100_352 // 4}),),
        )
        for i in range(4)
    )
)


def team(i: int) -> str:
    return f"t{i % 4}"


def two_cycles(
    snapshot: Snapshot, running: list[Running], joint: int, seed: int, teams: bool = False
) -> Result:
    """The first cycle on a fresh backlog, then the next one after its starts are applied."""
    rng = random.Random(f"backlog/{seed}")
    backlog = {f"b{i}": draw(rng, f"b{i}") for i in range(BACKLOG)}
    q = queue(joint, seed, teams)
    for i, (key, gang) in enumerate(backlog.items()):
        q.add(key, gang, arrival=float(i), tenant=team(i) if teams else "")
    if teams:
        running = [dataclasses.replace(r, tenant=team(i)) for i, r in enumerate(running)]
    work = snapshot.copy()
    first, took = timed(q, work, running)
    for key, placement in first.starts:
        work.apply(backlog[key], placement)
    _, again = timed(q, work, running)
    return Result(took, again, first)


@dataclass(frozen=True)
class Result:
    first_s: float
    second_s: float
    decisions: Decisions


def timed(
    q: SchedulingQueue, snapshot: Snapshot, running: list[Running]
) -> tuple[Decisions, float]:
    started = time.perf_counter()
    decisions = q.cycle(0.0, snapshot, running)
    return decisions, time.perf_counter() - started


def row(ended: str, label: str, results: list[Result]) -> list[object]:
    firsts = [r.first_s * 1000 for r in results]
    mean = statistics.fmean
    return [
        ended,
        label,
        f"{statistics.median(firsts):.0f}",
        f"{max(firsts):.0f}",
        f"{max(r.second_s * 1000 for r in results):.0f}",
        f"{mean(len(r.decisions.starts) for r in results):.1f}",
        f"{mean(len(r.decisions.waiting) for r in results):.1f}",
        f"{mean(r.decisions.joint_gain for r in results):.3g}",
        f"{mean(len(r.decisions.joint_moved) for r in results):.1f}",
        f"{mean(len(r.decisions.joint_joined) for r in results):.1f}",
        f"{mean(len(r.decisions.marked) for r in results):.1f}",
    ]


def scenario(fabric: Fabric, ended: float, seeds: int, teams: bool) -> list[list[object]]:
    """Table rows for one share of ended gangs: joint placement on, then off, same states."""
    on: list[Result] = []
    off: list[Result] = []
    for seed in range(seeds):
        started = time.perf_counter()
        snapshot, running = fill(fabric, seed, ended)
        filled = time.perf_counter() - started
        taken = 1 - int(snapshot.free_gpus.sum()) / int(fabric.gpus.sum())
        print(
            f"{ended:.0%} ended, seed {seed}: {len(running)} gangs running, {taken:.0%} of "
            f"GPUs taken (filled in {filled:.0f} s)",
            flush=True,
        )
        on.append(two_cycles(snapshot, running, QueueConfig().policy.joint_gangs, seed, teams))
        off.append(two_cycles(snapshot, running, 0, seed, teams))
    return [row(f"{ended:.0%}", "on (8 gangs)", on), row(f"{ended:.0%}", "off", off)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--teams", action="store_true", help="four teams' quotas (TEAMS)")
    args = parser.parse_args()
    fabric = Fabric(generate(blocks=16, racks=98, hosts=8, gpus=8))
    rows = [r for ended in ENDED for r in scenario(fabric, ended, args.seeds, args.teams)]
    heads = ["ended", "joint placement", "first p50 ms", "first max ms", "second max ms"]
    heads += ["starts", "waits", "J saved", "re-placed", "joined", "marked"]
    print(f"\n{BACKLOG} gangs queued, {args.seeds} seeds (means per seed after the times)")
    print(table(heads, rows))


if __name__ == "__main__":
    main()
