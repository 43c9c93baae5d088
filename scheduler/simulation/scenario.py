"""Scenario files: topology + traces + pools + policies + seed (simulations/scenarios/*.yaml).
Relative paths are resolved against the scenario file's folder."""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from scheduler.io import load_yaml
from scheduler.model.topology import Tier, TopologySpec
from scheduler.placement import POLICIES
from scheduler.simulation.config import SimConfig
from scheduler.simulation.synthetic import diurnal_serving, llm_mix, modern_mix
from scheduler.simulation.trace import LoadReport, TraceJob, jitter, load_trace, tag, transform
from scheduler.teams import PoolQuota, QueueSpec, Resource, Teams
from scheduler.topology import Fabric, accelerators, from_lingjun_csv, generate, load_topology
from scheduler.topology.accelerators import Accelerator
from scheduler.topology.links import RAILS_NEED, rails_fit


class ScenarioError(ValueError):
    pass


# keys of earlier scenario files, and where they went
_MOVED = {
    "backfill": "now under `scheduling:`",
    "preemption": "now under `scheduling:`",
    "compact_wait_s": "now under `scheduling:`",
    "time_limit_s": "now `scheduling: {solver: {time_limit_s}}`",
    "profile": "now `fabric: {name}`",
    "ecmp": "now `fabric: {ecmp}`",
    "warmup_hours": "now `warmup_s` (seconds)",
}


class Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GenerateSpec(Strict):
    blocks: int = Field(ge=1)
    racks: int = Field(ge=1)
    hosts: int = Field(ge=1)
    gpus: int = Field(default=8, ge=1)
    nvlink: int = Field(default=0, ge=0)
    # hosts of each NVLink domain kept idle as spares (placement/spares.py; needs `nvlink`)
    spares: int = Field(default=0, ge=0)
    # the GPUs' generation, which sets NVLink's and the NICs' rates (topology/accelerators.py);
    # None: the topology's defaults
    accelerator: Accelerator | None = None


class TopologySource(Strict):
    lingjun: str | None = None
    file: str | None = None
    generate: GenerateSpec | None = None
    gpus_per_host: int = Field(default=8, ge=1)

    @model_validator(mode="after")
    def _one(self) -> TopologySource:
        if sum(x is not None for x in (self.lingjun, self.file, self.generate)) != 1:
            raise ValueError("give exactly one of lingjun, file, generate")
        return self


class TraceSource(Strict):
    # llm-mix: drawn per seed (simulation/synthetic.py), no file; `days` long, 20 jobs/hour
    # before `load` rescales the arrivals
    # diurnal-serving: online-inference replicas whose demand follows a day, its peak `peak`
    # times its pool's GPUs (simulation/synthetic.py), drawn per seed, no file
    # modern-mix: jobs with parallel shapes and models (simulation/synthetic.py), drawn per seed,
    # none larger than half the fabric
    format: Literal["philly", "openb", "rackwise", "llm-mix", "modern-mix", "diurnal-serving"]
    path: str | None = None
    pool: str | None = None
    start_days: float = Field(default=0.0, ge=0)
    days: float | None = Field(default=None, gt=0)
    scale: int = Field(default=1, ge=1, description="multiply gang sizes (LLM-era mixes)")
    load: float = Field(default=1.0, gt=0, description="compress arrivals by this factor")
    jobs: int | None = Field(default=None, ge=1)
    max_duration_hours: float | None = Field(
        default=None, gt=0, description="clip run times (openb pods often run to trace end)"
    )

    peak: float = Field(default=0.9, gt=0, description="diurnal-serving: peak demand / pool GPUs")
    overlap: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="modern-mix: share of each job's communication hidden behind compute",
    )

    @property
    def synthetic(self) -> bool:
        return self.format in ("llm-mix", "modern-mix", "diurnal-serving")

    @model_validator(mode="after")
    def _path(self) -> TraceSource:
        if (self.path is None) != self.synthetic:
            raise ValueError("a trace file needs `path`; `format: llm-mix` takes none")
        return self


class TraceTeams(Strict):
    """Every tenant of the traces a queue like `like` (its cohort, weight, deadline), owning a
    part of `pool`'s GPUs proportional to its share of the traces' GPU-time (largest
    remainders), as a platform would size teams' quotas from what they used."""

    pool: str = "training"
    like: QueueSpec = QueueSpec(name="each-tenant", cohort="all")


class Scenario(SimConfig):
    """A comparison's setup: what the runs are (SimConfig's fields: the scheduling policy, the
    fabric model, checkpoints, failures, warm-up, the first seed) and what they run on."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str = "scenario"
    topology: TopologySource
    pools: dict[str, float] = Field(default_factory=lambda: {"training": 1.0})
    traces: list[TraceSource] = Field(min_length=1)
    policies: list[str] = Field(default_factory=lambda: list(POLICIES))
    skip_bad_rows: bool = False
    # offered load: arrivals rescaled so the jobs ask this share of the GPU-time the fabric
    # offers while they arrive (None: as the traces say)
    load: float | None = Field(default=None, gt=0)
    # seeds: each one a draw of arrival jitter and failures, the same for every policy
    seeds: int = Field(default=1, ge=1)
    jitter_minutes: float = Field(default=0.0, ge=0)
    # queues from the traces' tenants (None: `teams` as given, or none)
    teams_from_trace: TraceTeams | None = None

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        """Knobs that were top-level before the policy had one home: say where they went."""
        if isinstance(data, dict):
            for key in sorted(set(data) & set(_MOVED)):
                raise ValueError(f"{key}: {_MOVED[key]}")
        return data

    @model_validator(mode="after")
    def _policies(self) -> Scenario:
        unknown = [p for p in self.policies if p not in POLICIES]
        if unknown:
            raise ValueError(f"unknown policies {unknown}; choose from {', '.join(POLICIES)}")
        return self

    def sim_config(self, seed: int | None = None) -> SimConfig:
        """One run's config: the scenario's own, at `seed` (the scenario's first by default)."""
        own = {k: getattr(self, k) for k in SimConfig.model_fields}
        return SimConfig(**{**own, "seed": self.seed if seed is None else seed})


def with_teams(scenario: Scenario, base: Path, spec: TopologySpec) -> Scenario:
    """The scenario with its queues made from its traces' tenants, when it asks for that."""
    rule = scenario.teams_from_trace
    if rule is None:
        return scenario
    jobs, _ = build_jobs(scenario, base, scenario.seed, spec)
    gpus = sum(h.gpus for h in spec.hosts if h.pool == rule.pool)
    used: dict[str, float] = {}
    for j in jobs:
        if j.tenant:
            used[j.tenant] = used.get(j.tenant, 0.0) + j.gpus * j.duration_s
    nominal = largest_remainders(used, gpus)
    queues = tuple(
        rule.like.model_copy(
            update={
                "name": t,
                "namespaces": (t,),
                "quotas": (PoolQuota(pool=rule.pool, nominal={Resource.GPUS: n}),),
            }
        )
        for t, n in sorted(nominal.items())
    )
    return scenario.model_copy(update={"teams": Teams(queues=queues)})


def largest_remainders(weights: dict[str, float], total: int) -> dict[str, int]:
    """`total` split in proportion to `weights`, in whole units, the remainders to the largest
    fractions (then by name)."""
    whole = sum(weights.values())
    if whole <= 0:
        return dict.fromkeys(weights, 0)
    exact = {k: total * w / whole for k, w in weights.items()}
    out = {k: int(v) for k, v in exact.items()}
    left = total - sum(out.values())
    for k in sorted(exact, key=lambda k: (out[k] - exact[k], k))[:left]:
        out[k] += 1
    return out


def load_scenario(path: Path) -> tuple[Scenario, Path]:
    data = load_yaml(path)
    try:
        return Scenario.model_validate(data), path.parent
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise ScenarioError(f"{path}: {where}: {err['msg']}") from exc


def build_topology(scenario: Scenario, base: Path) -> TopologySpec:
    """The scenario's topology; ScenarioError when `ecmp` or `ratios` name a level it does not
    have or whose links no flow crosses, or `rails` meet hosts of different sizes."""
    spec = _topology(scenario, base)
    if scenario.fabric.rails and not rails_fit(spec.hosts, scenario.fabric.per_gpu_nic):
        raise ScenarioError(f"fabric.rails: {RAILS_NEED}")
    for field, names in (("ecmp", scenario.fabric.ecmp), ("ratios", scenario.fabric.ratios)):
        for name in names:
            _check_level(spec, field, name)
    if any(spec.names.index(name) < Tier.RACK for name in scenario.fabric.ratios):
        raise ScenarioError(
            "fabric.ratios: a host's NIC is never oversubscribed; name switch levels"
        )
    return spec


def _check_level(spec: TopologySpec, field: str, name: str) -> None:
    """`ecmp` and `ratios` apply to the links that leave a domain of the level they name: it
    must be a level some flow leaves (a top level of one domain has none: the links between
    its children are the level below's), or the model they state is dropped in silence."""
    names = list(spec.names)
    if name not in names:
        raise ScenarioError(
            f"fabric.{field}: unknown level {name!r}; levels are {', '.join(names)}"
        )
    at = names.index(name)
    if at == len(names) - 1 and len({h.domains.get(name) for h in spec.hosts}) < 2:
        below = names[at - 1]
        raise ScenarioError(
            f"fabric.{field}: no link leaves a {name!r} domain (the top level has one); the "
            f"links between its {below!r} domains leave those: name {below!r}"
        )


def input_files(scenario: Scenario, base: Path) -> list[Path]:
    """The files the scenario reads: its trace files, and a topology file or Lingjun CSV."""
    source = scenario.topology
    named = [source.lingjun, source.file, *(t.path for t in scenario.traces)]
    return [base / name for name in named if name is not None]


def _topology(scenario: Scenario, base: Path) -> TopologySpec:
    source = scenario.topology
    if source.lingjun is not None:
        return from_lingjun_csv(base / source.lingjun, source.gpus_per_host, scenario.pools)
    if source.generate is not None:
        g = source.generate
        spec = generate(
            g.blocks, g.racks, g.hosts, g.gpus, g.nvlink, scenario.pools, spares=g.spares
        )
        if g.accelerator is None:
            return spec
        return spec.model_copy(update={"levels": accelerators.levels(spec.levels, g.accelerator)})
    assert source.file is not None
    return load_topology(base / source.file, source.gpus_per_host)


@functools.lru_cache(maxsize=8)
def _read(
    path: Path, _mtime_ns: int, fmt: str, skip_bad_rows: bool, pool: str | None
) -> LoadReport:
    """A trace file read once per process and version of the file: every seed of a comparison
    draws from the same rows (build_jobs only reads the report; transform makes new jobs)."""
    return load_trace(path, fmt, skip_bad_rows, pool)


def _mtime(path: Path) -> int:
    """The file's modification time; -1 when it cannot be read (load_trace says why)."""
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return -1


def build_jobs(
    scenario: Scenario, base: Path, seed: int = 0, spec: TopologySpec | None = None
) -> tuple[list[TraceJob], int]:
    """All traces' jobs, merged by submit time; and the count of skipped bad rows. `seed` draws
    the synthetic traces (a diurnal one sized by its pool's GPUs in `spec`)."""
    jobs: list[TraceJob] = []
    bad = 0
    for i, source in enumerate(scenario.traces):
        if source.path is None:
            found = [
                j if source.pool is None else j.model_copy(update={"pool": source.pool})
                for j in _synthetic(source, seed, spec)
            ]
        else:
            path = base / source.path
            report = _read(path, _mtime(path), source.format, scenario.skip_bad_rows, source.pool)
            bad += report.bad_rows
            found = report.jobs
        chosen = transform(
            found,
            start_s=source.start_days * 86400,
            days=source.days,
            scale=source.scale,
            load=source.load,
            limit=source.jobs,
            max_duration_s=source.max_duration_hours * 3600 if source.max_duration_hours else None,
        )
        jobs.extend(tag(chosen, f"t{i}-"))
    if not jobs:  # a replay of nothing would print a table of zeros as if it measured them
        raise ScenarioError(
            f"{scenario.name}: no jobs: every trace is empty within its window "
            "(start_days, days, jobs)"
        )
    jobs.sort(key=lambda j: (j.submit_s, j.id))
    return jobs, bad


def _synthetic(source: TraceSource, seed: int, spec: TopologySpec | None) -> list[TraceJob]:
    days = source.days or 1.0
    if source.format == "llm-mix":
        return llm_mix(seed, days)
    if source.format == "modern-mix":
        total = sum(h.gpus for h in spec.hosts) if spec is not None else 1024
        return modern_mix(seed, days, largest=total // 2, overlap=source.overlap)
    pool = source.pool or "online-inference"
    gpus = sum(h.gpus for h in spec.hosts if h.pool == pool) if spec is not None else 0
    return diurnal_serving(seed, days, source.peak * gpus)


def offered_load(jobs: list[TraceJob], gpus: int) -> float:
    """GPU-seconds the jobs ask over the GPU-seconds `gpus` offer while they arrive."""
    if len(jobs) < 2 or not gpus:
        return 0.0
    span = max(j.submit_s for j in jobs) - min(j.submit_s for j in jobs)
    asked = sum(j.gpus * j.duration_s for j in jobs)
    return asked / (gpus * span) if span > 0 else math.inf


def at_load(jobs: list[TraceJob], gpus: int, load: float) -> list[TraceJob]:
    """Arrivals stretched or compressed (from the first) so the jobs offer `load`."""
    offered = offered_load(jobs, gpus)
    if not offered or math.isinf(offered):
        return jobs
    first = min(j.submit_s for j in jobs)
    factor = offered / load
    return [j.model_copy(update={"submit_s": (j.submit_s - first) * factor}) for j in jobs]


def seed_jobs(scenario: Scenario, base: Path, spec: TopologySpec, seed: int) -> list[TraceJob]:
    """One seed's draw: the traces (synthetic ones drawn for the seed), at the scenario's
    offered load over the GPUs of the pools they use, each arrival jittered."""
    jobs, _ = build_jobs(scenario, base, seed, spec)
    if scenario.load is not None:
        tags = _diurnal_tags(scenario)  # a diurnal trace's demand is its own: not rescaled
        daily = [j for j in jobs if tags and j.id.startswith(tags)]
        rest = [j for j in jobs if not (tags and j.id.startswith(tags))]
        jobs = at_load(rest, gpus_in_service(spec, {j.pool for j in rest}), scenario.load)
        if daily:
            jobs = sorted([*jobs, *daily], key=lambda j: (j.submit_s, j.id))
    return jitter(jobs, seed, scenario.jitter_minutes)


def gpus_in_service(spec: TopologySpec, pools: set[str]) -> int:
    """The pools' GPUs that can hold pods at once: an offered load is of these (a spare tray
    takes no work)."""
    if not spec.levels[Tier.NVLINK].spares:
        return sum(h.gpus for h in spec.hosts if h.pool in pools)
    return Fabric(spec).gpus_in_service(np.isin([h.pool for h in spec.hosts], list(pools)))


def _diurnal_tags(scenario: Scenario) -> tuple[str, ...]:
    """The id prefixes (`tag`) of the scenario's diurnal traces' jobs."""
    return tuple(f"t{i}-" for i, s in enumerate(scenario.traces) if s.format == "diurnal-serving")
