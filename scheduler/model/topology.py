"""Topology spec: the fabric's levels and its hosts, as read from files, generators or labels."""

from __future__ import annotations

from enum import IntEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from scheduler.model.constraints import Taint

# The default profile: fabric levels from the bottom up, as rackwise's own labels, Lingjun and
# the generator name them. A topology may name its own (1-8 levels above nothing but "host").
LEVELS: tuple[str, ...] = ("host", "nvlink", "rack", "spine", "core")
HOST = "host"
MAX_LEVELS = 8

# Default per-host bandwidth (GB/s) of the links a byte uses when it crosses each level.
# host: NVLink inside a domain; nvlink: the NIC; rack/spine/core: ToR, spine and core uplinks.
DEFAULT_BANDWIDTH_GBPS: dict[str, float] = {
    "host": 900.0,
    "nvlink": 50.0,
    "rack": 50.0,
    "spine": 50.0,
    "core": 50.0,
}
# Cost of one GB crossing each level, relative to leaving a host through its NIC. Upper tiers are
# shared by many more hosts (and oversubscribed), so each tier weighs 16x the one below: one more
# spine spanned outweighs many more hosts. NVLink inside a domain is nearly free.
DEFAULT_COST_WEIGHT: dict[str, float] = {
    "host": 0.05,
    "nvlink": 1.0,
    "rack": 16.0,
    "spine": 256.0,
    "core": 4096.0,
}
DEFAULT_OVERSUBSCRIPTION: dict[str, float] = {
    "host": 1.0,
    "nvlink": 1.0,
    "rack": 1.0,
    "spine": 2.0,
    "core": 4.0,
}


class Tier(IntEnum):
    """The positions the algorithms rely on, whatever the levels are called. A topology without
    an accelerator (NVLink) level gets one where each host is alone; one with no switch level
    above it gets a single `cluster` domain (TopologySpec fills both in)."""

    HOST = 0
    NVLINK = 1  # accelerator interconnect: tensor-parallel groups may span its hosts
    RACK = 2  # the lowest switch level: fragmentation, failure-domain spread
    BLOCK = 3  # the level above it, when there is one: patience waits for one of these


def default_weight(position: int) -> float:
    """Cost weight by position when a level does not say: the default profile's rule."""
    return 0.05 if position == 0 else 16.0 ** (position - 1)


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LevelSpec(Frozen):
    """A level and the links crossed when traffic leaves one of its domains."""

    name: str = Field(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    bandwidth_gbps: float = Field(default=50.0, gt=0)
    oversubscription: float = Field(default=1.0, ge=1.0)
    # objective weight per GB crossing this level; None: by position (default_weight)
    cost_weight: float | None = Field(default=None, ge=0)
    # the accelerator interconnect level (just above host); a host without one is alone
    nvlink: bool = False
    # a host without a domain at this level shares one domain with the others that lack it;
    # a required level's domain must be given for every host
    optional: bool = False
    # hosts of each multi-host domain kept out of service as spares, NVLink level only (GB200
    # NVL72: CoreWeave schedules 16 of a rack's 18 trays, two standing by for a failed one);
    # a down host counts as one of them (placement/spares.py)
    spares: int = Field(default=0, ge=0)

    @property
    def effective_gbps(self) -> float:
        return self.bandwidth_gbps / self.oversubscription


def default_levels() -> tuple[LevelSpec, ...]:
    return tuple(
        LevelSpec(
            name=name,
            bandwidth_gbps=DEFAULT_BANDWIDTH_GBPS[name],
            oversubscription=DEFAULT_OVERSUBSCRIPTION[name],
            cost_weight=DEFAULT_COST_WEIGHT[name],
            nvlink=name == "nvlink",
            optional=name in ("nvlink", "spine", "core"),
        )
        for name in LEVELS
    )


def complete(levels: tuple[LevelSpec, ...]) -> tuple[LevelSpec, ...]:
    """Host first; an NVLink level at Tier.NVLINK (each host alone if none was given); at least
    one switch level above it (one shared `cluster` domain if none); every weight set."""
    if not levels or levels[0].name != HOST:
        raise ValueError(f"the first level must be {HOST!r} (levels go from the bottom up)")
    rest = list(levels[1:])
    if not rest or not rest[0].nvlink:
        rest.insert(0, LevelSpec(name="nvlink", bandwidth_gbps=50.0, nvlink=True, optional=True))
    if len(rest) == 1:
        rest.append(LevelSpec(name="cluster", optional=True))
    out = [levels[0], *rest]
    if any(level.nvlink for level in out[2:]):
        raise ValueError("only the level just above host can be the NVLink level")
    kept = [level.name for level in out if level.spares and not level.nvlink]
    if kept:
        raise ValueError(f"level {kept[0]}: only the NVLink level keeps spare hosts")
    return tuple(
        level
        if level.cost_weight is not None
        else level.model_copy(update={"cost_weight": default_weight(i)})
        for i, level in enumerate(out)
    )


class HostSpec(Frozen):
    name: str = Field(min_length=1)
    gpus: int = Field(ge=0)
    cpu_milli: int = Field(default=128_000, ge=0)
    memory_mib: int = Field(default=1_048_576, ge=0)
    pool: str = "training"
    # level name -> domain name at that level (every required level; TopologySpec checks)
    domains: dict[str, str]
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    # the node's `pods` allocatable: Kubernetes' default kubelet limit unless the node says
    max_pods: int = Field(default=110, ge=0)
    # every other countable resource the node offers (extended resources: RDMA devices, MIG
    # slices, a second accelerator kind...), in whole units
    extended: dict[str, int] = Field(default_factory=dict)


class TopologySpec(Frozen):
    levels: tuple[LevelSpec, ...] = Field(default_factory=default_levels)
    hosts: tuple[HostSpec, ...] = Field(min_length=1)

    @field_validator("levels")
    @classmethod
    def _levels(cls, value: tuple[LevelSpec, ...]) -> tuple[LevelSpec, ...]:
        names = [level.name for level in value]
        if len(set(names)) != len(names):
            raise ValueError(f"level names must be distinct: {names}")
        if len(value) > MAX_LEVELS:
            raise ValueError(f"at most {MAX_LEVELS} levels, host included; got {len(value)}")
        return complete(value)

    @model_validator(mode="after")
    def _consistent(self) -> TopologySpec:
        names = [level.name for level in self.levels[1:]]
        required = [level.name for level in self.levels[1:] if not level.optional]
        seen: set[str] = set()
        for host in self.hosts:
            if host.name in seen:
                raise ValueError(f"duplicate host {host.name!r}")
            seen.add(host.name)
            unknown = set(host.domains) - set(names)
            if unknown:
                raise ValueError(
                    f"host {host.name}: unknown levels {sorted(unknown)}; levels are "
                    f"{', '.join(names)}"
                )
            missing = [n for n in required if n not in host.domains]
            if missing:
                raise ValueError(f"host {host.name} has no domain at level {missing[0]!r}")
        return self

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(level.name for level in self.levels)

    def level(self, name: str) -> LevelSpec:
        return next(level for level in self.levels if level.name == name)
