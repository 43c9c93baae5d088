"""What a placed training job sends, and between which GPUs, in one step, by traffic class.

Contract. Takes a gang's parallel shape (tp, ep, pp, dp), the bytes each GPU moves per step in
each class (`StepBytes`) and the GPU that holds each rank, ranks ordered [TP, EP, PP, DP]: TP
varies fastest, then the expert-parallel part of data parallelism, then pipeline stages, then
the rest of data parallelism (the order of Megatron-LM and Llama 3, so TP groups are
consecutive GPUs of a host or NVLink domain). Decides the step's flows:
- tensor parallel: a ring over each TP group (reduce-scatter + all-gather: each member sends
  2 (k - 1) / k of its message to its successor);
- data parallel: a ring over each data-parallel group (the ranks of one TP position and one
  stage), the same ring sums; where each host holds several members, hierarchically as NCCL
  does (a ring inside the host, then a ring per GPU position across hosts: `ring_edges`);
- pipeline: each stage's ranks send activations to the next stage's and receive gradients back
  (one flow each way per data-parallel rank and TP position, each carrying 1/tp of the
  activation: Megatron-LM's scatter/gather);
- expert parallel: all-to-all inside each EP group, each member sending 1/k of its tokens to
  each member (itself included: that share stays on the GPU); with node-limited routing
  (`Dispatch`, DeepSeek-V3's), each member's tokens go over NVLink to its own domain's members
  as before, and once per other NVLink domain they reach, to the member at its own index in
  its domain there (which forwards them over NVLink: not charged, NVLink being 9-18x a NIC).
Promises: the flows of a class carry what the class's collective sends (a flat ring 2 (k - 1)
/ k of the message from each member; an all-to-all (k - 1) / k); nothing else.
Where a flow goes on the fabric, and how fast, is sharing.py's.

Bytes per step come from the model (`step_bytes`, after Narayanan et al., "Efficient
Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", SC'21, and the
DeepSeek-V3 technical report for the all-to-all), or are given per class.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum

from scheduler.model.gang import ParallelShape
from scheduler.model.training import Model


class Traffic(StrEnum):
    TENSOR = "tp"
    EXPERT = "ep"
    PIPELINE = "pp"
    DATA = "dp"


@dataclass(frozen=True)
class Dispatch:
    """Node-limited expert routing (DeepSeek-V3 technical report, sections 2.1.2 and 3.2.2;
    its DeepEP kernels): each token's top-k experts lie on at most `node_limit` (M) NVLink
    domains of its EP group, and a token crosses the fabric once per such domain, whatever the
    number of its experts there (DeepSeek-V3: top-8 of 256, M = 4, 8-GPU nodes).

    Where a token goes (`reach`): experts spread evenly over the members, affinities uniform,
    many experts per GPU (top-k as k draws with replacement): the M domains are chosen first,
    each with probability M / N of the N the group spans, then the top-k among their about
    M k / N members. Without a limit (M >= N) a domain of n of k members is reached with
    probability 1 - (1 - n / k)^topk."""

    topk: int
    node_limit: int

    def reach(self, n: int, k: int, domains: int) -> float:
        """The share of a member's tokens that reach one domain holding n of the k members,
        when the group spans `domains` NVLink domains."""
        if domains <= self.node_limit:
            return 1.0 - (1.0 - n / k) ** self.topk
        among = self.node_limit * k / domains
        return self.node_limit / domains * (1.0 - (1.0 - min(1.0, n / among)) ** self.topk)


@dataclass(frozen=True)
class StepBytes:
    """GB each GPU moves per step in each class: the message of its ring (TP, DP), of each
    stage boundary (PP), the tokens it dispatches and combines (EP: all top-k copies), and how
    the EP tokens are routed (`dispatch`; None: to each expert's GPU directly)."""

    tensor: float = 0.0
    expert: float = 0.0
    pipeline: float = 0.0
    data: float = 0.0
    dispatch: Dispatch | None = None

    def of(self, traffic: Traffic) -> float:
        return {
            Traffic.TENSOR: self.tensor,
            Traffic.EXPERT: self.expert,
            Traffic.PIPELINE: self.pipeline,
            Traffic.DATA: self.data,
        }[traffic]


@dataclass(frozen=True, order=True)
class Gpu:
    """One GPU: its host and its position on the host (the lane of its NIC, rails)."""

    host: int
    lane: int


@dataclass(frozen=True)
class Flow:
    traffic: Traffic
    src: Gpu
    dst: Gpu
    gb: float  # per step


def rank(shape: ParallelShape, t: int, e: int, p: int, d: int) -> int:
    """The rank of TP position t, expert position e, stage p, outer data-parallel position d."""
    return t + shape.tp * (e + shape.ep * (p + shape.pp * d))


def groups(shape: ParallelShape, traffic: Traffic) -> list[list[int]]:
    """The ranks that take part in each collective of a class (for PP, each chain of stages)."""
    outer = range(shape.dp // shape.ep)
    tp, ep, pp = range(shape.tp), range(shape.ep), range(shape.pp)
    r = rank
    if traffic is Traffic.TENSOR:
        return [[r(shape, t, e, p, d) for t in tp] for d in outer for p in pp for e in ep]
    if traffic is Traffic.EXPERT:
        return [[r(shape, t, e, p, d) for e in ep] for d in outer for p in pp for t in tp]
    if traffic is Traffic.PIPELINE:
        return [[r(shape, t, e, p, d) for p in pp] for d in outer for e in ep for t in tp]
    return [[r(shape, t, e, p, d) for d in outer for e in ep] for p in pp for t in tp]


Domains = Callable[[int], int]  # host -> its NVLink domain


def flows(
    shape: ParallelShape, step: StepBytes, gpus: Sequence[Gpu], nvlink: Domains = lambda h: h
) -> list[Flow]:
    """Every flow of one step; `gpus[rank]` holds that rank, `nvlink` names each host's
    NVLink domain (node-limited dispatch counts them). Flows inside one GPU are left out."""
    if len(gpus) != shape.gpus:
        raise ValueError(f"{len(gpus)} GPUs for a shape of {shape.gpus}")
    out: list[Flow] = []
    for traffic in Traffic:
        gb = step.of(traffic)
        if gb > 0:
            for group in groups(shape, traffic):
                members = [gpus[i] for i in group]
                found = _collective(traffic, members, gb, step.dispatch, nvlink)
                out += [f for f in found if f.src != f.dst]
    return out


def _collective(
    traffic: Traffic, members: list[Gpu], gb: float, dispatch: Dispatch | None, nvlink: Domains
) -> Iterator[Flow]:
    k = len(members)
    if k < 2:
        return
    if traffic is Traffic.EXPERT and dispatch is not None:
        home = [(a, b) for a in members for b in members if nvlink(a.host) == nvlink(b.host)]
        yield from (Flow(traffic, a, b, gb / k) for a, b in home)
        for a, b, sent in dispatch_edges(members, gb, dispatch, nvlink):
            yield Flow(traffic, a, b, sent)
    elif traffic is Traffic.EXPERT:
        yield from (Flow(traffic, a, b, gb / k) for a in members for b in members)
    elif traffic is Traffic.PIPELINE:
        for a, b in itertools.pairwise(members):
            yield Flow(traffic, a, b, gb)
            yield Flow(traffic, b, a, gb)
    else:
        yield from (Flow(traffic, a, b, sent) for a, b, sent in ring_edges(members, gb))


def dispatch_edges(
    members: list[Gpu], gb: float, dispatch: Dispatch, nvlink: Domains
) -> list[tuple[Gpu, Gpu, float]]:
    """A node-limited all-to-all's traffic between NVLink domains: (member, the GPU that
    receives for a domain it reaches, GB). `gb` counts the member's top-k copies, so one copy
    of its tokens is gb / topk; the receiver is the domain's member at the sender's index in
    its own domain (DeepSeek-V3 sends to "the GPU with the same in-node index" on the target
    node), wrapping where the domain holds fewer members, so the copies spread over the
    receiving domain's NICs as its senders spread over theirs."""
    by_domain: dict[int, list[Gpu]] = {}
    for g in members:
        by_domain.setdefault(nvlink(g.host), []).append(g)
    k, spanned, copy = len(members), len(by_domain), gb / dispatch.topk
    sent = {d: dispatch.reach(len(there), k, spanned) * copy for d, there in by_domain.items()}
    out: list[tuple[Gpu, Gpu, float]] = []
    for home, senders in by_domain.items():
        for index, a in enumerate(senders):
            for d, there in by_domain.items():
                if d != home:
                    out.append((a, there[index % len(there)], sent[d]))
    return out


def ring_edges(members: list[Gpu], gb: float) -> list[tuple[Gpu, Gpu, float]]:
    """An all-reduce of `gb` per member as ring edges (reduce-scatter + all-gather). Where every
    host holds the same number m > 1 of the members, hierarchically as NCCL runs it: a ring
    inside each host, then one ring per GPU position across the hosts with 1/m of the
    message (the hosts' m NICs each carry one); otherwise one ring in rank order."""
    by_host: dict[int, list[Gpu]] = {}
    for g in members:
        by_host.setdefault(g.host, []).append(g)
    m = len(members) // len(by_host)
    if m == 1 or len(by_host) == 1 or any(len(v) != m for v in by_host.values()):
        return _ring(members, gb)
    rows = list(by_host.values())
    out = [e for row in rows for e in _ring(row, gb)]
    for i in range(m):
        out += _ring([row[i] for row in rows], gb / m)
    return out


def _ring(members: list[Gpu], gb: float) -> list[tuple[Gpu, Gpu, float]]:
    k = len(members)
    if k < 2:
        return []
    sent = 2 * (k - 1) / k * gb
    return [(a, members[(i + 1) % k], sent) for i, a in enumerate(members)]


BF16 = 2  # bytes per element
# achieved bf16 FLOP/s per GPU: H100's 989 TFLOP/s dense peak at the 38-43% MFU Llama 3 reports
ACHIEVED_FLOPS = 400e12


def step_bytes(model: Model, shape: ParallelShape) -> StepBytes:
    """Per-GPU GB per step (Megatron-LM, SC'21, section 3): TP all-reduces 2 x per layer forward
    and 2 x backward of the micro-batch's activations; PP sends one activation tensor per
    micro-batch each way; DP reduces this GPU's gradient shard once per step; EP dispatches and
    combines each token to its top-k experts, forward and backward (4 all-to-alls per MoE
    layer, DeepSeek-V3 report). The stage holds layers / pp of them. PP's message is split
    over the TP group (scatter/gather, section 4.1)."""
    act = model.seq * model.micro_batch * model.hidden * BF16 / 1e9  # GB per micro-batch
    layers = model.layers / shape.pp
    per_step = model.micro_batches
    tensor = 4 * layers * act * per_step if shape.tp > 1 else 0.0
    # Megatron-LM's scatter/gather (SC'21, section 4.1): each of a stage's tp ranks sends 1/tp
    # of the activation to its peer in the next stage, which all-gathers it over NVLink (that
    # all-gather is not charged: it stays inside the TP group's NVLink domain)
    pipeline = act * per_step / shape.tp if shape.pp > 1 else 0.0
    data = model.params_b * 1e9 * BF16 / (shape.tp * shape.pp) / 1e9
    moe = layers * model.moe_share
    expert = 4 * moe * model.topk * act / shape.tp * per_step if shape.ep > 1 else 0.0
    limit = model.node_limit
    dispatch = Dispatch(model.topk, limit) if limit is not None and model.topk else None
    return StepBytes(tensor, expert, pipeline, data, dispatch)


def compute_seconds(model: Model, shape: ParallelShape, flops: float = ACHIEVED_FLOPS) -> float:
    """A step's compute on one GPU: 6 x active parameters x tokens (forward and backward,
    Narayanan et al. SC'21, attention left out), the data-parallel rank's tokens shared by its
    tp x pp GPUs."""
    tokens = model.seq * model.micro_batch * model.micro_batches
    return 6 * model.active * 1e9 * tokens / (shape.tp * shape.pp) / flops


def comm_share(model: Model, shape: ParallelShape, compact: float) -> float:
    """The share of a compact step its exposed communication takes: `compact` seconds of it,
    `overlap` of which hides behind compute (0 when the step communicates nothing)."""
    if not compact:
        return 0.0
    exposed = compact * (1.0 - model.overlap)
    return exposed / (exposed + compute_seconds(model, shape))
