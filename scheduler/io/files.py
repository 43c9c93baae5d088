"""User files: gangs (YAML list of gang requests) and state (usage already on the hosts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scheduler.model.gang import GangRequest
from scheduler.placement.snapshot import Snapshot
from scheduler.pools import check_pool


class InputError(ValueError):
    """Unusable input: the message names the file and the field, fit for one line."""


def describe(exc: ValidationError, source: str) -> str:
    """First pydantic error as `source: field.path: message`."""
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(top level)"
    return f"{source}: {where}: {err['msg']}"


def load_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not a text file (byte {exc.start} is not UTF-8)") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{path}:{line} not valid YAML") from exc


class HostUsage(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    host: str
    gpus: int = Field(default=0, ge=0)
    cpu_milli: int = Field(default=0, ge=0)
    memory_mib: int = Field(default=0, ge=0)


class StateFile(BaseModel):
    """Capacity already taken: `used` per host, and hosts that are `down`."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    used: list[HostUsage] = Field(default_factory=list)
    down: list[str] = Field(default_factory=list)


def load_gangs(path: Path) -> list[GangRequest]:
    data = load_yaml(path)
    items = data.get("gangs") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise InputError(f"{path}: expected a list of gangs (or a mapping with 'gangs')")
    gangs = []
    for i, item in enumerate(items):
        try:
            gang = GangRequest.model_validate(item)
            check_pool(gang.pool)
        except ValidationError as exc:
            raise InputError(describe(exc, f"{path}: gangs[{i}]")) from exc
        except ValueError as exc:
            raise InputError(f"{path}: gangs[{i}].pool: {exc}") from exc
        gangs.append(gang)
    names = [g.name for g in gangs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(f"{path}: duplicate gang names {dupes}")
    return gangs


def load_state(path: Path, snapshot: Snapshot) -> Snapshot:
    try:
        state = StateFile.model_validate(load_yaml(path) or {})
    except ValidationError as exc:
        raise InputError(describe(exc, str(path))) from exc
    index = snapshot.fabric.host_index
    out = snapshot.copy()
    for i, use in enumerate(state.used):
        if use.host not in index:
            raise InputError(f"{path}: used[{i}].host: unknown host {use.host!r}")
        h = index[use.host]
        if use.gpus > out.free_gpus[h]:
            raise InputError(f"{path}: used[{i}].gpus: {use.host} has {out.free_gpus[h]} free")
        out.use(use.host, use.gpus, use.cpu_milli, use.memory_mib)
    for i, host in enumerate(state.down):
        if host not in index:
            raise InputError(f"{path}: down[{i}]: unknown host {host!r}")
        out.down.add(index[host])
    return out
