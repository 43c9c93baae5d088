"""What a placed job puts on each of the fabric's resources in one step, and how long its
communication takes alone and in a compact placement.

Contract. Takes the wires (links.py), a job's parallel shape, its bytes per step by class and
the GPU of each rank (traffic.py). Decides the GB per step on every resource it touches, by
traffic class: rings and pipeline chains edge by edge along their routes; an all-to-all from
counts alone where no link hashes (a member in domain D sends (k - n_D) / k of its tokens out
of D, so D's uplink carries n_D (k - n_D) / k of a member's tokens each way), pair by pair on
links that do; at an ECMP level, each connection (GPU pair) crossing a link as F flows, each
carrying 1/F of its own pair's bytes and hashed onto a path by its identity (job, class,
source and destination GPU, flow: a per-job salt and the pair's 5-tuple, as a switch hashes
headers). Promises: the loads are those of routing every flow of `traffic.flows` (a test
compares them, ECMP off); the lone time is each class's bottleneck (its load over capacity
on the resource it needs most), the classes one after another (a step waits for each of its
collectives), so a job alone on an idle fabric is as fast as its own bottlenecks and no
faster; the compact time is the same job's with its ranks filled in order into hosts and
NVLink domains, nothing above the NICs in its way.
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


Pair = tuple[Gpu, Gpu, float]  # a connection: source GPU, destination GPU, GB per step


@dataclass
class Tally:
    """GB per step on each resource, and at ECMP links each connection (GPU pair) with its
    own GB: there each connection is F flows, each hashed by its identity."""

    wires: Wires
    gb: Load = field(default_factory=lambda: defaultdict(float))
    pairs: dict[Resource, list[Pair]] = field(default_factory=lambda: defaultdict(list))

    def add(self, resource: Resource, gb: float) -> None:
        self.gb[resource] += gb

    def add_pair(self, resource: Resource, a: Gpu, b: Gpu, gb: float) -> None:
        """A connection's GB on a resource, kept by identity where the resource hashes."""
        self.gb[resource] += gb
        if self.wires.hashes(resource):
            self.pairs[resource].append((a, b, gb))


@dataclass(frozen=True)
class StepLoad:
    """A job's step on the fabric: GB per resource, by traffic class (paths chosen)."""

    by_class: dict[Traffic, Load]

    @property
    def total(self) -> Load:
        out: Load = defaultdict(float)
        for load in self.by_class.values():
            for r, gb in load.items():
                out[r] += gb
        return dict(out)

    def seconds(self, wires: Wires) -> float:
        """The step's communication alone on the fabric: each class at its own bottleneck,
        the classes one after another (a step waits for its TP and EP collectives, on its
        critical path, and for what DP and PP leave exposed: `traffic.Model.overlap`)."""
        return sum(alone_seconds(wires, load) for load in self.by_class.values())


def job_load(
    wires: Wires, job: int, shape: ParallelShape, step: StepBytes, gpus: Sequence[Gpu]
) -> StepLoad:
    """GB per step on every resource the job touches, by class, paths chosen at ECMP levels."""
    if len(gpus) != shape.gpus:
        raise ValueError(f"{len(gpus)} GPUs for a shape of {shape.gpus}")
    tallies = _tally(wires, shape, step, gpus)
    return StepLoad({c: _hashed(wires, job, c, t) for c, t in tallies.items()})


def _tally(
    wires: Wires, shape: ParallelShape, step: StepBytes, gpus: Sequence[Gpu]
) -> dict[Traffic, Tally]:
    out: dict[Traffic, Tally] = {}
    for traffic in Traffic:
        gb = step.of(traffic)
        if gb > 0:
            tally = out[traffic] = Tally(wires)
            for group in groups(shape, traffic):
                members = [gpus[i] for i in group]
                _collective(wires, tally, traffic, members, gb, step.dispatch)
    return out


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
    tallies = _tally(wires, shape, step, gpus).values()
    return sum(alone_seconds(wires, t.gb) for t in tallies)


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
            tally.add_pair(resource, a, b, gb)


def _all_to_all(wires: Wires, tally: Tally, members: list[Gpu], gb: float) -> None:
    """Each member sends gb / k to each member (itself included: that share stays)."""
    k = len(members)
    share = gb / k
    for g, inside in _at_home(wires, tally, members, share):
        if k > inside:
            tally.add(wires.port(Port.NIC, g, False), (k - inside) * share)
            remote = _remote_lanes(wires, members, g) if wires.links.rails else {0: k - inside}
            _sent_out(wires, tally, g, remote, share)
    for level in wires.uplink_levels:
        count = Counter(wires.domain(level, g.host) for g in members)
        if len(count) < 2:
            break  # a domain holds them all: no pair leaves it, nor any above
        if level in wires.links.ecmp:  # hashed links: each pair by its identity
            _pairs_across(wires, tally, members, level, share)
            continue
        for (domain, lane), up, n in _crossings(wires, members, level, wires.on_rails(level)):
            tally.add(wires.uplink(level, domain, up, lane), n * share)


def _pairs_across(wires: Wires, tally: Tally, members: list[Gpu], level: int, share: float) -> None:
    """Every pair of members in different domains of `level`: `share` up the source's uplink
    and down the destination's (on rails, the destination lane's)."""
    for a in members:
        for b in members:
            if wires.domain(level, a.host) != wires.domain(level, b.host):
                tally.add_pair(wires.uplink(level, a.host, True, b.lane), a, b, share)
                tally.add_pair(wires.uplink(level, b.host, False, b.lane), a, b, share)


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
            tally.add(wires.port(Port.NVLINK, g, True), (inside - 1) * share)
            tally.add(wires.port(Port.NVLINK, g, False), (inside - 1) * share)
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
            tally.add(resource, n * share)


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


def _hashed(wires: Wires, job: int, traffic: Traffic, tally: Tally) -> Load:
    """At ECMP links, each connection as F flows carrying its own GB / F, each on the path
    its identity hashes to (job, class, source GPU, destination GPU, flow: the job's salt
    and the pair's 5-tuple); elsewhere the link's load as it is."""
    links = wires.links
    out: Load = defaultdict(float)
    for resource, gb in tally.gb.items():
        paths = wires.paths(resource)
        if paths == 1:
            out[resource] += gb
            continue
        r = resource
        for a, b, sent in tally.pairs[resource]:
            for i in range(links.flows):
                flow = f"{traffic}/{a.host}.{a.lane}>{b.host}.{b.lane}/{i}"
                path = links.hash(links.seed, job, resource, flow, paths)
                out[Resource(r.port, r.level, r.domain, r.lane, r.up, path)] += sent / links.flows
    return dict(out)
