"""Loading a topology (+ state) for a command, with errors that name the file."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from scheduler.io import InputError, describe, load_state
from scheduler.placement import Snapshot
from scheduler.topology import Fabric, load_topology


def snapshot_from(topology: Path, state: Path | None = None, gpus: int = 8) -> Snapshot:
    try:
        spec = load_topology(topology, gpus=gpus)
    except ValidationError as exc:
        raise InputError(describe(exc, str(topology))) from exc
    except TypeError as exc:
        raise InputError(f"{topology}: generate: {exc}") from exc
    snapshot = Snapshot(Fabric(spec))
    return load_state(state, snapshot) if state else snapshot
