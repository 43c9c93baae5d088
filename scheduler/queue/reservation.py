"""EASY backfilling's reservation: where and from when a blocked gang will start.

Contract. Takes the capacity a blocked gang sees, the gang and the running gangs of its pool in
release order (queue/running.py), with their pods as flat arrays in that order
(queue/released.py).
Decides the hosts the gang would be placed on once enough running gangs have ended, releasing
them in the order they are expected to end (unknown ends last, oldest start first), and the time
that happens (the latest estimated end among them; inf when any is unknown). Among the
placements at that time it prefers the hosts those gangs release to hosts that are free now: it
holds the released hosts alone when they carry a placement that costs the gang no more traffic
(`cost`) than its best placement on all the free hosts, and that best one otherwise. Why: only a
held host that is free now keeps a later gang out (backfill sees the free capacity less the held
hosts), and a reservation on free racks pushed backfilled gangs across spines. Promises: the
hosts carry a valid placement of the gang on the capacity with those gangs released; None when
even releasing every running gang would not make room (the gang is too big for the pool: it
holds nothing back)."""

from __future__ import annotations

import math

import numpy as np

from scheduler.model.gang import GangRequest
from scheduler.model.placement import Placement
from scheduler.placement import Snapshot, place_one
from scheduler.placement.capacity import Capacity
from scheduler.placement.snapshot import Array, Bools, run_starts
from scheduler.queue.released import Flat
from scheduler.queue.running import ReleaseOrder
from scheduler.queue.types import QueueConfig, Reservation, Running


def _end(r: Running) -> float:
    return math.inf if r.end_s is None else r.end_s


def reserve(
    key: str,
    view: Snapshot,
    gang: GangRequest,
    ordered: ReleaseOrder,
    cfg: QueueConfig,
    owned: bool = False,
) -> Reservation | None:
    """`owned`: the view is the caller's own copy, changed here (else it is copied first)."""
    sim = view if owned else view.copy()
    fabric = view.fabric
    flat = ordered.flat(fabric)
    # the releases before `first` cannot make room (by GPU counts alone): released at once
    first = _first_possible(view, gang, flat)
    _release_first(sim, ordered, flat, first - 1)
    for n in range(first, len(ordered) + 1):
        # then one gang at a time: capacity first, then a placement
        sim.apply_usages([ordered.usage(n - 1, fabric)], sign=-1)
        if Capacity.of(sim, gang).total < gang.pods:
            continue
        placement = place_one(sim, gang, cfg.trial)
        if placement.placed:
            theirs = np.zeros(len(fabric.hosts), dtype=np.bool_)
            theirs[flat.hosts[: int(flat.ends()[n - 1])]] = True
            held = _on_released(sim, gang, theirs, placement, cfg)
            hosts = frozenset(sim.fabric.host_index[h] for h in held.hosts())
            at = _end(ordered[n - 1])  # the latest of the ends released: they come in order
            return Reservation(key, gang.name, hosts, at, held)
    return None


def _release_first(sim: Snapshot, ordered: ReleaseOrder, flat: Flat, n: int) -> None:
    """Give back what the first n gangs of the order take."""
    if flat.extended:  # extended resources are not in the flat rows: gang by gang
        sim.apply_usages([ordered.usage(i, sim.fabric) for i in range(n)], sign=-1)
    elif n:
        pods = int(flat.ends()[n - 1])
        sim.apply_rows(flat.hosts[:pods], flat.amounts[:pods], sign=-1)


def _on_released(
    sim: Snapshot, gang: GangRequest, theirs: Bools, best: Placement, cfg: QueueConfig
) -> Placement:
    """The placement whose hosts to hold: `best`, or one on the released hosts (`theirs`, per
    host) alone when `best` holds hosts free now and that one costs no more."""
    index = sim.fabric.host_index
    if all(theirs[index[h]] for h in best.hosts()):
        return best
    only = sim.copy()
    only.down |= set(np.flatnonzero(~theirs).tolist())
    placement = place_one(only, gang, cfg.trial)
    return placement if placement.placed and placement.cost <= best.cost else best


def _first_possible(view: Snapshot, gang: GangRequest, flat: Flat) -> int:
    """The fewest releases, in order, after which the free GPUs of the up hosts the gang may
    use (its pool's and those lent to it) cover it and have whole-pod GPU room for its pods;
    Capacity.of (which also weighs CPU, memory, pod slots, taints and the gang's constraints)
    can hold only from there. Both conditions only grow with each release: each is read off
    running sums over the released gangs and pods. len(gangs) + 1 when never."""
    # the hosts a placement of it may use (its pool's and any lent to it now, as Capacity.of
    # reads them), up: counting its pool's own alone began the search too late
    counted = view.pool_up(gang.pool)
    never = len(flat.pods) + 1
    missing = gang.all_gpus - int(view.free_gpus[counted].sum())
    n = 0 if missing <= 0 else _first_reaching(np.cumsum(flat.totals), missing)
    if n >= never:
        return never
    if not gang.gpus_per_pod:
        return max(n, 1)
    low = max(n, 1)
    if low >= never:  # nothing running to release (what holds it back is not GPUs)
        return never
    return max(low, _room_at(view, gang, flat, counted))


def _first_reaching(running_sum: Array, target: int) -> int:
    """The fewest leading terms whose sum reaches `target` (len + 1 when none)."""
    hits = np.flatnonzero(running_sum >= target)
    return int(hits[0]) + 1 if len(hits) else len(running_sum) + 1


def _room_at(view: Snapshot, gang: GangRequest, flat: Flat, counted: Bools) -> int:
    """The fewest releases after which the counted hosts have GPU room for the gang's pods
    (0 when they have now; len + 1 when never)."""
    room = int((view.free_gpus[counted] // gang.gpus_per_pod).sum())
    if room >= gang.pods:
        return 0
    pod = _pods_to_room(view, gang, flat, counted, gang.pods - room)
    if pod is None:
        return len(flat.pods) + 1
    return int(np.searchsorted(flat.ends(), pod - 1, side="right")) + 1


PREFIX = 32  # released pods walked one by one before the rest is read at once (_pods_to_room)


def _pods_to_room(
    view: Snapshot, gang: GangRequest, flat: Flat, counted: Bools, short: int
) -> int | None:
    """The fewest released pods whose release gives the counted hosts room for `short` more
    of the gang's pods (None: not even all of them). A few releases mostly suffice: the first
    `PREFIX` are walked one by one (a loop over a few pods costs less than the array pass),
    then 8x as many at a time, each prefix read at once (`_pods_to_room_at_once`)."""
    per_pod, free = gang.gpus_per_pod, view.free_gpus
    hosts, gpus = flat.hosts[:PREFIX].tolist(), flat.gpus[:PREFIX].tolist()
    released: dict[int, int] = {}
    gained = 0
    for pod, (host, got) in enumerate(zip(hosts, gpus, strict=True), start=1):
        if not counted[host]:
            continue
        before = int(free[host]) + released.get(host, 0)
        released[host] = released.get(host, 0) + got
        gained += (before + got) // per_pod - before // per_pod
        if gained >= short:
            return pod
    size = PREFIX
    while size < len(flat.hosts):  # then 8x as many pods at a time, each read at once
        size = max(8 * size, 8)
        found = _pods_to_room_at_once(view, gang, flat, counted, size, short)
        if found is not None:
            return found
    return None


def _pods_to_room_at_once(
    view: Snapshot, gang: GangRequest, flat: Flat, counted: Bools, size: int, short: int
) -> int | None:
    """`_pods_to_room` among the first `size` released pods, in one array pass. Each released
    pod adds GPUs to its host only: per pod, the GPUs released on its host so far (a running
    sum within each host) say how many whole pods that host gains with it; a pod's sum reads
    only the pods before it, so a prefix of the release order answers for itself."""
    per_pod, free = gang.gpus_per_pod, view.free_gpus
    hosts, gpus = flat.hosts[:size], flat.gpus[:size]
    # a stable sort of small integers is a radix sort (linear): most fabrics' host indexes fit
    keys = hosts.astype(np.uint16) if len(view.fabric.hosts) <= 1 << 16 else hosts
    by_host = np.argsort(keys, kind="stable")
    on_host, got = hosts[by_host], gpus[by_host]
    sums = np.cumsum(got)
    base = np.maximum.accumulate(np.where(run_starts(on_host), sums - got, 0))
    after = np.empty_like(gpus)
    after[by_host] = sums - base + free[on_host]
    gained = (after // per_pod - (after - gpus) // per_pod) * counted[hosts]
    pod = _first_reaching(np.cumsum(gained), short)
    return None if pod > len(gpus) else pod
