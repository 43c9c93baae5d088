"""Gang requests: pods that start together or not at all."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from scheduler.model.constraints import NodeConstraints, Spread
from scheduler.model.training import Model


class Pool(StrEnum):
    TRAINING = "training"
    BATCH_INFERENCE = "batch-inference"
    ONLINE_INFERENCE = "online-inference"


class Objective(StrEnum):
    PACK = "pack"  # least traffic across the fabric (J): training
    FILL = "fill"  # fill fragments, keep whole racks and hosts free: batch inference
    SPREAD = "spread"  # as many racks as the per-rack cap allows: online inference


def pool_objective(pool: str) -> Objective:
    """The default pools' objectives (training packs, batch fills fragments, online spreads);
    any other pool packs unless its gang says otherwise (`GangRequest.objective`)."""
    return {
        "training": Objective.PACK,
        "batch-inference": Objective.FILL,
        "online-inference": Objective.SPREAD,
    }.get(pool, Objective.PACK)


def objective_of(gang: GangRequest) -> Objective:
    return gang.objective or pool_objective(gang.pool)


class ParallelShape(BaseModel):
    """dp x tp x pp in GPUs; tp GPUs form a tensor-parallel group that must stay on NVLink.

    `ep` (expert parallel, MoE) divides dp: the experts of a layer are spread over ep
    consecutive data-parallel ranks, which exchange tokens all-to-all (topology/traffic.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    dp: int = Field(default=1, ge=1)
    tp: int = Field(default=1, ge=1)
    pp: int = Field(default=1, ge=1)
    ep: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _experts(self) -> ParallelShape:
        if self.dp % self.ep:
            raise ValueError(f"ep={self.ep} must divide dp={self.dp}")
        return self

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp


# the name of the pod set that exchanges gradients, the gang's own fields
WORKERS = "worker"


@dataclass(frozen=True)
class Request:
    gpus: int
    cpu_milli: int
    memory_mib: int
    extended: Mapping[str, int]


class Slice(BaseModel):
    """Every consecutive group of `size` pods stays inside one domain of `level`. A size of 1
    constrains nothing (each pod is in some domain), as in Kueue; its level must still be a
    level of the fabric and not above a required level."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    level: str = Field(min_length=1)
    size: int = Field(ge=1)


class Role(BaseModel):
    """A pod set of a gang besides its workers (a launcher, a parameter server, a leader, or a
    data-parallel member of another shape): placed with them, all or nothing, as near them as
    it fits. With `gradients`, its pods join the workers' all-reduce ring (pod sets of
    different shapes in one data-parallel group, e.g. members with other TP widths): the
    traffic model and J then count them; without, it exchanges nothing the fabric carries.

    Its own topology (placement/roles.py): `required_level` keeps every pod of the role inside
    one domain of that level, `preferred_level` does so when one domain holds them, `slices`
    keep each consecutive group of its pods (by role rank) inside one domain of a level."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str = Field(min_length=1, max_length=63)
    pods: int = Field(ge=1)
    gpus_per_pod: int = Field(default=0, ge=0)
    cpu_milli_per_pod: int = Field(default=0, ge=0)
    memory_mib_per_pod: int = Field(default=0, ge=0)
    extended_per_pod: dict[str, int] = Field(default_factory=dict)
    constraints: NodeConstraints = NodeConstraints()
    required_level: str | None = None
    preferred_level: str | None = None
    slices: tuple[Slice, ...] = ()
    gradients: bool = False  # its pods are members of the workers' gradient ring
    # held by the gang's required level when it names none of its own: the whole group in one
    # domain (Kueue's PodSet group); False leaves such a role free of it
    in_group: bool = True

    @model_validator(mode="after")
    def _check(self) -> Role:
        for s in self.slices:
            if self.pods % s.size:
                raise ValueError(
                    f"role {self.name}: slice of {s.size} pods per {s.level} does not divide "
                    f"its {self.pods} pods"
                )
        return self

    @property
    def levels(self) -> list[str]:
        """Every level the role names."""
        named = [self.required_level, self.preferred_level, *(s.level for s in self.slices)]
        return [n for n in named if n is not None]


class GangRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str = Field(min_length=1)
    pods: int = Field(ge=1)
    gpus_per_pod: int = Field(default=8, ge=0)
    cpu_milli_per_pod: int = Field(default=0, ge=0)
    memory_mib_per_pod: int = Field(default=0, ge=0)
    pool: str = Pool.TRAINING.value
    # what placement optimises for this gang; None: its pool's default (pool_objective)
    objective: Objective | None = None
    # level names: which exist is the fabric's business (place_one reports unknown ones)
    required_level: str | None = None
    # level -> weight of keeping the gang inside one domain of that level
    preferred_levels: dict[str, float] = Field(default_factory=dict)
    shape: ParallelShape | None = None
    # the network it trains, as its users state it: what a step sends and computes follows
    # from it, so rackwise can price a placement that splits its expert-parallel block
    # (queue/split.py); None: not stated, nothing priced
    model: Model | None = None
    priority: int = 0
    # online inference: at most this many pods per rack (failure-domain spread)
    max_pods_per_rack: int | None = Field(default=None, ge=1)
    # at most this many pods per host (a required pod anti-affinity of the gang with itself on
    # the hostname: one per host)
    max_pods_per_host: int | None = Field(default=None, ge=1)
    # topology spread of the gang's own pods (topologySpreadConstraints, DoNotSchedule),
    # resolved against the pods already running (model/constraints.py)
    spread: tuple[Spread, ...] = ()
    # gradient bytes each DP member holds; drives the traffic cost (default: 1 GB per GPU)
    gradient_gb: float = Field(default=1.0, ge=0)
    # extended resources each pod requests (name -> whole units), beyond GPUs, CPU and memory
    extended_per_pod: dict[str, int] = Field(default_factory=dict)
    # labels and taints a host must answer (nodeSelector, required affinity, tolerations)
    constraints: NodeConstraints = NodeConstraints()
    # groups of pods kept inside one domain of a level (placement/slices.py); the TP group of
    # `shape` is one at the NVLink level
    slices: tuple[Slice, ...] = ()
    # groups of pods kept inside one domain of a level where a placement that does so exists,
    # the gang placed without them otherwise (KAI's preferred segments; placement/hints.py)
    preferred_slices: tuple[Slice, ...] = ()
    # other pod sets placed with the workers (the fields above), after them in rank order; those
    # with `gradients` join the workers' all-reduce ring
    roles: tuple[Role, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> GangRequest:
        if self.shape is not None:
            if self.shape.gpus != self.gpus:
                raise ValueError(
                    f"shape dp*tp*pp={self.shape.gpus} must equal pods*gpus_per_pod={self.gpus}"
                )
            if self.tp_pods > 1 and self.pods % self.tp_pods:
                raise ValueError(f"pods={self.pods} must be a multiple of the TP group size")
        names = [r.name for r in self.roles]
        if len(set(names)) != len(names) or WORKERS in names:
            raise ValueError(f"role names must be distinct and not {WORKERS!r}: {names}")
        ring = [r.name for r in self.roles if r.gradients]
        if ring and self.shape is not None and self.shape.pp > 1:
            raise ValueError(
                f"role {ring[0]}: a pod set in the gradient ring needs workers without pipeline "
                f"stages (pp={self.shape.pp})"
            )
        if any(v < 0 for v in self.extended_per_pod.values()):
            raise ValueError("extended resource requests must be >= 0")
        for s in (*self.slices, *self.preferred_slices):
            if self.pods % s.size:
                raise ValueError(
                    f"slice of {s.size} pods per {s.level} does not divide the {self.pods} pods"
                )
        return self

    @property
    def gpus(self) -> int:
        """The workers' GPUs (the pod set that exchanges gradients)."""
        return self.pods * self.gpus_per_pod

    @property
    def all_gpus(self) -> int:
        return self.gpus + sum(r.pods * r.gpus_per_pod for r in self.roles)

    def request(self, role: str = "") -> Request:
        """Per-pod resources of the workers ("") or of a named role."""
        if not role:
            return Request(
                self.gpus_per_pod,
                self.cpu_milli_per_pod,
                self.memory_mib_per_pod,
                self.extended_per_pod,
            )
        r = next(r for r in self.roles if r.name == role)
        return Request(
            r.gpus_per_pod, r.cpu_milli_per_pod, r.memory_mib_per_pod, r.extended_per_pod
        )

    @property
    def tp_pods(self) -> int:
        """Pods in one tensor-parallel group (1 when TP fits inside a pod)."""
        if self.shape is None or self.gpus_per_pod == 0 or self.shape.tp <= self.gpus_per_pod:
            return 1
        return -(-self.shape.tp // self.gpus_per_pod)
