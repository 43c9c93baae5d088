"""What a training job's users can state about the network it trains: its size and a step's
tokens. The bytes each parallel class sends per step and the compute of a step follow from it
(topology/traffic.py); rackwise prices a placement that splits a gang's expert-parallel block
from it (placement/stretch.py)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Model(BaseModel):
    """What sets a step's bytes and compute: a transformer's size and a step's tokens (bf16
    throughout). MoE layers are `moe_share` of the layers; each token goes to `topk` experts;
    `active_params_b` are the parameters a token uses (all of them for a dense model); `overlap`
    of the communication is hidden behind compute at the compact rate."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    params_b: float = Field(gt=0)  # parameters each data-parallel replica holds, billions
    active_params_b: float | None = Field(default=None, gt=0)
    hidden: int = Field(gt=0)
    layers: int = Field(gt=0)
    seq: int = Field(gt=0)
    micro_batch: int = Field(default=1, gt=0)
    micro_batches: int = Field(default=1, gt=0)  # per step per data-parallel rank
    moe_share: float = Field(default=0.0, ge=0, le=1)
    topk: int = Field(default=0, ge=0)
    # the share of a step's communication, at its compact time, hidden behind compute (0: none,
    # the harshest reading): Megatron-LM overlaps data parallelism's gradient reduce-scatter
    # with the backward pass (--overlap-grad-reduce), DeepSeek-V3's DualPipe nearly all of its
    # all-to-all. Slower communication overflows the window it hid in (sharing.stretch).
    overlap: float = Field(default=0.0, ge=0, lt=1)
    # node-limited routing (`Dispatch`): a token's experts on at most this many NVLink domains,
    # sent once to each (DeepSeek-V3: 4); None: every copy to its expert's GPU directly
    node_limit: int | None = Field(default=None, ge=1)

    @property
    def active(self) -> float:
        return self.active_params_b or self.params_b
