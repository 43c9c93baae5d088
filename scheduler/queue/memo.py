"""What the queue has learnt cannot be placed, per view, so it does not solve it again.

Contract. A view is the free capacity a gang sees and the hosts held from it (a fingerprint and
a set). `learn` records that a gang of a shape and priority (a shape id), with this many pods,
could not be placed on a view nor preempt the running gangs of a digest; `at` gives what is
known of a view. Promises: per view and shape, the fewest pods found unplaceable (a newer digest
of victims replaces an older one); the `KNOWN_VIEWS` most recently used views are kept, the
others forgotten; `version` moves whenever something is learnt (callers cache on it);
`forget_shape` drops a shape id that is handed to another shape; `clear` on another fabric."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from scheduler.queue.order import Known

KNOWN_VIEWS = 256  # views whose unplaceable shapes are remembered (the most recent)
ViewKey = tuple[bytes, frozenset[int]]


@dataclass
class Memo:
    known: OrderedDict[ViewKey, dict[int, Known]] = field(default_factory=OrderedDict)
    version: int = 0

    def at(self, view: ViewKey) -> dict[int, Known]:
        return self.known.get(view, {})

    def learn(self, view: ViewKey, shape: int, found: Known) -> None:
        known = self.known.setdefault(view, {})
        self.known.move_to_end(view)
        old = known.get(shape)
        if old is None or old.victims != found.victims or found.pods < old.pods:
            known[shape] = found
            self.version += 1
        while len(self.known) > KNOWN_VIEWS:
            self.known.popitem(last=False)

    def forget_shape(self, shape: int) -> None:
        for known in self.known.values():
            known.pop(shape, None)

    def clear(self) -> None:
        self.known.clear()
