"""TrainingJob status: phase, standard conditions with CamelCase reasons, placement summary."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from scheduler.model import Placement

Obj = dict[str, Any]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def stamp(at: float) -> str:
    """An epoch time as the API writes times."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def created(obj: Obj) -> float:
    """creationTimestamp as seconds since the epoch (0 when absent or unreadable)."""
    return seconds(obj["metadata"].get("creationTimestamp"))


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


def condition(kind: str, ok: bool, reason: str, message: str, old: list[Obj]) -> Obj:
    """A condition; lastTransitionTime moves only when the status flips."""
    status = "True" if ok else "False"
    previous = next((c for c in old if c.get("type") == kind), None)
    since = (
        previous["lastTransitionTime"] if previous and previous.get("status") == status else now()
    )
    # never an empty message: the Python client sends "" as null, which the schema rejects
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message[:1000] or reason,
        "lastTransitionTime": since,
    }


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
    job: Obj,
    phase: str,
    conditions: list[Obj],
    gpus: int,
    placement: Obj | None = None,
    restarts: int | None = None,
) -> Obj:
    """A whole status. `placement` None is sent as null, so a merge patch removes a placement
    left from an earlier attempt instead of keeping it forever. The restart count is kept
    unless given; a finished job keeps the time it finished."""
    old = job.get("status") or {}
    finished = (old.get("completionTime") or now()) if phase in TERMINAL else None
    return {
        "phase": phase,
        "gpus": gpus,
        "observedGeneration": job["metadata"].get("generation", 0),
        "conditions": conditions,
        "placement": placement,
        "restarts": old.get("restarts") if restarts is None else restarts,
        "completionTime": finished,
    }


def same(old: Obj, new: Obj) -> bool:
    """Equal but for transition times and absent-vs-null keys: no write when nothing changed."""

    def strip(status: Obj) -> Obj:
        conditions = [
            {k: v for k, v in c.items() if k != "lastTransitionTime"}
            for c in status.get("conditions") or []
        ]
        kept = {k: v for k, v in status.items() if v is not None}
        return {**kept, "conditions": conditions}

    return strip(old) == strip(new)


def reason_of(job: Obj, kind: str = "Placed") -> str:
    conditions = (job.get("status") or {}).get("conditions") or []
    return str(next((c.get("reason", "") for c in conditions if c.get("type") == kind), ""))
