"""What a gang's users tell each scheduler about its shape, and how each scheduler reads it.

Contract. Takes a fabric, a gang and a placement policy. Decides the segment the gang's
parallel shape implies, as its users write it for their scheduler: each expert-parallel block
(tp x ep consecutive GPUs, the ranks that exchange tokens all-to-all) inside one NVLink domain,
where the gang's pool has a multi-host NVLink domain that holds a block (GB200 NVL72); and how
the policy reads it (`READING`): Kueue TAS as a required slice
(`podset-slice-required-topology` + `podset-slice-size`; soft slices are a non-goal of
KEP-2724), KAI as a preferred segment (`segment-topology-preferred-placement`), Slurm's
topology/block as a required `--segment`; kube-scheduler's and Slurm topology/tree's users have
no way to state it. rackwise reads it as preferred. Promises: a gang that states its own slices
or preferred slices keeps them as stated (the implied segment is added only where it states
none at the NVLink level); a required segment never makes a request impossible (it is added
only where some domain of the pool can hold a block and it nests with the gang's slices); a
preferred segment is tried first and dropped when no placement keeps it (`place_one`).
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np

from scheduler.model.gang import GangRequest, Slice
from scheduler.model.topology import Tier
from scheduler.placement import slices
from scheduler.topology.fabric import Fabric


class Reading(StrEnum):
    REQUIRED = "required"  # the gang waits until a placement keeps every segment
    PREFERRED = "preferred"  # kept where a placement does, dropped where none does
    UNSTATED = "unstated"  # the scheduler has no field for it: its users cannot say it


RACKWISE = "rackwise"
READING: dict[str, Reading] = {
    RACKWISE: Reading.PREFERRED,
    "kueue-best-fit": Reading.REQUIRED,
    "kueue-least-free": Reading.REQUIRED,
    "kai-bin-pack": Reading.PREFERRED,
    "slurm-block": Reading.REQUIRED,
}


def reading(policy: str) -> Reading:
    return READING.get(policy, Reading.UNSTATED)


def expert_block(fabric: Fabric, gang: GangRequest) -> Slice | None:
    """The NVLink-level segment of one expert-parallel block, in pods; None where it does not
    apply (no EP, a block within one pod, no NVLink domain of the pool that holds a block)."""
    shape = gang.shape
    if shape is None or shape.ep == 1 or gang.gpus_per_pod == 0:
        return None
    block = shape.tp * shape.ep
    pods = block // gang.gpus_per_pod
    if block % gang.gpus_per_pod or pods <= 1 or gang.pods % pods:
        return None
    pool = fabric.pool_mask.get(gang.pool)
    if pool is None or not fabric.real_nvlink:
        return None
    gpus = np.bincount(fabric.columns[Tier.NVLINK][pool], weights=fabric.gpus[pool])
    real = [d for d in fabric.real_nvlink if d < len(gpus)]
    if not (gpus[real] >= block).any():
        return None
    return Slice(level=fabric.levels[Tier.NVLINK], size=pods)


def told(fabric: Fabric, gang: GangRequest, policy: str) -> GangRequest:
    """The gang with the segment its users state for `policy`, read as the policy reads it."""
    how = reading(policy)
    if how is Reading.UNSTATED:
        return gang
    level = fabric.levels[Tier.NVLINK]
    stated = [s for s in (*gang.slices, *gang.preferred_slices) if s.level == level]
    segment = None if stated else expert_block(fabric, gang)
    if segment is None:
        return gang
    if how is Reading.PREFERRED:
        return gang.model_copy(update={"preferred_slices": (*gang.preferred_slices, segment)})
    wider = gang.model_copy(update={"slices": (*gang.slices, segment)})
    return wider if slices.problem(fabric, wider) is None else gang


def kept(gang: GangRequest) -> GangRequest:
    """The gang with its preferred slices required: the placement tried first."""
    return gang.model_copy(
        update={"slices": (*gang.slices, *gang.preferred_slices), "preferred_slices": ()}
    )


def dropped(gang: GangRequest) -> GangRequest:
    """The gang without its preferred slices: the placement where none keeps them."""
    return gang.model_copy(update={"preferred_slices": ()})
