"""Typed parsing of a TrainingJob's spec: replicas and their resources, roles, topology,
repair, priority and run time. Its pod template is read with Kubernetes' own types by
pods/podspec.py; whatever is wrong in either is an InvalidSpecError naming the field."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import (
    AfterValidator,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
)

from scheduler.controller.pods.podspec import (
    Closed,
    InvalidSpecError,
    Quantity,
    Template,
    _dns_label,
    describe,
)
from scheduler.controller.runtime.objects import TrainingJob
from scheduler.model import MAX_LEVELS, Pool

# a level name; which ones exist is the operator's topology config (jobs.translate checks)
Level = Annotated[StrictStr, Field(min_length=1, max_length=63)]


class PreferredLevel(Closed):
    level: Level
    weight: StrictInt | StrictFloat = Field(default=1.0, ge=0)


class SliceMode(StrEnum):
    REQUIRED = "required"  # the job waits until a placement keeps every slice (Kueue, Slurm)
    PREFERRED = "preferred"  # kept where a placement does, dropped where none does (KAI)


class SliceRequest(Closed):
    """Every consecutive group of `size` replicas inside one domain of `level` (Kueue's
    podset slices, KAI's and Slurm's segments), required or preferred."""

    level: Level
    size: StrictInt = Field(ge=2)
    mode: SliceMode = SliceMode.REQUIRED


class TopologyRequest(Closed):
    required_level: Level | None = None
    slices: list[SliceRequest] = Field(default_factory=list, max_length=MAX_LEVELS)
    preferred_levels: list[PreferredLevel] = Field(default_factory=list, max_length=MAX_LEVELS)


class RoleTopology(Closed):
    """A role's own topology: all its pods inside one domain of `required_level`, or of
    `preferred_level` when one domain holds them; `slices` as the workers' (by role rank)."""

    required_level: Level | None = None
    preferred_level: Level | None = None
    slices: list[SliceRequest] = Field(default_factory=list, max_length=MAX_LEVELS)


class Shape(Closed):
    dp: StrictInt = Field(default=1, ge=1)
    tp: StrictInt = Field(default=1, ge=1)
    pp: StrictInt = Field(default=1, ge=1)
    ep: StrictInt = Field(default=1, ge=1)


class ModelSpec(Closed):
    """The network the job trains (model/training.py): what a step sends and computes follows
    from it, so rackwise can price a placement that splits its expert-parallel block."""

    params_b: StrictInt | StrictFloat = Field(gt=0)
    active_params_b: StrictInt | StrictFloat | None = Field(default=None, gt=0)
    hidden: StrictInt = Field(gt=0)
    layers: StrictInt = Field(gt=0)
    seq: StrictInt = Field(gt=0)
    micro_batch: StrictInt = Field(default=1, gt=0)
    micro_batches: StrictInt = Field(default=1, gt=0)
    moe_share: StrictInt | StrictFloat = Field(default=0, ge=0, le=1)
    topk: StrictInt = Field(default=0, ge=0)
    overlap: StrictInt | StrictFloat = Field(default=0, ge=0, lt=1)
    node_limit: StrictInt | None = Field(default=None, ge=1)


class RepairPolicy(StrEnum):
    """What happens to a running gang whose node is lost."""

    LOST_PODS = "LostPods"  # keep the healthy pods, re-place only the lost ones near them
    WHOLE_GANG = "WholeGang"  # delete every pod and place the gang again


class RoleSpec(Closed):
    """Another pod set of the job (a launcher, a parameter server): its own template and
    resources, placed with the workers, all or nothing; pods `<job>-<role>-<i>`."""

    name: Annotated[StrictStr, AfterValidator(_dns_label)] = Field(max_length=20)
    replicas: StrictInt = Field(ge=1, le=1000)
    gpus_per_replica: StrictInt = Field(default=0, ge=0, le=64)
    cpu_per_replica: Quantity | None = None
    memory_per_replica: Quantity | None = None
    gradients: StrictBool = False  # its pods join the workers' gradient ring
    topology: RoleTopology = Field(default_factory=RoleTopology)
    template: Template


class TrainingJobSpec(Closed):
    replicas: StrictInt = Field(ge=1)
    gpus_per_replica: StrictInt = Field(default=8, ge=0, le=64)
    cpu_per_replica: Quantity | None = None
    memory_per_replica: Quantity | None = None
    # one of the operator's pools (config `pools`; jobs.translate checks)
    pool: Annotated[StrictStr, AfterValidator(_dns_label)] = Pool.TRAINING.value
    priority: StrictInt = 0
    # what the queue knows of the run: its expected length (EASY backfilling lets a gang use
    # hosts held for a blocked one only if it ends before them) and how often it checkpoints
    # (what a preemption loses); unknown when absent
    expected_runtime_seconds: StrictInt | None = Field(default=None, ge=1)
    checkpoint_interval_seconds: StrictInt | None = Field(default=None, ge=1)
    max_replicas_per_rack: StrictInt | None = Field(default=None, ge=1)
    topology: TopologyRequest = Field(default_factory=TopologyRequest)
    roles: list[RoleSpec] = Field(default_factory=list, max_length=8)
    parallelism: Shape | None = None
    model: ModelSpec | None = None
    repair: RepairPolicy = RepairPolicy.LOST_PODS
    # a failed pod restarts the whole gang (from the job's latest checkpoint) this many times,
    # then the job is Failed and every pod is removed
    backoff_limit: StrictInt = Field(default=3, ge=0, le=1000)
    suspend: StrictBool = False  # true: no pods (deleted if running); false again: queued
    # a finished job (and, by owner references, its pods) is deleted this long after it ends
    ttl_seconds_after_finished: StrictInt | None = Field(default=None, ge=0)
    template: Template


def parse_spec(job: TrainingJob) -> TrainingJobSpec:
    try:
        return TrainingJobSpec.model_validate(job.spec)
    except ValidationError as exc:
        raise InvalidSpecError(describe(exc, "spec")) from exc
