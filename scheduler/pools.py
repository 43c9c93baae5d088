"""Pool isolation: training, batch-inference and online-inference hosts never mix.

A host belongs to exactly one pool (a node label); placement only ever offers a gang the hosts
of its own pool (`Capacity.of`), and the operator adds the pool's node selector and toleration
to every pod so the kubelet side agrees. Pools are tainted NoSchedule so that pods of other
schedulers do not drift onto them either."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from scheduler.model.gang import Objective, Pool, pool_objective

POOLS: tuple[str, ...] = tuple(p.value for p in Pool)


class LendUnit(StrEnum):
    # whole racks only, none of the lender's own gangs on them when lent: a borrowed gang
    # starts in racks (switches, uplinks) the lender had left
    RACK = "rack"
    # whole racks first, then other hosts idle as long (mostly in racks the lender still uses)
    HOST = "host"


class Lending(BaseModel):
    """What a pool lends of its idle hosts to pools that borrow (queue/lending.py): whole
    racks idle for `idle_after_s` (and, with `unit: host`, then its other hosts idle as
    long), keeping `reserve_hosts` of its idle hosts unlent; taken back within
    `reclaim_within_s` of its own gang asking (at the borrowers' checkpoints when those come
    first)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    unit: LendUnit = LendUnit.RACK
    idle_after_s: float = Field(default=600.0, ge=0, alias="idleAfterSeconds")
    reserve_hosts: int = Field(default=0, ge=0, alias="reserveHosts")
    reclaim_within_s: float = Field(default=300.0, ge=0, alias="reclaimWithinSeconds")


class PoolSpec(BaseModel):
    """One pool: hosts labelled and tainted `<key>=<name>`, what placement optimises there,
    and what it lends to other pools or borrows from them (neither by default: isolated)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    objective: Objective
    lend: Lending | None = None
    borrow: bool = False


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
