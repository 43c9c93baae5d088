"""Node constraints a gang carries and hosts answer: taints and tolerations, nodeSelector and
required node affinity, with Kubernetes' own matching rules.

Contract: `NodeConstraints.admits(host)` says whether one pod of the gang may run on the host,
judged only on labels and taints (capacity is the snapshot's business). It promises the same
answer kube-scheduler's NodeAffinity and TaintToleration filters give for the same objects:
every label in the selector must match; at least one affinity term must match, every
requirement of that term holding; every NoSchedule and NoExecute taint must be tolerated
(PreferNoSchedule never blocks)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class MatchOperator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


class TolerationOperator(StrEnum):
    EQUAL = "Equal"
    EXISTS = "Exists"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Taint(_Frozen):
    key: str = Field(min_length=1)
    value: str = ""
    effect: TaintEffect


class Toleration(_Frozen):
    key: str = ""  # empty with Exists: tolerates every taint
    operator: TolerationOperator = TolerationOperator.EQUAL
    value: str = ""
    effect: TaintEffect | None = None  # None: every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.operator is TolerationOperator.EXISTS:
            return self.key in ("", taint.key)
        return self.key == taint.key and self.value == taint.value


class Requirement(_Frozen):
    key: str = Field(min_length=1)
    operator: MatchOperator
    values: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _arity(self) -> Requirement:
        op, n = self.operator, len(self.values)
        if op in (MatchOperator.IN, MatchOperator.NOT_IN) and n == 0:
            raise ValueError(f"operator {op.value} needs at least one value")
        if op in (MatchOperator.EXISTS, MatchOperator.DOES_NOT_EXIST) and n:
            raise ValueError(f"operator {op.value} takes no values")
        ordered = op in (MatchOperator.GT, MatchOperator.LT)
        if ordered and (n != 1 or not _is_int(self.values[0])):
            raise ValueError(f"operator {op.value} needs exactly one integer value")
        return self

    def matches(self, labels: dict[str, str]) -> bool:
        value = labels.get(self.key)
        match self.operator:
            case MatchOperator.IN:
                return value in self.values
            case MatchOperator.NOT_IN:
                return value not in self.values
            case MatchOperator.EXISTS:
                return value is not None
            case MatchOperator.DOES_NOT_EXIST:
                return value is None
        # Gt / Lt compare integers; a missing or non-integer label never matches
        if value is None or not _is_int(value):
            return False
        limit = int(self.values[0])
        return int(value) > limit if self.operator is MatchOperator.GT else int(value) < limit


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


BLOCKING = (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)


class NodeConstraints(_Frozen):
    selector: tuple[tuple[str, str], ...] = ()
    # required node affinity: OR over terms, AND within a term; empty means no affinity
    affinity: tuple[tuple[Requirement, ...], ...] = ()
    tolerations: tuple[Toleration, ...] = ()

    @property
    def label_keys(self) -> tuple[str, ...]:
        """The node labels whose values decide `admits` (with the taints): nothing else does."""
        keys = [k for k, _ in self.selector] + [r.key for t in self.affinity for r in t]
        return tuple(dict.fromkeys(keys))

    def admits(self, labels: dict[str, str], taints: tuple[Taint, ...]) -> bool:
        if any(labels.get(k) != v for k, v in self.selector):
            return False
        # an empty term matches no node, as in Kubernetes
        if self.affinity and not any(
            t and all(r.matches(labels) for r in t) for t in self.affinity
        ):
            return False
        return all(self.tolerated(t) for t in taints if t.effect in BLOCKING)

    def tolerated(self, taint: Taint) -> bool:
        return any(t.tolerates(taint) for t in self.tolerations)
