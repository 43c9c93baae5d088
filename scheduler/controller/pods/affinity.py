"""Required pod affinity, pod anti-affinity and topology spread, read from a gang's pods and
resolved against the pods running now into what the placement core enforces.

Contract. `resolve` takes a waiting gang (its GangRequest and its pods in rank order), every
pod the cluster runs and the fabric (node labels), and returns the gang with:
- for each `podAffinity` / `podAntiAffinity` required term whose selector matches pods of
  others: a node rule (model/constraints.PodRule) that only the domains of the term's
  `topologyKey` holding such pods are allowed (affinity) or none of them is (anti-affinity);
  the required anti-affinity of running pods whose terms match the gang's pods, the same way
  (the rule is symmetric, as in kube-scheduler's InterPodAffinity);
- for a term whose selector matches the gang's own pods: affinity with nothing else matching
  puts the whole gang in one domain of the key's level (its required level); anti-affinity
  allows one pod per domain (per host on the hostname, per rack on the rack level);
- each `topologySpreadConstraints` entry with `whenUnsatisfiable: DoNotSchedule`: a spread
  rule with the matching pods each domain holds (model/constraints.Spread) when it counts the
  gang's own pods, else a rule that keeps the gang off domains already too skewed.
Selectors are Kubernetes label selectors (`matchLabels`, `matchExpressions`), with
`matchLabelKeys` / `mismatchLabelKeys`; a term covers its `namespaces`, all of them with an
empty `namespaceSelector`, else the pod's own. Preferred terms and `ScheduleAnyway` are
scoring in kube-scheduler and are not read. Promises: what it cannot honour it does not ignore:
an InvalidSpecError names the field (a namespaceSelector with labels, a key that is no level
for a gang-wide rule, a policy other than the default). Pods on nodes outside the fabric are
not seen (their domains are unknown)."""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.controller.config import OperatorConfig
from scheduler.controller.pods.podspec import InvalidSpecError
from scheduler.controller.runtime.objects import Pod
from scheduler.model import GangRequest
from scheduler.model.constraints import MatchOperator, PodRule, Requirement, Spread
from scheduler.model.topology import Tier
from scheduler.topology import Fabric
from scheduler.topology.sources import HOSTNAME

Obj = dict[str, Any]
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
SPREAD = "topologySpreadConstraints"
NOWHERE = "no-pod-matches"  # a label value no domain has: an affinity nothing satisfies yet


@dataclass(frozen=True)
class Term:
    """One required pod (anti-)affinity term, parsed: the field it came from, its topology key,
    its selector and the namespaces it covers (None: all)."""

    field: str
    key: str
    selector: tuple[Requirement, ...] | None  # None matches no pod (a null selector)
    namespaces: frozenset[str] | None

    def matches(self, pod: Pod) -> bool:
        if self.selector is None:
            return False
        if self.namespaces is not None and pod.meta.namespace not in self.namespaces:
            return False
        labels = dict(pod.meta.labels)
        return all(r.matches(labels) for r in self.selector)


def guards(pod: Pod) -> bool:
    """Does a running pod carry required anti-affinity (which other gangs must respect)?"""
    affinity = pod.spec.get("affinity") or {}
    return bool((affinity.get("podAntiAffinity") or {}).get(REQUIRED))


def has_terms(pod: Pod) -> bool:
    """Does the pod carry anything `resolve` reads (cheap: most pods carry none)?"""
    affinity = pod.spec.get("affinity") or {}
    return bool(
        pod.spec.get("topologySpreadConstraints")
        or (affinity.get("podAffinity") or {}).get(REQUIRED)
        or (affinity.get("podAntiAffinity") or {}).get(REQUIRED)
    )


@dataclass(frozen=True)
class Scene:
    """What one gang's terms are resolved against: one of its pods, the pods running, where
    each node sits (its labels), the fabric and the operator's levels."""

    pod: Pod
    running: Sequence[Pod]
    where: dict[str, dict[str, str]]
    fabric: Fabric
    config: OperatorConfig

    def values(self, term: Term) -> list[str]:
        """The values of the term's key on the nodes of the running pods it matches."""
        return sorted(self.on(term))

    def on(self, term: Term) -> Counter[str]:
        """Running pods the term matches, per value of its key on their nodes."""
        where = self.where
        return Counter(
            labels[term.key]
            for p in self.running
            if p.node in where and term.key in (labels := where[p.node]) and term.matches(p)
        )

    def level(self, term: Term, what: str) -> str:
        """The fabric's level the term's key names, for a rule on the whole gang."""
        level = self.config.levels_by_label().get(term.key)
        if level is None:
            raise InvalidSpecError(
                f"{term.field}.topologyKey: {what} needs a level the operator reads; no level "
                f"is read from node label {term.key!r}"
            )
        return level


def resolve(
    gang: GangRequest,
    pod: Pod,
    running: Sequence[Pod],
    fabric: Fabric,
    config: OperatorConfig,
    guarded: Sequence[Pod] = (),
) -> GangRequest:
    """The gang with its workers' pod terms (`pod` is one of them) and the running pods'
    anti-affinity against them in force; `running`: pods bound to nodes, not finished;
    `guarded`: those of them with required anti-affinity (`guards`)."""
    scene = Scene(pod, running, _domains(fabric), fabric, config)
    rules: list[PodRule] = []
    update: dict[str, Any] = {}
    for term in terms(pod, "podAffinity"):
        rules += _affinity(scene, term, update)
    for term in terms(pod, "podAntiAffinity"):
        rules += _anti(scene, term, update)
    rules += _their_anti(pod, guarded, scene.where)
    spread = []
    for i, entry in enumerate(_list(pod.spec.get("topologySpreadConstraints"), SPREAD)):
        found = _spread(scene, entry, f"spec.{SPREAD}[{i}]")
        if isinstance(found, Spread):
            spread.append(found)
        elif found is not None:
            rules.append(found)
    constraints = gang.constraints
    if rules:
        constraints = constraints.model_copy(update={"pod_rules": tuple(rules)})
    asked = update.get("required_level")
    if asked is not None and gang.required_level in fabric.levels:  # the narrower of the two
        update["required_level"] = min(asked, gang.required_level, key=fabric.index)
    return gang.model_copy(update={**update, "constraints": constraints, "spread": tuple(spread)})


def _domains(fabric: Fabric) -> dict[str, dict[str, str]]:
    """node name -> its labels (the fabric's hosts), made once per fabric."""
    kept = _LAST.get("fabric")
    if kept is None or kept[0]() is not fabric:
        labels = {h.name: dict(h.labels) | {HOSTNAME: h.name} for h in fabric.hosts}
        kept = _LAST["fabric"] = (weakref.ref(fabric), labels)
    return kept[1]


# the last fabric's node labels: the operator's fabric changes only when nodes do
_LAST: dict[str, tuple[weakref.ref[Fabric], dict[str, dict[str, str]]]] = {}


def _rule(term: Term, operator: MatchOperator, values: Sequence[str]) -> PodRule:
    return PodRule(key=term.key, operator=operator, values=tuple(values), name=term.field)


def _affinity(scene: Scene, term: Term, update: dict[str, Any]) -> list[PodRule]:
    values = scene.values(term)
    if values:
        return [_rule(term, MatchOperator.IN, values)]
    if term.matches(scene.pod):  # the first of its kind: the gang together, in one domain
        update["required_level"] = scene.level(term, "podAffinity with the gang's own pods")
        return []
    return [_rule(term, MatchOperator.IN, (NOWHERE,))]


def _anti(scene: Scene, term: Term, update: dict[str, Any]) -> list[PodRule]:
    if term.matches(scene.pod):  # one of the gang's pods per domain
        level = scene.level(term, "podAntiAffinity with the gang's own pods")
        levels = scene.fabric.levels
        if level == levels[Tier.HOST]:
            update["max_pods_per_host"] = 1
        elif level == levels[Tier.RACK]:
            update["max_pods_per_rack"] = 1
        else:
            raise InvalidSpecError(
                f"{term.field}.topologyKey: one pod of the gang per {level} is not supported "
                f"(per {levels[Tier.HOST]} and per {levels[Tier.RACK]} are)"
            )
    values = scene.values(term)
    return [_rule(term, MatchOperator.NOT_IN, values)] if values else []


def _their_anti(
    pod: Pod, guarded: Sequence[Pod], where: dict[str, dict[str, str]]
) -> list[PodRule]:
    """Running pods whose required anti-affinity matches the gang's pods keep it off their
    domains (kube-scheduler checks both sides)."""
    out: dict[str, set[str]] = {}
    for other in guarded:
        if other.node not in where:
            continue
        try:
            theirs = terms(other, "podAntiAffinity")
        except InvalidSpecError:  # their own spec's problem, reported on their gang
            continue
        for term in theirs:
            labels = where[other.node]
            if term.matches(pod) and term.key in labels:
                out.setdefault(term.key, set()).add(labels[term.key])
    return [
        PodRule(
            key=key,
            operator=MatchOperator.NOT_IN,
            values=tuple(sorted(values)),
            name=f"required anti-affinity of running pods (topologyKey {key})",
        )
        for key, values in sorted(out.items())
    ]


def _spread(scene: Scene, entry: Obj, field: str) -> Spread | PodRule | None:
    """One topologySpreadConstraints entry: a spread of the gang's pods where they count, a rule
    off the too-skewed domains where they do not, nothing for ScheduleAnyway (scoring)."""
    if entry.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
        return None
    skew, least = _spread_numbers(entry, field)
    term = _term(entry, field, scene.pod, spread=True)
    counts = scene.on(term)
    if term.matches(scene.pod):
        placed = tuple(sorted(counts.items()))
        return Spread(key=term.key, max_skew=skew, counts=placed, min_domains=least, name=field)
    hosts = scene.fabric.hosts
    domains = {h.labels[term.key] for h in hosts if term.key in h.labels}
    few = least is not None and len(domains) < least
    low = 0 if few else min((counts[d] for d in domains), default=0)
    too = sorted(d for d in domains if counts[d] - low > skew)
    return _rule(term, MatchOperator.NOT_IN, too) if too else None


def _spread_numbers(entry: Obj, field: str) -> tuple[int, int | None]:
    """maxSkew and minDomains, checked; the policies rackwise honours only at their defaults."""
    for policy, default in (("nodeAffinityPolicy", "Honor"), ("nodeTaintsPolicy", "Ignore")):
        if entry.get(policy, default) != default:
            raise InvalidSpecError(f"{field}.{policy}: only {default} (the default) is supported")
    skew, least = entry.get("maxSkew"), entry.get("minDomains")
    if not isinstance(skew, int) or skew < 1:
        raise InvalidSpecError(f"{field}.maxSkew: a whole number >= 1 is needed")
    if least is not None and (not isinstance(least, int) or least < 1):
        raise InvalidSpecError(f"{field}.minDomains: a whole number >= 1 is needed")
    return skew, least


def terms(pod: Pod, kind: str) -> list[Term]:
    """The pod's required terms of one kind (podAffinity or podAntiAffinity), parsed."""
    affinity = pod.spec.get("affinity") or {}
    part = affinity.get(kind) or {}
    base = f"spec.affinity.{kind}.{REQUIRED}"
    found = _list(part.get(REQUIRED) if isinstance(part, dict) else None, base)
    return [_term(t, f"{base}[{i}]", pod) for i, t in enumerate(found)]


def _list(value: object, field: str) -> list[Obj]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise InvalidSpecError(f"{field}: a list of objects is needed")
    return value


def _term(raw: Obj, field: str, pod: Pod, spread: bool = False) -> Term:
    key = raw.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise InvalidSpecError(f"{field}.topologyKey: a node label key is needed")
    selector = _selector(raw.get("labelSelector"), f"{field}.labelSelector")
    if selector is not None:
        labels = pod.meta.labels
        for name, op in (
            ("matchLabelKeys", MatchOperator.IN),
            ("mismatchLabelKeys", MatchOperator.NOT_IN),
        ):
            for label in _strings(raw.get(name), f"{field}.{name}"):
                if label in labels:
                    selector += (Requirement(key=label, operator=op, values=(labels[label],)),)
    if spread:
        return Term(field, key, selector, frozenset({pod.meta.namespace}))
    return Term(field, key, selector, _namespaces(raw, field, pod))


def _namespaces(raw: Obj, field: str, pod: Pod) -> frozenset[str] | None:
    listed = _strings(raw.get("namespaces"), f"{field}.namespaces")
    chosen = raw.get("namespaceSelector")
    if chosen is not None:
        if chosen != {}:
            raise InvalidSpecError(
                f"{field}.namespaceSelector: only the empty selector (every namespace) is "
                "supported; list the namespaces in `namespaces`"
            )
        return None
    return frozenset(listed) if listed else frozenset({pod.meta.namespace})


def _selector(raw: object, field: str) -> tuple[Requirement, ...] | None:
    """A label selector's requirements (ANDed); None for a null selector (matches nothing)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise InvalidSpecError(f"{field}: an object is needed")
    out = [
        Requirement(key=str(k), operator=MatchOperator.IN, values=(str(v),))
        for k, v in (raw.get("matchLabels") or {}).items()
    ]
    for i, expr in enumerate(_list(raw.get("matchExpressions"), f"{field}.matchExpressions")):
        try:
            op = MatchOperator(str(expr.get("operator")))
            if op in (MatchOperator.GT, MatchOperator.LT):
                raise ValueError("Gt and Lt are node selector operators")
            values = tuple(str(v) for v in expr.get("values") or ())
            out.append(Requirement(key=str(expr.get("key") or ""), operator=op, values=values))
        except ValueError as exc:
            raise InvalidSpecError(f"{field}.matchExpressions[{i}]: {exc}") from exc
    return tuple(out)


def _strings(value: object, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidSpecError(f"{field}: a list of strings is needed")
    return value


@dataclass(frozen=True)
class Running:
    """The pods bound and not finished, and those of them with required anti-affinity (which
    other gangs must respect): made once a cycle, read by every gang's terms."""

    pods: Sequence[Pod] = ()
    guarded: Sequence[Pod] = ()

    @classmethod
    def of(cls, pods: Sequence[Pod]) -> Running:
        bound = [p for p in pods if p.node and not p.done]
        return cls(bound, [p for p in bound if guards(p)])


def resolve_gang(
    gang: GangRequest,
    pods: Sequence[Pod],
    now: Running,
    fabric: Fabric,
    config: OperatorConfig,
) -> GangRequest:
    """`resolve` for the workers (pods[0]) and each role (its first pod, after the workers in
    rank order): a role takes the node rules; its affinity with the gang's own pods holds it in
    the workers' domain when that is the gang's required level; a role's own spread or
    anti-affinity with itself is refused (its pods are placed near the workers)."""
    running, guarded = now.pods, now.guarded
    if has_terms(pods[0]) or guarded:
        gang = resolve(gang, pods[0], running, fabric, config, guarded)
    first, roles = gang.pods, []
    for role in gang.roles:
        pod, first = pods[first], first + role.pods
        if not has_terms(pod) and not guarded:
            roles.append(role)
            continue
        alone = GangRequest(name=gang.name, pods=role.pods, constraints=role.constraints)
        found = resolve(alone, pod, running, fabric, config, guarded)
        if found.spread or found.max_pods_per_host or found.max_pods_per_rack:
            raise InvalidSpecError(
                f"pod set {role.name}: topology spread or anti-affinity with its own pods is "
                "supported for the workers only"
            )
        joined = found.required_level is None or found.required_level == gang.required_level
        if not joined:
            raise InvalidSpecError(
                f"pod set {role.name}: its podAffinity asks one {found.required_level}, the "
                f"workers' {gang.required_level}"
            )
        update = {"constraints": found.constraints}
        roles.append(
            role.model_copy(update=update | ({"in_group": True} if found.required_level else {}))
        )
    return gang.model_copy(update={"roles": tuple(roles)})
