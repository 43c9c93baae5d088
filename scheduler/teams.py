"""Teams: queues with nominal quotas per pool, grouped under cohorts that lend and borrow.

A queue owns a nominal quota of each pool (GPUs, and CPU and memory where given). Queues that
name the same cohort lend one another what they do not use: up to each lender's
`lendingLimit` (unset: all of its nominal quota), and up to each borrower's `borrowingLimit`
(unset: no limit but the cohort's). The model is Kueue's ClusterQueue and cohort (nominal quota,
borrowing and lending limits), so that numbers written for one mean the same in the other; what
rackwise adds is how borrowed capacity is taken back (queue/teams/queues.py).

Who may use a queue (Kueue's ClusterQueue `namespaceSelector`, by list): a queue admits the
namespaces it lists, and the queue marked `default` also admits every namespace no queue lists.
A gang belongs to the queue its job names when that queue admits its namespace (tenant), else
to the queue that lists its namespace, else to the default queue; a name that refuses its
namespace, or no queue at all, leaves it held with the reason (`unqueued`). No rule reads a
queue from a namespace's name. A queue with `stopPolicy: Hold` (Kueue's) admits nothing new and
keeps what it admitted: the operator holds a Queue that turned invalid or is being deleted with
the spec it last found valid. These are specs only: the accounting is queue/teams/quotas.py."""

from __future__ import annotations

from enum import StrEnum
from functools import cached_property

from pydantic import BaseModel, ConfigDict, Field, model_validator

NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# bounds on every amount: a Queue's numbers are stored as int64 by Kubernetes clients (kubectl
# printed 1e20 GPUs as -9223372036854775808), and no cluster has more than these
MAX_GPUS = 10_000_000
MAX_AMOUNT = 2**63 - 1  # millicores or MiB
MAX_SECONDS = 366 * 86400.0  # reclaimWithinSeconds: a year at most
BOUNDS = {"gpus": MAX_GPUS, "cpu": MAX_AMOUNT, "memory": MAX_AMOUNT}


class Resource(StrEnum):
    GPUS = "gpus"
    CPU = "cpu"  # millicores, as GangRequest counts them
    MEMORY = "memory"  # MiB


class StopPolicy(StrEnum):
    """Kueue's ClusterQueue `stopPolicy`, without its draining form: rackwise never evicts
    for an edit."""

    NONE = "None"
    HOLD = "Hold"  # admits nothing new; what it admitted stays admitted and charged


Amounts = dict[Resource, int]


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class PoolQuota(_Spec):
    """What a queue owns of one pool. A resource absent from `nominal` is not limited for the
    queue (GPUs are always limited: absent, nominal is 0 and the queue only borrows)."""

    pool: str = Field(min_length=1, max_length=63, pattern=NAME)
    nominal: dict[Resource, int] = Field(default_factory=dict)
    borrowing_limit: dict[Resource, int] | None = Field(default=None, alias="borrowingLimit")
    lending_limit: dict[Resource, int] | None = Field(default=None, alias="lendingLimit")

    @model_validator(mode="after")
    def _check(self) -> PoolQuota:
        for name, amounts in self._all().items():
            if any(v < 0 for v in amounts.values()):
                raise ValueError(f"pool {self.pool}: {name} must not be negative")
            for r, v in amounts.items():
                if v > BOUNDS[r]:
                    raise ValueError(f"pool {self.pool}: {name} {r} exceeds {BOUNDS[r]}")
        for r, v in (self.lending_limit or {}).items():
            if v > self.nominal.get(r, 0):
                raise ValueError(f"pool {self.pool}: lendingLimit {r} exceeds its nominal quota")
        return self

    def _all(self) -> dict[str, dict[Resource, int]]:
        return {
            "nominal": self.nominal,
            "borrowingLimit": self.borrowing_limit or {},
            "lendingLimit": self.lending_limit or {},
        }

    def limits(self, r: Resource) -> bool:
        return r is Resource.GPUS or r in self.nominal

    def owned(self, r: Resource) -> int:
        return self.nominal.get(r, 0)

    def lendable(self, r: Resource) -> int:
        """What the cohort may use of this queue's nominal quota."""
        if self.lending_limit is None or r not in self.lending_limit:
            return self.owned(r)
        return self.lending_limit[r]

    def guaranteed(self, r: Resource) -> int:
        """What only this queue may use (nominal less what it lends)."""
        return self.owned(r) - self.lendable(r)

    def may_borrow(self, r: Resource) -> int | None:
        """At most this much beyond nominal (None: no limit of its own)."""
        if self.borrowing_limit is None or r not in self.borrowing_limit:
            return None
        return self.borrowing_limit[r]


class QueueSpec(_Spec):
    name: str = Field(min_length=1, max_length=63, pattern=NAME)
    cohort: str | None = Field(default=None, max_length=63, pattern=NAME)
    # fair sharing: what a queue borrows, divided by its weight, is what is compared
    weight: float = Field(default=1.0, gt=0, le=1000)
    # taking back what others borrow from it: at their checkpoints within this, else at it
    reclaim_within_s: float = Field(
        default=300.0, ge=0, le=MAX_SECONDS, alias="reclaimWithinSeconds"
    )
    # the namespaces whose gangs it admits (and whose gangs name no queue belong to it)
    namespaces: tuple[str, ...] = ()
    # the queue of the namespaces no queue lists (one at most)
    default: bool = False
    stop_policy: StopPolicy = Field(default=StopPolicy.NONE, alias="stopPolicy")
    quotas: tuple[PoolQuota, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> QueueSpec:
        pools = [q.pool for q in self.quotas]
        if len(set(pools)) != len(pools):
            raise ValueError(f"queue {self.name}: a pool is given twice")
        return self

    @property
    def holds(self) -> bool:
        return self.stop_policy is StopPolicy.HOLD

    def quota(self, pool: str) -> PoolQuota:
        for q in self.quotas:
            if q.pool == pool:
                return q
        return PoolQuota(pool=pool)


class Teams(_Spec):
    """Every queue; gangs of none go to the one marked `default` (none: they are held)."""

    queues: tuple[QueueSpec, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> Teams:
        names = [q.name for q in self.queues]
        if len(set(names)) != len(names):
            raise ValueError("two queues have the same name")
        defaults = [q.name for q in self.queues if q.default]
        if len(defaults) > 1:
            raise ValueError(f"more than one default queue: {', '.join(defaults)}")
        seen: dict[str, str] = {}
        for q in self.queues:
            for ns in q.namespaces:
                if ns in seen:
                    raise ValueError(f"namespace {ns!r} is in queues {seen[ns]} and {q.name}")
                seen[ns] = q.name
        return self

    @cached_property
    def default_queue(self) -> str | None:
        return next((q.name for q in self.queues if q.default), None)

    @property
    def on(self) -> bool:
        return bool(self.queues)

    @cached_property
    def by_name(self) -> dict[str, QueueSpec]:
        return {q.name: q for q in self.queues}

    @cached_property
    def _of_namespace(self) -> dict[str, str]:
        return {ns: q.name for q in self.queues for ns in q.namespaces}

    def members(self, cohort: str | None) -> tuple[QueueSpec, ...]:
        return tuple(q for q in self.queues if cohort is not None and q.cohort == cohort)

    def admits(self, queue: str, tenant: str) -> bool:
        """Whether the queue admits gangs of this namespace: it lists it, or it is the default
        and no queue lists it."""
        spec = self.by_name.get(queue)
        if spec is None:
            return False
        return tenant in spec.namespaces or (spec.default and tenant not in self._of_namespace)

    def queue_of(self, queue: str, tenant: str) -> str | None:
        """The queue a gang belongs to: the one it names if that admits its namespace, else
        its namespace's, else the default; None when none of them takes it (`unqueued`)."""
        if queue:
            return queue if self.admits(queue, tenant) else None
        return self._of_namespace.get(tenant, self.default_queue)

    def unqueued(self, queue: str, tenant: str) -> str:
        """Why a gang belongs to no queue (queue_of gave None)."""
        spec = self.by_name.get(queue) if queue else None
        if queue and spec is None:
            return f"it names queue {queue!r}, and no valid Queue has that name"
        if spec is not None:
            listed = ", ".join(spec.namespaces) or "none"
            return f"queue {queue} does not admit namespace {tenant!r} (it admits {listed}" + (
                ", and namespaces no queue lists)" if spec.default else ")"
            )
        return f"no queue lists namespace {tenant!r}, and none is default"
