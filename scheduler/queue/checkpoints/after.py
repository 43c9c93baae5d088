"""After the walk: joint placement and moves at checkpoints, the queue's two mechanisms that
look at a cycle's decisions as a whole.

Contract. Takes the cycle once every gang was looked at. Joint placement (checkpoints/joint.py,
`joint_gangs`): the cycle's starts made on the whole free capacity are placed again together
with each pool's first unplaceable gang when that starts more gangs or costs less J; hosts held
for reservations and preemptors stay theirs. Defragmentation (queue/checkpoints/defrag.py,
`defrag_moves_per_hour`): a running training gang that declares checkpoints is marked, then
moved after its next checkpoint, when that lets a pool's first unplaceable gang start or cuts
its own J (budgeted); a move is carried out as a preemption: the moved gang is pinned to its new
hosts (holds.py), and the waiting gang it made room for is nominated to that room. Promises:
nothing it decides uses a host held for another gang; the starts it changes stay whole
placements that fit together."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from scheduler.model.gang import GangRequest
from scheduler.model.placement import PlaceConfig, Placement
from scheduler.queue.checkpoints import joint
from scheduler.queue.checkpoints.defrag import Defrag
from scheduler.queue.cycle import Cycle, unreserve
from scheduler.queue.holds import Holds
from scheduler.queue.types import Entry, Move, QueueConfig, Wait, WaitReason


@dataclass
class AfterWalk:
    config: QueueConfig
    entries: dict[str, Entry]
    pins: Holds
    defrag: Defrag
    at_once: PlaceConfig  # joint placement's and moves' rules: the queue's, less patience
    wait: Callable[[Cycle, Entry, Wait], None]
    # whether a waiting gang may start by quota now (queue/teams/queues.py)
    admits: Callable[[Cycle, Entry], bool] = lambda _c, _entry: True

    def run(self, c: Cycle) -> None:
        self.together(c)
        self.defragment(c)

    def together(self, c: Cycle) -> None:
        """Place the cycle's starts again together, with each pool's first blocked gang, when
        that starts more or costs less (checkpoints/joint.py); hosts held for a reservation or a
        preemptor stay off limits to everyone else."""
        if self.config.policy.joint_gangs < 2 or not c.free_starts:
            return
        blocked = self._blocked(c)
        if len(c.free_starts) + len(blocked) < 2:
            return
        holds = {**self.pins.hosts, **{r.key: r.hosts for r in c.out.reservations.values()}}
        keys = [k for k, _, _ in c.free_starts] + [k for k, _ in blocked]
        forbidden = {k: frozenset().union(*(h for o, h in holds.items() if o != k)) for k in keys}
        found = joint.improve(
            c.work, c.free_starts, blocked, forbidden, self.at_once, self.config.policy.joint_gangs
        )
        if found is not None:
            self._take_joint(c, found)

    def defragment(self, c: Cycle) -> None:
        """Move running gangs at their checkpoints to let a waiting gang start or to cut their
        own J (queue/checkpoints/defrag.py); mark those whose checkpoint is still to come."""
        if self.config.policy.defrag_moves_per_hour <= 0:
            return
        blocked = self._blocked(c)
        reserved = {r.key: r.hosts for r in c.out.reservations.values()}
        forbidden = frozenset().union(*self.pins.hosts.values(), *reserved.values())
        leaving = c.evicted | self.pins.stopping()
        running = [r for r in c.running if r.key not in leaving]
        moves, starts, marked = self.defrag.cycle(
            c.now, c.work, running, blocked, forbidden, reserved
        )
        c.out.marked.update(marked)
        for at in marked.values():
            if at < math.inf:
                c.out.wake(at)
        for move in moves:
            self._moved(c, move)
        for key, placement in starts:
            self._nominate_room(c, key, placement, moves)

    def _moved(self, c: Cycle, move: Move) -> None:
        """The driver stops the gang and queues it again; it restarts on its new hosts, which
        are held for it (holds.py) so that no one else takes them meanwhile."""
        c.out.moves.append(move)
        c.evicted.add(move.key)
        index = c.work.fabric.host_index
        self.pins.hold(
            move.key, move.placement, frozenset(index[h] for h in move.placement.hosts())
        )

    def _nominate_room(self, c: Cycle, key: str, placement: Placement, moves: list[Move]) -> None:
        """The waiting gang a move made room for gets that room, as a preemptor gets its
        victims' hosts: held until the moved gang is gone, then started there."""
        moved = frozenset(m.key for m in moves if m.waiting == key)
        index = c.work.fabric.host_index
        c.out.nominated[key] = placement
        self.pins.hold(key, placement, frozenset(index[h] for h in placement.hosts()), moved)
        names = ", ".join(sorted(moved))
        self.wait(c, self.entries[key], Wait(WaitReason.PREEMPTING, f"{names} moving"))
        unreserve(c, key)

    def _blocked(self, c: Cycle) -> list[tuple[str, GangRequest]]:
        """The first gang of each pool that could not be placed this cycle."""
        out: dict[str, tuple[str, GangRequest]] = {}
        for key, wait in c.out.waiting.items():
            entry = self.entries.get(key)
            if entry is None or wait.reason is not WaitReason.UNPLACEABLE:
                continue
            if not self.admits(c, entry):
                continue
            pool = entry.gang.pool
            if pool not in out or entry.order < self.entries[out[pool][0]].order:
                out[pool] = (key, entry.gang)
        return list(out.values())

    def _take_joint(self, c: Cycle, found: joint.Joint) -> None:
        before = dict(c.out.starts)
        c.out.starts = [(k, found.placements.get(k, p)) for k, p in c.out.starts]
        c.out.starts += [(k, found.placements[k]) for k in found.joined]
        for key in found.joined:
            c.out.waiting.pop(key, None)
            unreserve(c, key)
        c.out.tried.extend(found.tried)
        c.out.joint_gain += found.gain
        c.out.joint_joined = list(found.joined)
        c.out.joint_moved = sorted(
            k for k, p in found.placements.items() if k in before and before[k] != p
        )
