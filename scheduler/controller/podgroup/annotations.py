"""What a pod group's members ask for in their annotations: the workers' parallel shape, whether
a pod set joins the gradient ring, and the topology (rackwise's, Kueue's and KAI's words for
required and preferred levels, slices and segments), read into a gang's fields; whatever is
wrong is InvalidSpecError naming the annotation (podgroup/members.py says what each means)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from scheduler.controller.config import OperatorConfig
from scheduler.controller.pods.podspec import InvalidSpecError
from scheduler.controller.runtime.objects import Pod
from scheduler.model import Slice
from scheduler.model.gang import ParallelShape

OURS = "rackwise.io/"
KUEUE = "kueue.x-k8s.io/podset-"
KAI = "kai.scheduler/"
KAI_SEGMENT = KAI + "segment-"
PARALLELISM = OURS + "parallelism"  # the workers' parallel shape: "tp=8,pp=2,dp=4,ep=2"
AXES = ("dp", "tp", "pp", "ep")


def shape(notes: dict[str, str]) -> ParallelShape | None:
    """`rackwise.io/parallelism`: comma-separated `axis=width`, each axis once."""
    text = notes.get(PARALLELISM)
    if text is None:
        return None
    widths: dict[str, int] = {}
    for part in text.split(","):
        axis, _, width = part.strip().partition("=")
        if axis not in AXES or axis in widths or not width.isdigit() or int(width) < 1:
            raise InvalidSpecError(
                f"annotation {PARALLELISM}: {part.strip()!r} is not axis=width with an axis "
                f'of {", ".join(AXES)} (each once) and a positive width; e.g. "tp=8,dp=4"'
            )
        widths[axis] = int(width)
    try:
        return ParallelShape(**widths)
    except ValidationError as exc:
        raise InvalidSpecError(f"annotation {PARALLELISM}: {exc.errors()[0]['msg']}") from exc


def gradients(notes: dict[str, str]) -> bool:
    """`rackwise.io/gradients: "true"`: the pod set is a member of the workers' gradient ring."""
    value = notes.get(OURS + "gradients", "false")
    if value not in ("true", "false"):
        raise InvalidSpecError(f'annotation {OURS}gradients: "true" or "false", not {value!r}')
    return value == "true"


def notes(pod: Pod) -> dict[str, str]:
    """The pod's topology annotations (rackwise's, Kueue's and KAI's segments)."""
    return {
        k: v for k, v in pod.meta.annotations.items() if k.startswith((OURS, KUEUE, KAI_SEGMENT))
    }


def topology(notes: dict[str, str], config: OperatorConfig) -> dict[str, Any]:
    """required_level, preferred_levels, slices and preferred slices from the annotations."""
    by_label = config.levels_by_label()

    def level(ours: str, kueue: str, prefix: str = KUEUE) -> str | None:
        if ours and OURS + ours in notes:
            return _named(notes[OURS + ours], OURS + ours, config)
        if prefix + kueue in notes:
            label = notes[prefix + kueue]
            if label not in by_label:
                raise InvalidSpecError(
                    f"annotation {prefix + kueue}: no level is read from node label {label!r}"
                )
            return by_label[label]
        return None

    required = level("required-level", "required-topology")
    preferred = level("preferred-level", "preferred-topology")
    sliced = level("slice-level", "slice-required-topology")
    size = notes.get(OURS + "slice-size", notes.get(KUEUE + "slice-size"))
    out: dict[str, Any] = {"required_level": required}
    if preferred:
        out["preferred_levels"] = {preferred: 1.0}
    if sliced:
        out["slices"] = (Slice(level=sliced, size=_size(size, "slice-size")),)
    segments = _segments(notes, level)
    if "slices" in out and "slices" in segments:
        raise InvalidSpecError("annotations: give a slice or a required segment, not both")
    return out | segments


def _segments(notes: dict[str, str], level: Any) -> dict[str, Any]:
    """KAI's segment annotations: `kai.scheduler/segment-size` pods per domain of the level
    read from the node label `segment-topology-required-placement` (the group waits) or
    `-preferred-placement` (kept where a placement does)."""
    required = level("", "segment-topology-required-placement", KAI)
    preferred = level("", "segment-topology-preferred-placement", KAI)
    if required is None and preferred is None:
        return {}
    if required is not None and preferred is not None:
        raise InvalidSpecError("annotations: a segment is either required or preferred, not both")
    size = _size(notes.get(KAI + "segment-size"), "segment-size")
    segment = (Slice(level=required or preferred, size=size),)
    return {"slices": segment} if required is not None else {"preferred_slices": segment}


def _size(size: str | None, name: str) -> int:
    if size is None or not size.isdigit() or int(size) < 1:
        raise InvalidSpecError(f"annotation {name}: a positive integer is needed, not {size!r}")
    return int(size)


def _named(name: str, where: str, config: OperatorConfig) -> str:
    if name not in config.level_names:
        names = ", ".join(config.level_names)
        raise InvalidSpecError(f"annotation {where}: unknown level {name!r}; levels are {names}")
    return config.canonical(name)
