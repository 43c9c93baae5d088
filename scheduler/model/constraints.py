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
EVERY_TAINT = Toleration(operator=TolerationOperator.EXISTS)


class PodRule(Requirement):
    """A node requirement that stands for a required pod (anti-)affinity term against pods
    already running: the domains (values of the topology key) holding pods the term's selector
    matches are the only ones allowed (In) or the ones ruled out (NotIn). It changes as pods
    come and go, so it never makes a gang NeverFits; `name` is the term a message names."""

    name: str = ""


class NodeConstraints(_Frozen):
    selector: tuple[tuple[str, str], ...] = ()
    # required node affinity: OR over terms, AND within a term; empty means no affinity
    affinity: tuple[tuple[Requirement, ...], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    # every one must hold (AND): pod (anti-)affinity with the pods running now
    pod_rules: tuple[PodRule, ...] = ()
    # preferred node affinity: (weight, term); a host scores the weights of the terms it
    # matches. Never decides `admits`: a tie-break among placements of equal cost
    preferred: tuple[tuple[int, tuple[Requirement, ...]], ...] = ()

    def score(self, labels: dict[str, str]) -> int:
        """The summed weights of the preferred terms the labels match (an empty term: none)."""
        return sum(w for w, t in self.preferred if t and all(r.matches(labels) for r in t))

    @property
    def label_keys(self) -> tuple[str, ...]:
        """The node labels whose values decide `admits` (with the taints): nothing else does."""
        keys = [k for k, _ in self.selector] + [r.key for t in self.affinity for r in t]
        keys += [r.key for r in self.pod_rules]
        return tuple(dict.fromkeys(keys))

    def ignoring_taints(self) -> NodeConstraints:
        """The same label rules, every taint tolerated: the hosts whose labels admit a pod (the
        domains topology spread counts, as kube-scheduler's default nodeTaintsPolicy: Ignore)."""
        return self.model_copy(update={"tolerations": (EVERY_TAINT,)})

    def static(self) -> NodeConstraints:
        """What holds whatever else runs: without the pod rules."""
        return self.model_copy(update={"pod_rules": ()}) if self.pod_rules else self

    def admits(self, labels: dict[str, str], taints: tuple[Taint, ...]) -> bool:
        if any(labels.get(k) != v for k, v in self.selector):
            return False
        if not all(r.matches(labels) for r in self.pod_rules):
            return False
        # an empty term matches no node, as in Kubernetes
        if self.affinity and not any(
            t and all(r.matches(labels) for r in t) for t in self.affinity
        ):
            return False
        return all(self.tolerated(t) for t in taints if t.effect in BLOCKING)

    def tolerated(self, taint: Taint) -> bool:
        return any(t.tolerates(taint) for t in self.tolerations)


class Spread(_Frozen):
    """A topology spread constraint over the gang's own pods (Kubernetes'
    topologySpreadConstraints with `whenUnsatisfiable: DoNotSchedule`), resolved: the domains
    are the values of the node label `key`; `counts` says how many pods its selector matches
    already run in each (others: none). A placement keeps, over every domain of a host the gang
    may use, max(count) - min(count) <= max_skew once its pods are added; with fewer such
    domains than `min_domains`, the minimum is taken as 0 (as kube-scheduler does)."""

    key: str = Field(min_length=1)
    max_skew: int = Field(ge=1)
    counts: tuple[tuple[str, int], ...] = ()
    min_domains: int | None = Field(default=None, ge=1)
    name: str = ""  # what a message calls it (the field it came from)

    def skew(self, totals: dict[str, int]) -> int:
        """max - min over the domains given (every eligible one, with its count after)."""
        if not totals:
            return 0
        low = min(totals.values())
        if self.min_domains is not None and len(totals) < self.min_domains:
            low = 0
        return max(totals.values()) - low
