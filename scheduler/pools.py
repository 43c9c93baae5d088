"""Pool isolation: training, batch-inference and online-inference hosts never mix.

A host belongs to exactly one pool (a node label); placement only ever offers a gang the hosts
of its own pool (`Capacity.of`), and the operator adds the pool's node selector and toleration
to every pod so the kubelet side agrees. Pools are tainted NoSchedule so that pods of other
schedulers do not drift onto them either."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from scheduler.model.gang import Objective, Pool, pool_objective

POOLS: tuple[str, ...] = tuple(p.value for p in Pool)


class PoolSpec(BaseModel):
    """One pool of the operator's set: hosts labelled and tainted `<key>=<name>`, and what
    placement optimises there."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    objective: Objective


DEFAULT_POOLS: tuple[PoolSpec, ...] = tuple(
    PoolSpec(name=p, objective=pool_objective(p)) for p in POOLS
)


class PoolPolicy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    label_key: str = "rackwise.io/pool"
    taint_key: str = "rackwise.io/pool"

    def node_selector(self, pool: str) -> dict[str, str]:
        return {self.label_key: pool}

    def toleration(self, pool: str) -> dict[str, str]:
        return {"key": self.taint_key, "operator": "Equal", "value": pool, "effect": "NoSchedule"}

    def taint(self, pool: str) -> dict[str, str]:
        return {"key": self.taint_key, "value": pool, "effect": "NoSchedule"}


def check_pool(pool: str) -> str:
    if pool not in POOLS:
        raise ValueError(f"unknown pool {pool!r}; pools are {', '.join(POOLS)}")
    return pool
