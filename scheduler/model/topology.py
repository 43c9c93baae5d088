"""Topology spec: the fabric's levels and its hosts, as read from files, generators or labels."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from scheduler.model.constraints import Taint

# Fabric levels from the bottom up. "nvlink" and "core" are optional in a spec: a host without an
# NVLink domain is its own, and a fabric without a core level has a single one.
LEVELS: tuple[str, ...] = ("host", "nvlink", "rack", "spine", "core")

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


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LevelSpec(Frozen):
    """Links crossed when traffic leaves a domain of this level."""

    name: str
    bandwidth_gbps: float = Field(gt=0)
    oversubscription: float = Field(default=1.0, ge=1.0)
    # objective weight per GB crossing this level (see DEFAULT_COST_WEIGHT)
    cost_weight: float = Field(default=1.0, ge=0)

    @field_validator("name")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in LEVELS:
            raise ValueError(f"unknown level {value!r}; levels are {', '.join(LEVELS)}")
        return value

    @property
    def effective_gbps(self) -> float:
        return self.bandwidth_gbps / self.oversubscription


class HostSpec(Frozen):
    name: str = Field(min_length=1)
    gpus: int = Field(ge=0)
    cpu_milli: int = Field(default=128_000, ge=0)
    memory_mib: int = Field(default=1_048_576, ge=0)
    pool: str = "training"
    # level name -> domain name at that level; "rack" is required, others optional.
    domains: dict[str, str]
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    # the node's `pods` allocatable: Kubernetes' default kubelet limit unless the node says
    max_pods: int = Field(default=110, ge=0)

    @field_validator("domains")
    @classmethod
    def _levels(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = set(value) - set(LEVELS[1:])
        if unknown:
            raise ValueError(f"unknown levels {sorted(unknown)}; use {', '.join(LEVELS[1:])}")
        if "rack" not in value:
            raise ValueError("every host needs a rack domain")
        return value


class TopologySpec(Frozen):
    levels: tuple[LevelSpec, ...] = Field(
        default_factory=lambda: tuple(
            LevelSpec(
                name=name,
                bandwidth_gbps=DEFAULT_BANDWIDTH_GBPS[name],
                oversubscription=DEFAULT_OVERSUBSCRIPTION[name],
                cost_weight=DEFAULT_COST_WEIGHT[name],
            )
            for name in LEVELS
        )
    )
    hosts: tuple[HostSpec, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> TopologySpec:
        names = [level.name for level in self.levels]
        if sorted(names, key=LEVELS.index) != names or len(set(names)) != len(names):
            raise ValueError(f"levels must be distinct and ordered as {', '.join(LEVELS)}")
        missing = set(LEVELS) - set(names)
        if missing:
            raise ValueError(f"levels missing bandwidth: {sorted(missing, key=LEVELS.index)}")
        seen: set[str] = set()
        for host in self.hosts:
            if host.name in seen:
                raise ValueError(f"duplicate host {host.name!r}")
            seen.add(host.name)
        return self

    def level(self, name: str) -> LevelSpec:
        return next(level for level in self.levels if level.name == name)
