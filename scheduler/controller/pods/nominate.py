"""`status.nominatedNodeName` on the pods of gangs that hold hosts while they wait.

Contract. Each cycle the queue driver says which waiting gangs hold hosts and where each pod
will go (`hold`): a preemptor on the hosts its victims free, a gang on the room a move or a
reclaim makes, the first blocked gang of a pool on the hosts its reservation keeps. `sync`
then makes every pod of the operator's scheduler say exactly that: the node where it is
nominated, set or changed; cleared once it is bound, or its gang holds nothing any more (it
started elsewhere, gave up, was deleted). Why: a cluster autoscaler, and the kube-scheduler's
own preemption, see a pod's nomination as capacity spoken for; without it rackwise's
reservations are invisible to them. Promises: a pod is written only when what it says differs
from what it should (or from what was last written, while the cache lags); nothing else of its
status changes (a merge patch of the one field)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.controller.runtime.calls import Calls
from scheduler.controller.runtime.objects import Pod

Obj = dict[str, Any]
FIELD = "nominatedNodeName"


@dataclass
class Nominations:
    patch: Callable[[str, str, Obj], None]  # a pod's (namespace, name, status)
    calls: Calls  # API errors counted and logged, never raised
    scheduler: str  # the operator's schedulerName: only its pods are written
    want: dict[str, str] = field(default_factory=dict)  # pod uid -> node, this cycle
    told: dict[str, str | None] = field(default_factory=dict)  # pod uid -> last written

    def hold(self, pods: Sequence[Pod], nodes: Mapping[int, str]) -> None:
        """pods[rank] is to go to nodes[rank]."""
        for rank, node in nodes.items():
            if rank < len(pods):
                self.want[pods[rank].meta.uid] = node

    def sync(self, pods: Iterable[Pod]) -> None:
        """Every pod of the operator's says what `hold` said this cycle; then that is spent."""
        want, self.want = self.want, {}
        told: dict[str, str | None] = {}
        for pod in pods:
            if pod.scheduler != self.scheduler or pod.meta.deleting:
                continue
            uid = pod.meta.uid
            target = want.get(uid)  # only waiting gangs hold: a bound pod is cleared
            if pod.nominated == target:
                continue
            if uid in self.told and self.told[uid] == target:
                told[uid] = target  # written already; the cache does not show it yet
                continue
            status = {FIELD: target}  # null removes it (a merge patch)
            if self.calls.attempt(self.patch, pod.meta.namespace, pod.meta.name, status):
                told[uid] = target
        self.told = told


def spread(hosts: Sequence[str], pods: int) -> dict[int, str]:
    """Ranks over the hosts a reservation keeps, in order, as evenly as they divide: which pod
    lands where is the placement's to say when the gang starts; the nomination only says
    that these hosts are spoken for."""
    if not hosts:
        return {}
    return {rank: hosts[rank * len(hosts) // pods] for rank in range(pods)}
