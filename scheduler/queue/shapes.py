"""Shape ids: small integers for what decides whether a gang's pods fit (shape_of), used to
index the per-cycle arrays of what is known unplaceable. An id is freed when no queued gang has
its shape any more and reused by the next new shape, so a long-lived queue holds as many shapes
as its gangs have, not every shape it ever saw.

Who owns a gang is part of its shape only where it can change whether the gang starts
(`Tenancy`): with teams, its queue's quota admits it; with preemption within a tenant, its
tenant decides whom it may preempt. Elsewhere gangs of one shape from many tenants share an id.
Under preemption within a tenant, shapes that differ only by tenant are kin: a failure that
could preempt no one is known of each kin that could preempt no one either (views.py). Without
either, a trace's tenants split every shape and the quiet walk tries each tenant's gang on a
view where its twin just failed."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from scheduler.model.gang import objective_of
from scheduler.queue.types import Entry

Key = tuple[object, ...]


@dataclass
class ShapeIds:
    ids: dict[Key, int] = field(default_factory=dict)
    keys: list[Key] = field(default_factory=list)  # id -> its shape (while in use)
    owners: list[tuple[int, str]] = field(default_factory=list)  # id -> (priority, tenant)
    refs: list[int] = field(default_factory=list)  # id -> queued gangs of that shape
    free: list[int] = field(default_factory=list)
    families: list[Key] = field(default_factory=list)  # id -> its shape less its tenant
    kin: dict[Key, set[int]] = field(default_factory=dict)  # shape less tenant -> ids

    def take(self, key: Key, owner: tuple[int, str], family: Key) -> tuple[int, bool]:
        """The id of `key`, held by one more gang; True when that id was another shape's
        before (whatever was known under it is not this shape's). `family`: the shape less
        what of its owner may be shared (`Tenancy.shared`)."""
        found = self.ids.get(key)
        if found is not None:
            self.refs[found] += 1
            return found, False
        reused = bool(self.free)
        if reused:
            new = self.free.pop()
            self.keys[new], self.owners[new], self.refs[new] = key, owner, 1
            self.families[new] = family
        else:
            new = len(self.owners)
            self.keys.append(key)
            self.owners.append(owner)
            self.refs.append(1)
            self.families.append(family)
        self.ids[key] = new
        self.kin.setdefault(family, set()).add(new)
        return new, reused

    def release(self, shape: int) -> None:
        """One gang of that shape fewer; its id is freed when none is left."""
        self.refs[shape] -= 1
        if self.refs[shape] == 0:
            del self.ids[self.keys[shape]]
            family = self.kin[self.families[shape]]
            family.discard(shape)
            if not family:
                del self.kin[self.families[shape]]
            self.free.append(shape)

    def kin_of(self, shape: int) -> set[int]:
        """The ids in use whose shapes differ from this one's by tenant only (itself too)."""
        return self.kin[self.families[shape]]

    def __len__(self) -> int:
        """How long an array indexed by id must be (ids in use and free)."""
        return len(self.owners)

    def clear(self) -> None:
        """Every id forgotten (the shapes' keys changed: `Tenancy`)."""
        self.ids.clear()
        self.keys.clear()
        self.owners.clear()
        self.refs.clear()
        self.free.clear()
        self.families.clear()
        self.kin.clear()


class Tenancy(Enum):
    """What of a gang's owner belongs to its shape."""

    NONE = "none"  # no teams; preemption off or across tenants
    TENANT = "tenant"  # preemption within a tenant: its tenant says whom it may preempt
    QUEUE = "queue"  # teams: its queue (named, or its namespace's) says what quota admits it

    @staticmethod
    def of(teams_on: bool, preempts_within_tenant: bool) -> Tenancy:
        if teams_on:
            return Tenancy.QUEUE
        return Tenancy.TENANT if preempts_within_tenant else Tenancy.NONE

    def owner(self, entry: Entry) -> tuple[str, ...]:
        if self is Tenancy.NONE:
            return ()
        if self is Tenancy.TENANT:
            return (entry.tenant,)
        return (entry.tenant, entry.queue)

    def shared(self, entry: Entry) -> tuple[str, ...]:
        """What of its owner stays in its family (the shape less what kin may share): nothing
        under preemption within a tenant (a failure that could preempt no one holds for each
        tenant); its whole owner elsewhere (with teams, a gang's queue also decides whether it
        may reclaim, so nothing is shared)."""
        return () if self is Tenancy.TENANT else self.owner(entry)


def shape_keys(entry: Entry, tenancy: Tenancy) -> tuple[Key, Key]:
    """Its shape's key and its family's (`ShapeIds.take`), from one reading of its shape."""
    fits, rest = shape_of(entry), (entry.gang.priority, entry.evictable)
    return (*fits, *tenancy.owner(entry), *rest), (*fits, *tenancy.shared(entry), *rest)


def shape_of(entry: Entry) -> tuple[object, ...]:
    """What decides whether pods fit besides how many: two gangs alike in all of it, the
    smaller unplaceable, the larger is too."""
    g = entry.gang
    return (
        g.pool,
        g.gpus_per_pod,
        g.cpu_milli_per_pod,
        g.memory_mib_per_pod,
        g.constraints,
        g.tp_pods,
        g.slices,
        g.preferred_slices,
        # the expert-parallel block sets the segment its users state (placement/hints.py)
        g.shape.tp * g.shape.ep if g.shape is not None else 0,
        tuple(sorted(g.extended_per_pod.items())),
        g.max_pods_per_rack,
        g.max_pods_per_host,
        g.spread,
        g.required_level,
        objective_of(g),
        # roles are placed after the workers: a gang whose roles find no room is unplaceable
        tuple(r.model_dump_json() for r in g.roles),
    )
