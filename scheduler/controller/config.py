"""Operator configuration (the `rackwise-config` ConfigMap's config.yaml)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from scheduler.model import PlaceConfig
from scheduler.model.gang import Objective
from scheduler.model.policy import LendingMode, SchedulingPolicy
from scheduler.model.topology import complete
from scheduler.pools import DEFAULT_POOLS, PoolPolicy, PoolSpec
from scheduler.queue import QueueConfig
from scheduler.topology import LabelKeys, LevelLabel
from scheduler.topology.sources import HOSTNAME, label_levels


# the Pod Security Standard the pods the operator creates must meet (trainingjob/podpolicy.py)
class SecurityLevel(StrEnum):
    PRIVILEGED = "privileged"
    BASELINE = "baseline"
    RESTRICTED = "restricted"


class PodSecurity(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    level: SecurityLevel = SecurityLevel.BASELINE
    exempt_namespaces: tuple[str, ...] = Field(default=(), alias="exemptNamespaces")


class LeaderElection(BaseModel):
    """A coordination.k8s.io/v1 Lease; the holder is the only replica that writes. A leader
    stops writing once renewDeadline passes without a renewal, before the lease can expire for
    the others (leaseDuration), so two replicas never write at once."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    enabled: bool = True
    namespace: str = "rackwise-system"
    name: str = "rackwise-operator"
    lease_s: float = Field(default=15.0, gt=0, alias="leaseDurationSeconds")
    renew_deadline_s: float = Field(default=10.0, gt=0, alias="renewDeadlineSeconds")
    retry_s: float = Field(default=2.0, gt=0, alias="retryPeriodSeconds")

    @model_validator(mode="after")
    def _ordered(self) -> LeaderElection:
        if not self.retry_s < self.renew_deadline_s < self.lease_s:
            raise ValueError("need retryPeriod < renewDeadline < leaseDuration")
        return self


# top-level keys of earlier versions, now in `scheduling:`
_MOVED = frozenset(
    {
        "solverTimeLimitSeconds",
        "compactWaitSeconds",
        "backfill",
        "preemption",
        "fragmentationShare",
        "jointGangs",
        "defragMovesPerHour",
        "defragMinGain",
    }
)


class OperatorConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    labels: LabelKeys = LabelKeys()
    # the fabric's levels bottom-up, each read from a node label (Kueue-style); when absent, the
    # default profile under `labels` (nvlink, rack, spine, core)
    topology_levels: tuple[LevelLabel, ...] | None = Field(
        default=None, alias="levels", min_length=1, max_length=7
    )
    pool_taint_key: str = Field(default="rackwise.io/pool", alias="poolTaintKey")
    gpu_resource: str = Field(default="nvidia.com/gpu", alias="gpuResource")
    scheduler_name: str = Field(default="rackwise", alias="schedulerName")
    resync_s: float = Field(default=5.0, gt=0, alias="resyncSeconds")
    api_workers: int = Field(default=16, ge=1, alias="apiWorkers")
    # the pools (name, objective): hosts and pods of different pools never mix
    pool_list: tuple[PoolSpec, ...] = Field(default=DEFAULT_POOLS, alias="pools", min_length=1)
    # queue rules, rackwise's mechanisms and solver limits (model/policy.py): the same
    # definition and defaults as a simulation's. EASY backfilling holds a blocked gang's hosts
    # (the operator knows no run times unless a job gives expectedRuntimeSeconds); preemption
    # within a namespace; moves at checkpoints off (a job moves only after it signals a
    # checkpoint with the annotation rackwise.io/checkpointed-at)
    scheduling: SchedulingPolicy = SchedulingPolicy()
    # read nodes, pods, jobs and pod groups from watches (listed once) instead of listing every
    # cycle (runtime/cache.py); false: list every cycle, watches only wake the loop
    informer_cache: bool = Field(default=True, alias="informerCache")
    # a job's priority -> the PriorityClass its pods get (unless the template names one), so
    # the kubelet and other schedulers see the same order rackwise does
    priority_classes: dict[int, str] = Field(default_factory=dict, alias="priorityClasses")
    # a pod group whose PodGroup sets no scheduleTimeoutSeconds is reported incomplete after this
    group_timeout_s: float = Field(default=300.0, gt=0, alias="groupTimeoutSeconds")
    # the largest gang accepted; larger jobs are InvalidSpec
    max_gang_pods: int = Field(default=10_000, ge=1, alias="maxGangPods")
    # TrainingJob pod creations in flight at once, shared by every gang whose pods are made
    launch_budget: int = Field(default=1_000, ge=1, alias="launchPodsPerCycle")
    # a NotReady node keeps its pods this long before their gang is repaired (as the node
    # lifecycle controller's default monitor grace period)
    node_grace_s: float = Field(default=40.0, ge=0, alias="nodeNotReadyGraceSeconds")
    pod_security: PodSecurity = Field(default_factory=PodSecurity, alias="podSecurity")
    leader_election: LeaderElection = Field(default_factory=LeaderElection, alias="leaderElection")
    # never scheduled, even where the operator may write (cluster/access.py)
    protected_namespaces: frozenset[str] = Field(
        default=frozenset({"kube-system", "kube-public", "kube-node-lease"}),
        alias="protectedNamespaces",
    )
    # the namespaces whose TrainingJobs may give their pods a system-* priority class
    system_priority_namespaces: frozenset[str] = Field(
        default=frozenset({"kube-system"}), alias="systemPriorityNamespaces"
    )
    # every API call gives up after this long, so a silent partition cannot hang a cycle
    api_timeout_s: float = Field(default=30.0, gt=0, alias="apiTimeoutSeconds")

    def queue(self) -> QueueConfig:
        return QueueConfig(PlaceConfig(scheduling=self.scheduling), pools=self.pool_list)

    def lenders_to(self, pool: str) -> tuple[str, ...]:
        """The pools whose idle hosts this pool may borrow (none unless it borrows and lending
        is on): its pods may be bound there, so they are made able to run there."""
        borrows = any(p.name == pool and p.borrow for p in self.pool_list)
        if not borrows or self.scheduling.lending is LendingMode.OFF:
            return ()
        return tuple(p.name for p in self.pool_list if p.lend is not None and p.name != pool)

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        """Knobs that were top-level before the policy had one home: a clear error, not
        pydantic's "extra inputs are not permitted"."""
        if isinstance(data, dict):
            moved = sorted(set(data) & _MOVED)
            if moved:
                raise ValueError(f"{', '.join(moved)}: now under `scheduling:` (docs/operator.md)")
        return data

    @property
    def levels(self) -> tuple[LevelLabel, ...]:
        return self.topology_levels or self.labels.levels()

    def objective(self, pool: str) -> Objective:
        """The objective of one of the operator's pools (checked to exist by the caller)."""
        return next(p.objective for p in self.pool_list if p.name == pool)

    @property
    def pool_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.pool_list)

    @model_validator(mode="after")
    def _distinct_pools(self) -> OperatorConfig:
        if len(set(self.pool_names)) != len(self.pool_names):
            raise ValueError(f"pool names must be distinct: {list(self.pool_names)}")
        return self

    @property
    def level_names(self) -> tuple[str, ...]:
        """Every level a job may name, host and any level filled in included, and the name the
        config gives the hostname level (`hostname` in Kueue's examples) beside `host`."""
        own = tuple(level.name for level in complete(label_levels(self.levels)))
        return own + tuple(n for n in self._host_aliases if n not in own)

    @property
    def _host_aliases(self) -> tuple[str, ...]:
        return tuple(lv.name for lv in self.levels if lv.label == HOSTNAME and lv.name != "host")

    def canonical(self, name: str) -> str:
        """The fabric's name of a level a job names: the hostname level is the fabric's first
        level, `host`, whatever the config calls it."""
        return "host" if name in self._host_aliases else name

    def levels_by_label(self) -> dict[str, str]:
        """Node label -> the fabric's level read from it (the hostname: `host`)."""
        by_label = {level.label: self.canonical(level.name) for level in self.levels}
        by_label[HOSTNAME] = "host"  # the fabric's first level, whatever the config calls it
        return by_label

    @property
    def pools(self) -> PoolPolicy:
        """The pool label and taint every rackwise pod and node carries."""
        return PoolPolicy(label_key=self.labels.pool, taint_key=self.pool_taint_key)


def load_config(path: Path | None) -> OperatorConfig:
    if path is None:
        return OperatorConfig()
    return OperatorConfig.model_validate(yaml.safe_load(path.read_text()) or {})
