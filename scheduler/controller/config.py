"""Operator configuration (the `rackwise-config` ConfigMap's config.yaml)."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from scheduler.topology import LabelKeys


class OperatorConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    labels: LabelKeys = LabelKeys()
    pool_taint_key: str = Field(default="rackwise.io/pool", alias="poolTaintKey")
    gpu_resource: str = Field(default="nvidia.com/gpu", alias="gpuResource")
    scheduler_name: str = Field(default="rackwise", alias="schedulerName")
    solver_time_limit_s: float = Field(default=1.0, gt=0, alias="solverTimeLimitSeconds")
    resync_s: float = Field(default=5.0, gt=0, alias="resyncSeconds")
    api_workers: int = Field(default=16, ge=1, alias="apiWorkers")
    # seconds a gang may wait for a placement inside one spine (0: place greedily)
    compact_wait_s: float = Field(default=0.0, ge=0, alias="compactWaitSeconds")


def load_config(path: Path | None) -> OperatorConfig:
    if path is None:
        return OperatorConfig()
    return OperatorConfig.model_validate(yaml.safe_load(path.read_text()) or {})
