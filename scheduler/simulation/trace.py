"""Trace jobs and their loaders: Philly CSV, Alibaba openb pod list, and rackwise's own format.

rackwise trace format (CSV with a header, or JSONL with the same keys), one job per row:
  id          unique job id (string)
  submit_s    submit time in seconds (float, any origin)
  duration_s  run time in seconds on a compact placement (float > 0)
  gpus        GPUs for the whole gang (int > 0)
  pods        optional: pods in the gang (gpus must divide evenly); default: whole hosts
  pool        optional: training | batch-inference | online-inference (default training)
  priority    optional: int, higher first (default 0)
"""

from __future__ import annotations

import csv
import gzip
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scheduler.model.gang import GangRequest, ParallelShape
from scheduler.model.training import Model
from scheduler.pools import check_pool


class TraceError(ValueError):
    """A malformed row; the message names the file and the line."""


class TraceJob(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str = Field(min_length=1)
    submit_s: float = Field(ge=0)
    duration_s: float = Field(gt=0)
    gpus: int = Field(gt=0)
    pods: int | None = Field(default=None, gt=0)
    pool: str = "training"
    priority: int = 0
    # how it computes and communicates, where the workload says (synthetic.modern_mix): its
    # parallel shape, and the model whose size sets its bytes and compute per step
    shape: ParallelShape | None = None
    model: Model | None = None
    # its communication share of a compact step where the workload states it (the modern
    # mix's debugging and evaluation jobs: 0, compute only); None: drawn from the scenario's
    # range (profiles.CommShare), or set by its model
    comm_share: float | None = Field(default=None, ge=0, le=1)
    # the team that submitted it (Philly: its virtual cluster); a queue of that name owns it
    # (teams.Teams.queue_of)
    tenant: str = Field(default="", max_length=63)

    def gang(self, gpus_per_host: int) -> GangRequest:
        pods = self.pods or pods_for(self.gpus, gpus_per_host)
        return GangRequest(
            name=self.id,
            pods=pods,
            gpus_per_pod=self.gpus // pods,
            pool=self.pool,
            priority=self.priority,
            shape=self.shape,
            model=self.model,
        )


def pods_for(gpus: int, per_host: int) -> int:
    """Whole hosts where possible: the largest pod size <= a host's GPUs that divides the gang."""
    size = next(d for d in range(min(gpus, per_host), 0, -1) if gpus % d == 0)
    return gpus // size


@dataclass
class LoadReport:
    jobs: list[TraceJob]
    bad_rows: int = 0


def load_trace(
    path: Path, fmt: str, skip_bad_rows: bool = False, pool: str | None = None
) -> LoadReport:
    readers = {"philly": _philly, "openb": _openb, "rackwise": _rackwise}
    if fmt not in readers:
        raise TraceError(f"{path}: unknown trace format {fmt!r}; use {', '.join(readers)}")
    report = LoadReport([])
    seen: dict[str, int] = {}  # job id -> the line that gave it
    try:
        for line, row in _rows(path):
            try:
                job = readers[fmt](row, line)
                _once(job, line, seen)
            except (ValueError, KeyError, TypeError, ValidationError) as exc:
                if not skip_bad_rows:
                    raise TraceError(f"{path}:{line}: {_why(exc)}") from exc
                report.bad_rows += 1
                continue
            if job is not None:
                report.jobs.append(job if pool is None else job.model_copy(update={"pool": pool}))
    except OSError as exc:
        raise TraceError(f"{path}: {exc.strerror or exc}") from exc
    report.jobs.sort(key=lambda j: (j.submit_s, j.id))
    return report


def _once(job: TraceJob | None, line: int, seen: dict[str, int]) -> None:
    """A job id names one job: a second one would be taken for the first (its hosts never
    given back)."""
    if job is None:
        return
    first = seen.setdefault(job.id, line)
    if first != line:
        raise ValueError(f"id {job.id!r} is already the job of line {first}")


def _why(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        return f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
    if isinstance(exc, KeyError):
        return f"missing column {exc}"
    return str(exc)


def _open(path: Path) -> TextIO:
    """A trace file, gzip-compressed (`.csv.gz`, `.jsonl.gz`) or not."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", newline="")
    return path.open(newline="")


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    inner = Path(path.stem) if path.suffix == ".gz" else path
    with _open(path) as handle:
        if inner.suffix == ".jsonl":
            for line, text in enumerate(handle, start=1):
                if text.strip():
                    try:
                        yield line, json.loads(text)
                    except json.JSONDecodeError as exc:
                        yield line, {"__error__": f"not JSON ({exc.msg})"}
            return
        for line, row in enumerate(csv.DictReader(handle), start=2):
            yield line, row


_EPOCH = datetime(2017, 1, 1)


def _philly(row: dict[str, Any], line: int) -> TraceJob:
    submitted = datetime.strptime(row["timestamp"], "%Y-%m-%d %H:%M:%S")
    return TraceJob(
        id=f"philly-{line}",
        submit_s=(submitted - _EPOCH).total_seconds(),
        duration_s=max(float(row["duration"]), 1.0),
        gpus=int(row["num_gpus"]),
        tenant=row.get("cluster") or "",
    )


def _openb(row: dict[str, Any], _line: int) -> TraceJob | None:
    """LS pods serve online inference, BE pods batch inference; others and CPU-only pods are
    not GPU inference work and are skipped. Shared GPUs (gpu_milli < 1000) take a whole GPU."""
    pool = {"LS": "online-inference", "BE": "batch-inference"}.get(row["qos"])
    gpus = int(row["num_gpu"])
    if pool is None or gpus == 0:
        return None
    start = float(row["scheduled_time"] or row["creation_time"])
    return TraceJob(
        id=row["name"],
        submit_s=float(row["creation_time"]),
        duration_s=max(float(row["deletion_time"]) - start, 1.0),
        gpus=gpus,
        pods=1,
        pool=pool,
    )


def _rackwise(row: dict[str, Any], _line: int) -> TraceJob:
    if "__error__" in row:
        raise ValueError(row["__error__"])
    data = {k: v for k, v in row.items() if v not in ("", None)}
    job = TraceJob.model_validate(data)
    check_pool(job.pool)
    if job.pods is not None and job.gpus % job.pods:
        raise ValueError(f"gpus={job.gpus} does not divide into pods={job.pods}")
    return job


def transform(
    jobs: list[TraceJob],
    start_s: float | None = None,
    days: float | None = None,
    scale: int = 1,
    load: float = 1.0,
    limit: int | None = None,
    max_duration_s: float | None = None,
) -> list[TraceJob]:
    """Time window (from `start_s` after the first job, `days` long), gang size x `scale`,
    arrivals compressed by `load` (2.0 = twice as many per hour), at most `limit` jobs, run
    times clipped to `max_duration_s`; submit times restart at zero."""
    if not jobs:
        return []
    origin = jobs[0].submit_s + (start_s or 0.0)
    end = origin + days * 86400 if days else float("inf")
    chosen = [j for j in jobs if origin <= j.submit_s < end][: limit or None]
    if not chosen:
        return []
    first = chosen[0].submit_s
    return [
        j.model_copy(
            update={
                "submit_s": (j.submit_s - first) / load,
                "duration_s": min(j.duration_s, max_duration_s or j.duration_s),
                "gpus": j.gpus * scale,
                "pods": j.pods * scale if j.pods else None,
            }
        )
        for j in chosen
    ]


def jitter(jobs: list[TraceJob], seed: int, minutes: float) -> list[TraceJob]:
    """Every arrival moved by up to +-`minutes` (seeded): one trace, several comparable draws."""
    if not minutes:
        return jobs
    rng = random.Random(f"jitter/{seed}")
    moved = [
        j.model_copy(update={"submit_s": max(0.0, j.submit_s + rng.uniform(-1, 1) * minutes * 60)})
        for j in jobs
    ]
    return sorted(moved, key=lambda j: (j.submit_s, j.id))


def tag(jobs: list[TraceJob], prefix: str) -> list[TraceJob]:
    """Prefix ids so jobs from several traces never collide."""
    return [replace_id(j, f"{prefix}{j.id}") for j in jobs]


def replace_id(job: TraceJob, new: str) -> TraceJob:
    return job.model_copy(update={"id": new})


__all__ = ["LoadReport", "TraceError", "TraceJob", "load_trace", "tag", "transform"]
