"""Read-your-writes over an eventually consistent cache (runtime/cache.py): what the operator has
just done and the cache does not show yet.

Contract. After binding a gang's pods (its own, or a pod group's members) the operator expects each
pod to show on its node; after creating pods, to see them; after deleting pods, to see them gone.
Until the cache shows that, the owner (a job's uid, a group's key) is not judged again (a judgment
on the stale picture would bind twice, make pods twice, roll back a complete gang, or count one
failure twice), and the hosts of bound pods the cache does not show at all are charged, so no other
gang is placed on them. An expectation the cache has not met after `patience` seconds is dropped
(the next decision is then taken on what the cache shows, as a relisting operator would). With a
consistent read (listing every cycle) every expectation is met at once."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from scheduler.controller.runtime.objects import Pod
from scheduler.model import GangRequest, Placement, PlacementStatus, PodAssignment
from scheduler.placement import Snapshot

PodKey = tuple[str, str]  # (namespace, name)


@dataclass
class Expected:
    bound: dict[PodKey, str] = field(default_factory=dict)  # pod -> the node it must show
    gone: set[str] = field(default_factory=set)  # uids of pods that must disappear
    made: set[PodKey] = field(default_factory=set)  # pods created that must appear
    # the bound pods' charges, for as long as the cache does not show them
    charge: list[tuple[GangRequest, list[tuple[PodAssignment, PodKey]]]] = field(
        default_factory=list
    )
    deadline: float = 0.0


@dataclass
class Expectations:
    clock: Callable[[], float]
    patience: float = 30.0
    owners: dict[str, Expected] = field(default_factory=dict)

    def bound(self, owner: str, gang: GangRequest, placement: Placement, names: list[str]) -> None:
        """`placement`'s pods were bound, pod i of it named names[i], in the gang's namespace."""
        namespace = gang.name.split("/", 1)[0]
        keys = [(namespace, name) for name in names]
        entry = self._entry(owner)
        for pod, key in zip(placement.pods, keys, strict=True):
            entry.bound[key] = pod.host
        entry.charge.append((gang, list(zip(placement.pods, keys, strict=True))))

    def created(self, owner: str, namespace: str, names: list[str]) -> None:
        """Pods `names` were created: judged again once the cache shows them all."""
        self._entry(owner).made.update((namespace, name) for name in names)

    def gone(self, owner: str, pods: list[Pod]) -> None:
        """`pods` were deleted: expected gone, and no longer expected bound (nor charged)."""
        entry = self._entry(owner)
        entry.gone.update(p.meta.uid for p in pods)
        for pod in pods:
            entry.bound.pop(_key(pod), None)

    def _entry(self, owner: str) -> Expected:
        entry = self.owners.setdefault(owner, Expected())
        entry.deadline = self.clock() + self.patience
        return entry

    def settle(self, pods: list[Pod]) -> None:
        """Drop what the cache now shows, and what waited too long."""
        seen = {_key(p): p for p in pods}
        uids = {p.meta.uid for p in pods}
        now = self.clock()
        for owner, entry in list(self.owners.items()):
            entry.bound = {k: h for k, h in entry.bound.items() if _node(seen.get(k)) != h}
            entry.gone &= uids
            entry.made -= seen.keys()
            if (not entry.bound and not entry.gone and not entry.made) or now > entry.deadline:
                del self.owners[owner]

    def waiting(self, owner: str) -> bool:
        return owner in self.owners

    def forget(self, live: set[str]) -> None:
        """Owners that are gone (a deleted job or group) expect nothing any more."""
        self.owners = {o: e for o, e in self.owners.items() if o in live}

    def reserve(self, snapshot: Snapshot, pods: list[Pod]) -> None:
        """Charge expected pods the cache has not shown yet and does not show at all (shown
        ones are charged from what the cache shows; one seen and gone since is gone)."""
        present = {_key(p) for p in pods}
        for entry in self.owners.values():
            for gang, pairs in entry.charge:
                charge_unseen(
                    snapshot, gang, (a for a, k in pairs if k in entry.bound and k not in present)
                )


def charge_unseen(snapshot: Snapshot, gang: GangRequest, pods: Iterable[PodAssignment]) -> None:
    """Charge pods the cycle's read does not show on the hosts meant for them (a host the
    fabric no longer has is skipped): what the operator wrote or is writing but cannot see yet
    must not be given to another gang."""
    index = snapshot.fabric.host_index
    missing = tuple(p for p in pods if p.host in index)
    if missing:
        snapshot.apply(gang, _placement(gang, missing))


def _placement(gang: GangRequest, pods: tuple[PodAssignment, ...]) -> Placement:
    return Placement(gang=gang.name, policy="rackwise", status=PlacementStatus.PLACED, pods=pods)


def _key(pod: Pod) -> PodKey:
    return (pod.meta.namespace, pod.meta.name)


def _node(pod: Pod | None) -> str | None:
    return None if pod is None else pod.node


def owned_by(pod: Pod) -> str | None:
    """The uid of the TrainingJob that controls this pod, or None for a pod rackwise did not
    create: labels and annotations can be copied by anyone, an owner uid cannot be guessed."""
    return pod.owner_job
