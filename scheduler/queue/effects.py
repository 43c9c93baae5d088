"""How a driver carries out a cycle's decisions: one port, one order, for the simulator and the
operator alike.

Contract. `apply(decisions, effects)` hands every field of a cycle's `Decisions` to the
driver's `Effects`, in one order: what the cycle learnt (placements tried, the gangs marked
to move), failures (a gang whose handling raised: each driver reports it, never drops it),
evictions, moves (before the starts: a start may use the room a move made), waits, the
preemptors nominated to the hosts their victims free, and last the starts, as one batch. A
driver decides how each effect happens (at once in the simulator, through the API server in
the operator), never whether: every field means the same in both."""

from __future__ import annotations

from typing import Protocol

from scheduler.model.placement import Placement
from scheduler.queue.types import Decisions, Eviction, Move, Wait


class Effects(Protocol):
    def learnt(self, decisions: Decisions) -> None:
        """Placements tried, joint-placement figures, gangs marked to move: for measures."""

    def fail(self, key: str, exc: Exception) -> None:
        """The gang's handling raised something unexpected."""

    def evict(self, eviction: Eviction) -> None:
        """Stop the victim for its preemptor; it queues again."""

    def move(self, move: Move) -> None:
        """Stop the gang at its checkpoint; it queues again, its new hosts held for it."""

    def wait(self, key: str, wait: Wait) -> None:
        """The gang waits, for this reason."""

    def nominate(self, key: str, placement: Placement) -> None:
        """The preemptor's placement once its victims are gone."""

    def start(self, starts: list[tuple[str, Placement]]) -> None:
        """Bind each gang where its placement says, all in one batch."""


def apply(decisions: Decisions, effects: Effects) -> None:
    effects.learnt(decisions)
    for key, exc in decisions.failed.items():
        effects.fail(key, exc)
    for eviction in decisions.evictions:
        effects.evict(eviction)
    for move in decisions.moves:
        effects.move(move)
    for key, wait in decisions.waiting.items():
        effects.wait(key, wait)
    for key, placement in decisions.nominated.items():
        effects.nominate(key, placement)
    effects.start(decisions.starts)
