"""The world the simulator assumes: how the fabric's links are provisioned, how much of a job's
step is communication, and what a restart costs. Each is a stated model with its source
(docs/design.md, "The fabric model"); none is tuned to any policy's result.

Fabric profiles name what they model:
- `non-blocking`: every switch level 1:1, as inside Meta's RoCE "AI Zone" (Gangidi et al.,
  SIGCOMM'24) and the rail-optimised fabrics MegaScale (Jiang et al., NSDI'24) runs on;
- `oversubscribed`: 1:1 out of a rack, 3:1 at every level above it, as fabrics whose upper tier
  is deliberately oversubscribed (Meta's links between AI Zones; the Lingjun Clos);
- `topology`: the oversubscription each level of the topology file states;
- `oracle`: no link is ever shared and every placement runs at its compact rate: the most any
  placement could win (never a policy, a row beside them).
ECMP (`ecmp: [levels]`, off by default): at those levels each ring is one flow hashed onto one
of the link's paths (capacity / NIC rate of them), so two rings can meet on one path while
others stay idle (Meta SIGCOMM'24 on low-entropy ECMP; Alibaba HPN, SIGCOMM'24). The expected
number of paths n flows occupy, P(1 - (1 - 1/P)^n), times the NIC rate is the link's usable
capacity: a lone flow always gets its full rate. Under the demand model (`sharing: demand`,
topology/sharing.py) ECMP is hashing itself: each connection crossing such a link is `flows`
flows, each on its own hashed path, and a job goes as fast as its most loaded path allows.
`rails: true` makes each rack a rail-optimised scalable unit (NVIDIA DGX SuperPOD's reference
design: a rail switch per GPU lane, rails meeting at the spine; topology/links.py).
"""

from __future__ import annotations

import math
import random
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from scheduler.model.topology import Tier, TopologySpec


class ProfileName(StrEnum):
    NON_BLOCKING = "non-blocking"
    OVERSUBSCRIBED = "oversubscribed"
    TOPOLOGY = "topology"
    ORACLE = "oracle"


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SharingModel(StrEnum):
    """How running jobs slow each other (docs/design.md, "The fabric model")."""

    RINGS = "rings"  # one ring per job at its NIC rate, shared max-min (simulation/network.py)
    DEMAND = "demand"  # each job's traffic by class on every link it crosses (topology/sharing.py)


class FabricProfile(Frozen):
    name: ProfileName = ProfileName.OVERSUBSCRIBED
    # levels (by name) whose rings hash onto paths: see the module's note on ECMP
    ecmp: tuple[str, ...] = ()
    sharing: SharingModel = SharingModel.RINGS
    # the demand model's links (topology/links.py): a NIC per GPU (HGX, NVL72 trays) or one per
    # host; F flows per job per link at an ECMP level (1: plain ECMP; 16: Llama 3's queue pairs)
    per_gpu_nic: bool = True
    flows: int = Field(default=1, ge=1)
    # level name -> oversubscription of the links that leave its domains, over the profile's
    # rule (never for the oracle): e.g. a fabric non-blocking inside its pods (spines) and 1:7
    # between them, as Llama 3's, `{spine: 7}`
    ratios: dict[str, float] = Field(default_factory=dict)
    # rail-optimised racks (topology/links.py): a rack is a scalable unit whose lane i of every
    # host is cabled to rail switch i; needs the demand model and a NIC per GPU
    rails: bool = False
    # every job with the fabric to itself: slowed by its own placement (crossings, NVLink
    # spills, its flows hashed onto few paths) as it would be alone, never by another job; the
    # ceiling of what placing away from other jobs could gain (not the oracle, which is compact)
    alone: bool = False

    @model_validator(mode="after")
    def _rails_need_demand(self) -> FabricProfile:
        if self.rails and (self.sharing is not SharingModel.DEMAND or not self.per_gpu_nic):
            raise ValueError("rails need `sharing: demand` and `per_gpu_nic: true`")
        return self

    @property
    def shared(self) -> bool:
        """False for the oracle: no ring ever meets another and every run is compact."""
        return self.name != ProfileName.ORACLE

    def oversubscription(self, level: int, topology: float, name: str = "") -> float:
        """The oversubscription of the links that leave a domain of this level (position in
        the tree: the NIC level is never oversubscribed)."""
        if level <= Tier.NVLINK or self.name is ProfileName.ORACLE:
            return 1.0
        if name in self.ratios:
            return self.ratios[name]
        if self.name is ProfileName.NON_BLOCKING:
            return 1.0
        if self.name == ProfileName.OVERSUBSCRIBED:
            return 1.0 if level == Tier.RACK else 3.0
        return topology

    def provisioned(self, spec: TopologySpec) -> TopologySpec:
        """The topology with each level's oversubscription as this profile provisions it: what
        an operator configured for this fabric would tell rackwise (its J prices the load only
        on oversubscribed uplinks, placement/scoring.py)."""
        levels = tuple(
            level.model_copy(
                update={
                    "oversubscription": self.oversubscription(i, level.oversubscription, level.name)
                }
            )
            for i, level in enumerate(spec.levels)
        )
        return spec if levels == spec.levels else spec.model_copy(update={"levels": levels})


def ecmp_capacity(capacity: float, nic_gbps: float, flows: int) -> float:
    """Usable capacity of a link whose `flows` are hashed onto capacity / NIC-rate paths."""
    paths = max(1, round(capacity / nic_gbps))
    if flows <= 1 or paths == 1:
        return capacity
    return min(capacity, nic_gbps * paths * (1.0 - (1.0 - 1.0 / paths) ** flows))


class CommShare(Frozen):
    """A job's communication share of a compact step, drawn per job: uniform on [low, high]
    for jobs of more than one GPU, 0 for one GPU. Communication is a large and strongly
    model-dependent share of step time (Wang et al., Alibaba PAI, IISWC'19: from a few percent
    for compute-bound CNNs to over half for large-embedding and language models); neither
    bundled trace names its models, so every job draws from the same range."""

    low: float = Field(default=0.1, ge=0, le=1)
    high: float = Field(default=0.6, ge=0, le=1)

    def draw(self, job_id: str, gpus: int, seed: int) -> float:
        """The same share for a job under every policy of one seed."""
        if gpus <= 1:
            return 0.0
        return random.Random(f"share/{seed}/{job_id}").uniform(self.low, self.high)


class RestartCost(Frozen):
    """Seconds a gang loses each time it starts again (after a failure, a preemption or a
    move): rescheduling, communicator set-up and checkpoint reload, which grow with the
    gang (Huawei MindCluster's recovery breakdown; Hu et al., NSDI'24, on restarts of LLM
    pre-training in Acme). Modelled as `base_s + per_doubling_s x log2(hosts)`."""

    base_s: float = Field(default=300.0, ge=0)
    per_doubling_s: float = Field(default=60.0, ge=0)

    def seconds(self, hosts: int) -> float:
        return self.base_s + self.per_doubling_s * math.log2(max(hosts, 1))
