"""What a gang's users tell each scheduler about its shape, and how each scheduler reads it.

Contract. Takes a fabric, a gang and a placement policy. Decides the segment the gang's
parallel shape implies, as its users write it for their scheduler: each expert-parallel block
(tp x ep consecutive GPUs, the ranks that exchange tokens all-to-all) inside one NVLink domain,
where the gang's pool has a multi-host NVLink domain that holds a block (GB200 NVL72); and how
the policy reads it (`READING`): Kueue TAS as a required slice
(`podset-slice-required-topology` + `podset-slice-size`; soft slices are a non-goal of
KEP-2724), KAI as a preferred segment (`segment-topology-preferred-placement`), Slurm's
topology/block as a required `--segment`; kube-scheduler's and Slurm topology/tree's users have
no way to state it. rackwise reads it as priced: preferred, and waited for when the wait costs
less than the split (its queue prices both). Promises: a gang that states its own slices
or preferred slices keeps them as stated (the implied segment is added only where it states
none at the NVLink level); a required segment never makes a request impossible (it is added
only where some domain of the pool can hold a block and it nests with the gang's slices); a
preferred segment is tried first and dropped when no placement keeps it (`place_one`).
"""

from __future__ import annotations

from enum import StrEnum

from scheduler.model.gang import GangRequest, Slice
from scheduler.model.topology import Tier
from scheduler.placement import slices
from scheduler.topology.fabric import Fabric, nvlink_gpus


class Reading(StrEnum):
    REQUIRED = "required"  # the gang waits until a placement keeps every segment
    PREFERRED = "preferred"  # kept where a placement does, dropped where none does
    UNSTATED = "unstated"  # the scheduler has no field for it: its users cannot say it
    # preferred, and where no placement keeps it now, the queue waits for one when the wait
    # costs less than the split (queue/split.py); preferred where it cannot price them
    PRICED = "priced"


RACKWISE = "rackwise"
READING: dict[str, Reading] = {
    RACKWISE: Reading.PRICED,
    "kueue-best-fit": Reading.REQUIRED,
    "kueue-least-free": Reading.REQUIRED,
    "kai-bin-pack": Reading.PREFERRED,
    "slurm-block": Reading.REQUIRED,
}


# who each row is and what its users tell it (`rackwise compare` prints it above its table)
PEERS: dict[str, str] = {
    RACKWISE: "rackwise: J by CP-SAT and tree search; the EP block as a segment it waits for "
    "when the wait costs less than the split",
    "kueue-best-fit": "Kueue TAS, BestFit; the EP block as a required slice "
    "(podset-slice-required-topology + podset-slice-size)",
    "kueue-least-free": "Kueue TAS, LeastFreeCapacity; the EP block as a required slice",
    "kai-bin-pack": "KAI scheduler, bin-packing; the EP block as a preferred segment "
    "(segment-topology-preferred-placement + segment-size)",
    "slurm-block": "Slurm topology/block, a block per NVLink domain; the EP block as a "
    "required --segment",
    "slurm-tree": "Slurm topology/tree; its users have no field for the EP block",
    "first-fit": "hosts in order; no field for the EP block",
    "random-fit": "hosts at random; no field for the EP block",
    "least-allocated": "kube-scheduler's default scoring (LeastAllocated); no field for the "
    "EP block",
}


def described(row: str) -> str:
    """What a row of a comparison is: a peer as its users configure it, or not told."""
    if row.endswith(" untold"):
        return PEERS.get(row.removesuffix(" untold"), row).split(";")[0] + "; not told"
    return PEERS.get(row, row)


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
    gpus = nvlink_gpus(fabric, pool)
    real = list(fabric.real_nvlink)
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
    if how in (Reading.PREFERRED, Reading.PRICED):
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
