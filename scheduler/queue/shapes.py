"""Shape ids: small integers for what decides whether a gang's pods fit (shape_of), used to
index the per-cycle arrays of what is known unplaceable. An id is freed when no queued gang has
its shape any more and reused by the next new shape, so a long-lived queue holds as many shapes
as its gangs have, not every shape it ever saw."""

from __future__ import annotations

from dataclasses import dataclass, field

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

    def take(self, key: Key, owner: tuple[int, str]) -> tuple[int, bool]:
        """The id of `key`, held by one more gang; True when that id was another shape's
        before (whatever was known under it is not this shape's)."""
        found = self.ids.get(key)
        if found is not None:
            self.refs[found] += 1
            return found, False
        reused = bool(self.free)
        if reused:
            new = self.free.pop()
            self.keys[new], self.owners[new], self.refs[new] = key, owner, 1
        else:
            new = len(self.owners)
            self.keys.append(key)
            self.owners.append(owner)
            self.refs.append(1)
        self.ids[key] = new
        return new, reused

    def release(self, shape: int) -> None:
        """One gang of that shape fewer; its id is freed when none is left."""
        self.refs[shape] -= 1
        if self.refs[shape] == 0:
            del self.ids[self.keys[shape]]
            self.free.append(shape)

    def __len__(self) -> int:
        """How long an array indexed by id must be (ids in use and free)."""
        return len(self.owners)


def shape_key(entry: Entry) -> tuple[object, ...]:
    return (*shape_of(entry), entry.gang.priority, entry.evictable)


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
        tuple(sorted(g.extended_per_pod.items())),
        g.max_pods_per_rack,
        g.required_level,
        objective_of(g),
        # roles are placed after the workers: a gang whose roles find no room is unplaceable
        tuple(r.model_dump_json() for r in g.roles),
        entry.tenant,
        entry.queue,
    )
