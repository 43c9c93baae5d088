"""The port both drivers apply a cycle through: every field of Decisions is handed over, in
one order (moves before starts, starts as one batch)."""

from __future__ import annotations

from scheduler.model import Placement, PlacementStatus
from scheduler.queue import Decisions, Eviction, Move, Wait, WaitReason
from scheduler.queue.effects import apply


class Recording:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def learnt(self, decisions: Decisions) -> None:
        self.calls.append(("learnt", len(decisions.tried)))

    def fail(self, key: str, exc: Exception) -> None:
        self.calls.append(("fail", key))

    def evict(self, eviction: Eviction) -> None:
        self.calls.append(("evict", eviction.victim))

    def move(self, move: Move) -> None:
        self.calls.append(("move", move.key))

    def wait(self, key: str, wait: Wait) -> None:
        self.calls.append(("wait", key))

    def nominate(self, key: str, placement: Placement) -> None:
        self.calls.append(("nominate", key))

    def start(self, starts: list[tuple[str, Placement]]) -> None:
        self.calls.append(("start", [k for k, _ in starts]))


def placed(name: str) -> Placement:
    return Placement(gang=name, policy="t", status=PlacementStatus.PLACED)


def test_every_field_reaches_the_driver_in_one_order():
    decisions = Decisions(
        starts=[("s1", placed("s1")), ("s2", placed("s2"))],
        evictions=[Eviction("v", "p", 0.0)],
        nominated={"p": placed("p")},
        waiting={"w": Wait(WaitReason.UNPLACEABLE, "no room")},
        failed={"f": RuntimeError("x")},
        tried=[placed("s1")],
        moves=[Move("m", placed("m"), None, 0.0)],
    )
    effects = Recording()
    apply(decisions, effects)
    assert effects.calls == [
        ("learnt", 1),
        ("fail", "f"),
        ("evict", "v"),
        ("move", "m"),
        ("wait", "w"),
        ("nominate", "p"),
        ("start", ["s1", "s2"]),
    ]
