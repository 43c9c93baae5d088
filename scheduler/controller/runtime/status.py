"""TrainingJob status: phase, standard conditions with CamelCase reasons, placement summary."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from scheduler.controller.runtime.objects import Condition, JobState, Meta, find
from scheduler.model import Placement

Obj = dict[str, Any]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def stamp(at: float) -> str:
    """An epoch time as the API writes times."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def created(meta: Meta) -> float:
    """creationTimestamp as seconds since the epoch (0 when absent or unreadable)."""
    return seconds(meta.created)


def seconds(stamp: object) -> float:
    """An RFC 3339 time as seconds since the epoch (0 when absent or unreadable)."""
    text = str(stamp or "")
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def parse_time(stamp: object) -> float | None:
    """An RFC 3339 time as seconds since the epoch; None when absent or unreadable."""
    value = seconds(stamp)
    return value or None


def condition(
    kind: str, ok: bool, reason: str, message: str, old: Sequence[Condition]
) -> Condition:
    """A condition; lastTransitionTime moves only when the status flips."""
    status = "True" if ok else "False"
    previous = find(tuple(old), kind)
    since = previous.since if previous and previous.status == status else ""
    # never an empty message: the Python client sends "" as null, which the schema rejects
    return Condition(kind, status, reason, message[:1000] or reason, since or now())


def summary(placement: Placement) -> Obj:
    """Placement summary for status (no nulls: the API server rejects them in a CR)."""
    out: Obj = {
        "domains": placement.domains,
        "cost": round(placement.cost, 6),
        "objective": round(placement.objective, 6),
        "optimal": placement.optimal,
        "solveSeconds": round(placement.solve_seconds, 6),
        "engine": placement.engine,
        "hosts": dict(sorted(placement.hosts().items())),
    }
    if placement.bound is not None and placement.gap is not None:
        out["bound"] = round(placement.bound, 6)
        out["gap"] = round(placement.gap, 6)
    return out


TERMINAL = ("Succeeded", "Failed")


def build(
    meta: Meta,
    old: JobState,
    phase: str,
    conditions: list[Condition],
    gpus: int,
    placement: Obj | None = None,
    restarts: int | None = None,
) -> JobState:
    """A whole status. `placement` None is sent as null, so a merge patch removes a placement
    left from an earlier attempt instead of keeping it forever. The restart count is kept
    unless given; a finished job keeps the time it finished."""
    finished = (old.finished or now()) if phase in TERMINAL else None
    return JobState(
        phase=phase,
        gpus=gpus,
        observed=meta.generation,
        conditions=tuple(conditions),
        placement=placement,
        restarts=old.restarts if restarts is None else restarts,
        finished=finished,
    )


def body(state: JobState) -> Obj:
    """A status as the API takes it (a merge patch: every key, None as null)."""
    return {
        "phase": state.phase,
        "gpus": state.gpus,
        "observedGeneration": state.observed,
        "conditions": [c.body() for c in state.conditions],
        "placement": state.placement,
        "restarts": state.restarts,
        "completionTime": state.finished,
    }
