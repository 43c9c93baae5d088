"""What a placed job puts on each of the fabric's resources in one step, and how long its
communication takes alone and in a compact placement.

Contract. Takes the wires (links.py), a job's parallel shape, its bytes per step by class and
the GPU of each rank (traffic.py). Decides the GB per step on every resource it touches:
rings and pipeline chains edge by edge along their routes; an all-to-all from counts alone
(a member in domain D sends (k - n_D) / k of its tokens out of D, so D's uplink carries
n_D (k - n_D) / k of a member's tokens each way), without listing its k^2 flows; at an ECMP
level, each connection (GPU pair) crossing a link as F equal flows, each hashed onto a path.
Promises: the loads are those of routing every flow of `traffic.flows` (a test compares them,
ECMP off); the lone time is
the most any resource needs (load over capacity), so a job alone on an idle fabric is as fast
as its own bottleneck and no faster; the compact time is the same job's with its ranks filled
in order into hosts and NVLink domains, nothing above the NICs in its way.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from scheduler.model.gang import ParallelShape
from scheduler.topology.links import CompactWires, Links, Port, Resource, Wires
from scheduler.topology.traffic import (
    Dispatch,
    Gpu,
    StepBytes,
    Traffic,
    dispatch_edges,
    groups,
    ring_edges,
)

Load = dict[Resource, float]


@dataclass
class Tally:
    """GB per step on each resource, and how many connections (GPU pairs) cross it: at an
    ECMP level each connection is F flows, hashed on their own."""

    gb: Load = field(default_factory=lambda: defaultdict(float))
    conns: dict[Resource, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, resource: Resource, gb: float, conns: int = 1) -> None:
        self.gb[resource] += gb
        self.conns[resource] += conns


def job_load(
    wires: Wires, job: int, shape: ParallelShape, step: StepBytes, gpus: Sequence[Gpu]
) -> Load:
    """GB per step on every resource the job touches, paths chosen at ECMP levels."""
    if len(gpus) != shape.gpus:
        raise ValueError(f"{len(gpus)} GPUs for a shape of {shape.gpus}")
    return _hashed(wires, job, _tally(wires, shape, step, gpus))


def _tally(wires: Wires, shape: ParallelShape, step: StepBytes, gpus: Sequence[Gpu]) -> Tally:
    tally = Tally()
    for traffic in Traffic:
        gb = step.of(traffic)
        if gb > 0:
            for group in groups(shape, traffic):
                members = [gpus[i] for i in group]
                _collective(wires, tally, traffic, members, gb, step.dispatch)
    return tally


def alone_seconds(wires: Wires, load: Load) -> float:
    return max((gb / wires.capacity(r) for r, gb in load.items()), default=0.0)


def compact_seconds(
    links: Links, shape: ParallelShape, step: StepBytes, host_gpus: int, domain_gpus: int
) -> float:
    """A step's communication in a compact placement on an idle fabric, the reference a stretch
    is measured from: ranks filled in order into hosts of `host_gpus` GPUs and NVLink domains of
    `domain_gpus` (the pool's largest; whole TP x EP blocks in each where a block fits one),
    nothing above the NICs shared (links.CompactWires)."""
    block = shape.tp * shape.ep  # a TP x EP block is consecutive ranks: domains hold whole ones
    if block <= domain_gpus:
        domain_gpus -= domain_gpus % block
    wires = CompactWires(links, domain_gpus // max(host_gpus, 1))
    gpus = [Gpu(r // host_gpus, r % host_gpus) for r in range(shape.gpus)]
    return alone_seconds(wires, _tally(wires, shape, step, gpus).gb)


def _collective(
    wires: Wires,
    tally: Tally,
    traffic: Traffic,
    members: list[Gpu],
    gb: float,
    dispatch: Dispatch | None = None,
) -> None:
    k = len(members)
    if k < 2:
        return
    if traffic is Traffic.EXPERT and dispatch is not None:
        _dispatched(wires, tally, members, gb, dispatch)
    elif traffic is Traffic.EXPERT:
        _all_to_all(wires, tally, members, gb)
    elif traffic is Traffic.PIPELINE:
        for a, b in itertools.pairwise(members):
            _edge(wires, tally, a, b, gb)
            _edge(wires, tally, b, a, gb)
    else:
        for a, b, sent in ring_edges(members, gb):
            _edge(wires, tally, a, b, sent)


def _edge(wires: Wires, tally: Tally, a: Gpu, b: Gpu, gb: float) -> None:
    if a != b:
        for resource in wires.route(a, b):
            tally.add(resource, gb)


def _all_to_all(wires: Wires, tally: Tally, members: list[Gpu], gb: float) -> None:
    """Each member sends gb / k to each member (itself included: that share stays)."""
    k = len(members)
    share = gb / k
    for g, inside in _at_home(wires, tally, members, share):
        if k > inside:
            tally.add(wires.port(Port.NIC, g, False), (k - inside) * share, k - inside)
            remote = _remote_lanes(wires, members, g) if wires.links.rails else {0: k - inside}
            _sent_out(wires, tally, g, remote, share)
    for level in wires.uplink_levels:
        count = Counter(wires.domain(level, g.host) for g in members)
        if len(count) < 2:
            break  # a domain holds them all: no pair leaves it, nor any above
        for (domain, lane), up, n in _crossings(wires, members, level, wires.on_rails(level)):
            tally.add(wires.uplink(level, domain, up, lane), n * share, n)


def _dispatched(
    wires: Wires, tally: Tally, members: list[Gpu], gb: float, dispatch: Dispatch
) -> None:
    """A node-limited all-to-all (traffic.Dispatch): its own NVLink domain's share as an
    all-to-all does, and one routed edge per other domain it reaches."""
    _at_home(wires, tally, members, gb / len(members))
    for a, b, sent in dispatch_edges(members, gb, dispatch, wires.nvlink_domain):
        _edge(wires, tally, a, b, sent)


def _at_home(wires: Wires, tally: Tally, members: list[Gpu], share: float) -> list[tuple[Gpu, int]]:
    """Each member's `share` to and from every other member of its NVLink domain, over
    NVLink; (member, members in its domain) for what leaves it."""
    nvlink = Counter(wires.nvlink_domain(g.host) for g in members)
    out = []
    for g in members:
        inside = nvlink[wires.nvlink_domain(g.host)]
        if inside > 1:
            tally.add(wires.port(Port.NVLINK, g, True), (inside - 1) * share, inside - 1)
            tally.add(wires.port(Port.NVLINK, g, False), (inside - 1) * share, inside - 1)
        out.append((g, inside))
    return out


def _remote_lanes(wires: Wires, members: list[Gpu], g: Gpu) -> dict[int, int]:
    """The members outside g's NVLink domain, by lane."""
    home = wires.nvlink_domain(g.host)
    return Counter(b.lane for b in members if wires.nvlink_domain(b.host) != home)


def _sent_out(wires: Wires, tally: Tally, g: Gpu, remote: dict[int, int], share: float) -> None:
    """g's tokens to other NVLink domains: out of its own NIC, or on rails out of the NIC of
    each destination's lane on its host, reached over NVLink (PXN)."""
    for lane, n in remote.items():
        for resource in wires.leave(g, lane):
            tally.add(resource, n * share, n)


def _crossings(
    wires: Wires, members: list[Gpu], level: int, by_lane: bool
) -> list[tuple[tuple[int, int], bool, int]]:
    """((a host of the domain, lane), leaving?, pairs) for each domain of `level` the members
    straddle: n (k - n) pairs each way, or on rails split by the destination's lane."""
    k = len(members)
    first: dict[int, int] = {}
    count: Counter[int] = Counter()
    lane_in: Counter[tuple[int, int]] = Counter()
    for g in members:
        d = wires.domain(level, g.host)
        first.setdefault(d, g.host)
        count[d] += 1
        lane_in[d, g.lane if by_lane else 0] += 1
    lane_all: Counter[int] = Counter()
    for (_, lane), n in lane_in.items():
        lane_all[lane] += n
    out: list[tuple[tuple[int, int], bool, int]] = []
    for (d, lane), n in lane_in.items():
        out.append(((first[d], lane), False, n * (k - count[d])))  # into d, to this lane
    for d, n in count.items():
        for lane, total in lane_all.items():
            outside = total - lane_in[d, lane]
            if outside:
                out.append(((first[d], lane), True, n * outside))  # out of d, to that lane
    return [c for c in out if c[2]]


def _hashed(wires: Wires, job: int, tally: Tally) -> Load:
    """At ECMP levels, each connection over a link as F flows of equal share, each on its own
    hashed path; elsewhere the link's load as it is."""
    links = wires.links
    out: Load = defaultdict(float)
    for resource, gb in tally.gb.items():
        paths = wires.paths(resource)
        if paths == 1:
            out[resource] += gb
            continue
        flows = tally.conns[resource] * links.flows
        r = resource
        for i in range(flows):
            path = links.hash(links.seed, job, resource, i, paths)
            out[Resource(r.port, r.level, r.domain, r.lane, r.up, path)] += gb / flows
    return dict(out)
