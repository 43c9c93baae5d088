"""The fair protocol on a scenario: `rackwise compare` and `make bench-compare`.

Contract. Takes a scenario (topology, traces, queue rules, fabric model), the seeds, the
policies, rackwise's variant rows and whether to run the oracle. Decides nothing itself: every
row runs the same jobs of each seed (a synthetic trace drawn per seed, arrivals jittered per
seed) under the same queue rules; only the placement policy differs, and rackwise's own
mechanisms are switched off in its variant rows. The oracle row is Kueue BestFit's placements
on a fabric where no link is ever shared and every run is compact: the most any placement
could gain. Promises: a run's metrics depend only on the code, the scenario and the seed (the
solver's limits are work limits), so a saved run is read back instead of run again when both
digests match; the document it returns holds, for every row and seed, the measures under the
stable keys of PROTOCOL_KEYS, then the paired ratios with 95% intervals and the oracle's gain.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduler.model.policy import SchedulingPolicy
from scheduler.placement.hints import READING, described
from scheduler.simulation import sweep
from scheduler.simulation.config import SimConfig
from scheduler.simulation.profiles import FabricProfile, ProfileName
from scheduler.simulation.protocol import (
    ORACLE,
    UNTOLD,
    Capture,
    Ratio,
    against,
    captures,
    ratios,
)
from scheduler.simulation.runner import Task
from scheduler.simulation.scenario import (
    Scenario,
    build_topology,
    input_files,
    seed_jobs,
    with_teams,
)
from scheduler.simulation.sweep import Key

ORACLE_POLICY = "kueue-best-fit"
ORACLE_DESCRIBED = (
    "Kueue BestFit's placements on a fabric where no link is ever shared and every run is "
    "compact: the most any placement could gain; not told (a split costs nothing there)"
)


def described_row(row: str) -> str:
    """What a row of a comparison is (placement/hints.py for the peers)."""
    return ORACLE_DESCRIBED if row == ORACLE else described(row)


# rackwise with one of its own mechanisms switched off (or on, for moves at checkpoints, off
# by default), or all off: rows of their own, never a baseline
VARIANTS: dict[str, dict[str, Any]] = {
    "rackwise -frag": {"fragmentation_share": 0.0},
    "rackwise -joint": {"joint_gangs": 0},
    "rackwise +contention": {"contention": True},
    "rackwise +defrag": {"defrag_moves_per_hour": 4.0},
    # not a mechanism: rackwise's placements with every job given the fabric to itself (slowed
    # by its own placement, never by another job), the ceiling of avoiding all sharing
    "rackwise alone": {"alone": True},
    "rackwise (none)": {
        "fragmentation_share": 0.0,
        "contention": False,
        "joint_gangs": 0,
        "defrag_moves_per_hour": 0.0,
    },
}
# what the document keeps of each run, under these keys (README, "rackwise compare")
PROTOCOL_KEYS: tuple[str, ...] = (
    "jobs",
    "measured_jobs",
    "jobs_finished",
    "jct_mean_s",
    "jct_p95_s",
    "jobs_by_class",
    "jct_mean_s_by_class",
    "jct_p95_s_by_class",
    "gpu_hours_lost",
    "gpu_hours_lost_alone",
    "gpu_hours_lost_shared",
    "large_gangs",
    "large_gang_wait_mean_s",
    "large_gang_wait_p95_s",
    "nvlink_gang_wait_mean_s",
    "utilisation_steady",
    "bounded_slowdown_mean",
    "bounded_slowdown_p95",
    "multihost_contended_share",
    "multihost_contended_slowdown_mean",
    "goodput",
    "makespan_s",
    "cross_rack_gb",
    "cross_spine_gb",
    "defrag_moves",
    "wall_seconds",
)
# (the run, runs done, runs in all) when a run ends (None: the runs read back), or
# (the run, -jobs done, jobs in all) while it runs
Progress = Callable[[Key | None, int, int], None]


@dataclass(frozen=True)
class Row:
    label: str
    policy: str
    changes: dict[str, Any]


# peers with a field for the segments their users state, each as a row without them
UNTOLD_ROWS: dict[str, str] = {p + UNTOLD: p for p in READING if p != "rackwise"}


def plan(policies: Sequence[str], variants: Sequence[str], oracle: bool) -> list[Row]:
    """The rows: each policy, rackwise's variants and the peers untold, then the oracle (not
    told: where every run is compact, waiting for a segment gains nothing)."""
    rows = [Row(p, p, {}) for p in policies]
    rows += [Row(v, "rackwise", VARIANTS[v]) for v in variants if v in VARIANTS]
    rows += [Row(v, UNTOLD_ROWS[v], {"hints": False}) for v in variants if v in UNTOLD_ROWS]
    if oracle:
        changes = {"fabric": FabricProfile(name=ProfileName.ORACLE), "hints": False}
        rows.append(Row(ORACLE, ORACLE_POLICY, changes))
    return rows


def tasks(scenario: Scenario, base: Path, seeds: Sequence[int], rows: list[Row]) -> dict[Key, Task]:
    spec = build_topology(scenario, base)
    scenario = with_teams(scenario, base, spec)
    out: dict[Key, Task] = {}
    for seed in seeds:
        jobs = seed_jobs(scenario, base, spec, seed)
        config = scenario.sim_config(seed)
        for row in rows:
            out[(row.label, seed)] = Task(spec, jobs, row.policy, varied(config, row.changes))
    return out


def varied(config: SimConfig, changes: dict[str, Any]) -> SimConfig:
    """The run's config with a row's changes: policy knobs into its scheduling policy, the
    rest (the oracle's fabric) into the run's."""
    knobs = {k: v for k, v in changes.items() if k in SchedulingPolicy.model_fields}
    wiring = {k: v for k, v in changes.items() if k in FabricProfile.model_fields}
    rest = {k: v for k, v in changes.items() if k not in knobs and k not in wiring}
    policy = config.scheduling.model_copy(update=knobs)
    if wiring:  # a change to the scenario's own fabric profile (a ceiling row), not a new one
        rest.setdefault("fabric", config.fabric.model_copy(update=wiring))
    return config.model_copy(update={**rest, "scheduling": policy})


class Saved:
    """Per-run measures on disk, valid for one version of the code and one setup: a file is
    read back only when both digests match, so a changed simulator never reuses a result."""

    def __init__(self, folder: Path, setup: dict[str, Any]) -> None:
        self.folder = folder
        self.setup = json.dumps(setup, sort_keys=True, default=str)
        self.code = code_digest()
        folder.mkdir(parents=True, exist_ok=True)

    def path(self, key: Key) -> Path:
        digest = hashlib.sha256(f"{self.setup}/{key[0]}/{key[1]}".encode()).hexdigest()[:16]
        return self.folder / f"{key[0].replace(' ', '_')}-{key[1]}-{digest}.json"

    def load(self, key: Key) -> dict[str, Any] | None:
        path = self.path(key)
        if not path.exists():
            return None
        found = json.loads(path.read_text())
        metrics: dict[str, Any] | None = (
            found["metrics"] if found.get("code") == self.code else None
        )
        return metrics

    def store(self, key: Key, metrics: dict[str, Any]) -> None:
        body = {"code": self.code, "setup": self.setup, "row": key[0], "seed": key[1]}
        path = self.path(key)
        part = path.with_suffix(".part")  # renamed when whole: a stopped write is never read
        part.write_text(json.dumps({**body, "metrics": metrics}, default=float))
        part.replace(path)


def input_digests(scenario: Scenario, base: Path) -> dict[str, str]:
    """The content hash of each file the scenario reads, for a run's setup: a trace edited in
    place is a new setup, so its saved runs are not read back ("missing" when it cannot be
    read: loading it says why)."""
    out = {}
    for path in input_files(scenario, base):
        try:
            out[str(path.resolve())] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            out[str(path)] = "missing"
    return out


def code_digest() -> str:
    """The scheduler's sources, hashed: what a saved run depends on."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).resolve().parents[1].rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def run_all(
    todo: dict[Key, Task],
    workers: int,
    saved: Saved | None,
    progress: Progress | None = None,
    ray: str | None = None,
) -> dict[Key, dict[str, Any]]:
    """Every run's measures: saved ones read back, the others run on local processes
    (`workers` at a time) or as Ray tasks (`ray`: an address, or auto) and saved as each
    ends, so a stopped protocol loses only the runs under way."""
    done = {key: m for key in todo if saved is not None and (m := saved.load(key)) is not None}
    left = {key: task for key, task in todo.items() if key not in done}
    tell = progress or (lambda *_: None)
    tell(None, len(done), len(todo))

    def report(key: Key, jobs: int, total: int) -> None:
        tell(key, -jobs, total)  # a run under way: its jobs done, negated

    runs = (
        sweep.local(left, PROTOCOL_KEYS, workers, report)
        if ray is None
        else sweep.on_ray(left, PROTOCOL_KEYS, ray, report)
    )
    for key, metrics in runs:
        done[key] = metrics
        if saved is not None:
            saved.store(key, metrics)
        tell(key, len(done), len(todo))
    return done


@dataclass(frozen=True)
class Comparison:
    per_seed: dict[str, list[dict[str, Any]]]  # row -> measures per seed, in seed order
    seeds: list[int]
    ratios: list[Ratio]  # rackwise over the best baseline per measure
    captures: list[Capture]  # the oracle's gain and rackwise's share of it
    variants: dict[str, list[Ratio]]  # rackwise over each of its variant rows

    def document(self, setup: dict[str, Any]) -> dict[str, Any]:
        """The --json document (README, "rackwise compare")."""
        return {
            "setup": setup,
            "seeds": self.seeds,
            "rows": {
                row: [{"seed": s, **m} for s, m in zip(self.seeds, runs, strict=True)]
                for row, runs in self.per_seed.items()
            },
            "ratios": [_ratio(r) for r in self.ratios],
            "oracle": [
                {
                    "measure": c.measure.key,
                    "baseline": c.baseline,
                    "oracle_over_baseline": c.oracle.mean,
                    "half_width_95": c.oracle.half,
                    "rackwise_captures": c.captured,
                }
                for c in self.captures
            ],
            "variants": {row: [_ratio(r) for r in found] for row, found in self.variants.items()},
        }


def _ratio(r: Ratio) -> dict[str, Any]:
    return {
        "measure": r.measure.key,
        "baseline": r.baseline,
        "mean": r.mean,
        "half_width_95": r.half,
        "verdict": r.verdict,
    }


def compare(
    scenario: Scenario,
    base: Path,
    seeds: Sequence[int],
    rows: list[Row],
    workers: int = 2,
    saved: Saved | None = None,
    progress: Progress | None = None,
    ray: str | None = None,
) -> Comparison:
    done = run_all(tasks(scenario, base, seeds, rows), workers, saved, progress, ray)
    per_seed = {row.label: [done[(row.label, s)] for s in seeds] for row in rows}
    variants = {r.label: against(per_seed, r.label) for r in rows if r.label in VARIANTS}
    return Comparison(per_seed, list(seeds), ratios(per_seed), captures(per_seed), variants)
