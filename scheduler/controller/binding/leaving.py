"""Gangs on their way out: pods of the operator's gangs that still hold their hosts while they go.

Contract. Takes the pods each TrainingJob uid (or pod group key) owns, the live jobs, the gangs
listed as running and the cluster state. Decides, per job that is not listed as running, which
of its pods still hold a host of the fabric while they go: every bound, unfinished pod of a
deleted job, and the pods being deleted of a live one (a rollback, an eviction; a pod group's
members, whose group counts as live and is never listed as running). Promises: one `Running`
per such job and pool of the hosts those pods hold, its pods charged what the ledger charges
them (alike pods as one pod set), ending now, so that a blocked gang's reservation counts on the
hosts they are about to give back (queue/reservation.py) instead of finding that nothing it
knows of will make room. Nothing else in the queue sees them as gangs: they are never preempted
or moved.

Their quota is another matter (`quota_held`): every bound, unfinished pod of a job not listed as
running (deleted, suspended, evicted, its delete refused by an API server that is down, or
half bound) and every departing pod-group member still holds its queue's quota, as Kueue keeps
a workload's quota until its pods are inactive: one charge per owner and pool of the hosts its
pods hold, to the queue that admitted it (the pods' annotation), released only when the pods
are gone."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from scheduler.controller.cluster.resources import pod_charge, requested
from scheduler.controller.cluster.state import ClusterState, charged
from scheduler.controller.config import OperatorConfig
from scheduler.controller.podgroup.members import departing
from scheduler.controller.runtime.admitted import admitted_by
from scheduler.controller.runtime.objects import Pod
from scheduler.controller.runtime.quantity import QuantityError
from scheduler.model import GangRequest, Placement, PlacementStatus, PodAssignment
from scheduler.model.gang import Role
from scheduler.queue import Running
from scheduler.queue.teams.use import Charge


def leaving(
    owned: Mapping[str, list[Pod]],
    live: set[str],
    running: set[str],
    state: ClusterState,
    now: float,
    gpu_resource: str,
) -> list[Running]:
    """The gangs whose pods hold hosts while they go, each ending `now`: one per job and pool
    of the hosts its pods hold (a borrowed gang's pods on a lender's hosts are released in the
    lender's pool, where a blocked gang may wait for them)."""
    index, pools = state.fabric.host_index, state.fabric.host_pool
    out: list[Running] = []
    for uid, pods in owned.items():
        if uid in running:
            continue
        by_pool: dict[str, list[Pod]] = {}
        for p in pods:
            if charged(p, index) and (uid not in live or p.meta.deleting):
                by_pool.setdefault(pools[str(p.node)], []).append(p)
        for pool, going in by_pool.items():
            key = f"{uid}@{pool}"
            gang = _gang(key, going, pool, gpu_resource)
            if gang is not None:
                out.append(_ending(key, *gang, now))
    return out


def _gang(
    key: str, pods: list[Pod], pool: str, gpu_resource: str
) -> tuple[GangRequest, list[tuple[str, str]]] | None:
    """The gang its pods make (alike charges as one pod set, the largest the workers) and each
    pod's (host, pod set); None when a charge cannot be read (the ledger fills such a pod's
    node, so no release of it is counted on)."""
    try:
        charges = [pod_charge(p, gpu_resource) for p in pods]
    except QuantityError:
        return None
    kinds = {repr(c): c for c in charges}
    counts = Counter(repr(c) for c in charges)
    main = max(kinds, key=lambda k: counts[k])  # the first of the largest sets on a tie
    names = {k: "" if k == main else f"set-{i}" for i, k in enumerate(kinds)}
    roles = tuple(
        Role(name=names[k], pods=counts[k], **c.per_pod()) for k, c in kinds.items() if k != main
    )
    per_pod = kinds[main].per_pod()
    gang = GangRequest(name=f"leaving-{key}", pods=counts[main], **per_pod, pool=pool, roles=roles)
    return gang, [(str(p.node), names[repr(c)]) for p, c in zip(pods, charges, strict=True)]


def _ending(key: str, gang: GangRequest, pods: list[tuple[str, str]], now: float) -> Running:
    """A `Running` that ends now: its pods on their hosts, ranked per pod set."""
    seen: dict[str, int] = {}
    assignments = []
    for rank, (host, role) in enumerate(pods):
        seen[role] = seen.get(role, -1) + 1
        role_rank = seen[role] if role else None
        assignments.append(PodAssignment(rank=rank, host=host, role=role, role_rank=role_rank))
    placement = Placement(
        gang=gang.name, policy="rackwise", status=PlacementStatus.PLACED, pods=tuple(assignments)
    )
    return Running(key, gang, placement, now, end_s=now)


def quota_held(
    owned: Mapping[str, list[Pod]],
    running: set[str],
    pods: list[Pod],
    state: ClusterState,
    config: OperatorConfig,
) -> list[Charge]:
    """What pods on their way out still hold of their queues' quota: per owner not listed as
    running (and per group's departing members, found among `pods`) and pool of the hosts they
    hold, their namespace, the queue that admitted them and the GPUs, millicores and MiB they
    request."""
    index, pools = state.fabric.host_index, state.fabric.host_pool
    out: list[Charge] = []
    owners = [mine for uid, mine in owned.items() if uid not in running]
    for going in [*owners, *departing(pods, config).values()]:
        by_pool: dict[str, list[Pod]] = {}
        for p in going:
            if charged(p, index):
                by_pool.setdefault(pools[str(p.node)], []).append(p)
        for pool, held in by_pool.items():
            demand = requested(held, config.gpu_resource)  # as running pod groups are charged
            out.append(("", held[0].meta.namespace, pool, demand, admitted_by(held)))
    return out
