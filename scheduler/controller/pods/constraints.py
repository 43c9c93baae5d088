"""Node constraints of a gang's pods from their spec (nodeSelector, required node affinity,
tolerations) plus the pool's selector and toleration; and the pool check both kinds share."""

from __future__ import annotations

from scheduler.controller.config import OperatorConfig
from scheduler.controller.pods.podspec import InvalidSpecError, NodeSelectorTerm, PodSpec
from scheduler.model.constraints import (
    MatchOperator,
    NodeConstraints,
    Requirement,
    TaintEffect,
    Toleration,
    TolerationOperator,
)


def known_pool(pool: str, where: str, config: OperatorConfig) -> None:
    """InvalidSpecError, naming `where`, unless `pool` is one of the operator's pools."""
    if pool not in config.pool_names:
        names = ", ".join(config.pool_names)
        raise InvalidSpecError(f"{where}: unknown pool {pool!r}; pools are {names}")


def constraints(
    pod: PodSpec, pool: str, config: OperatorConfig, tolerate_lenders: bool = True
) -> NodeConstraints:
    """The template's nodeSelector, required node affinity and tolerations, plus the pool's
    selector and toleration the operator adds to every pod. A pool that borrows (config
    `lenders_to`) asks for its pool or a lender's (`In`) instead of its own; its pods tolerate
    the lenders' taints when the operator adds them (`tolerate_lenders`: TrainingJobs' pods,
    which it makes; a pod group's pods only where they tolerate them already)."""
    policy = config.pools
    lenders = config.lenders_to(pool)
    selector = {**pod.node_selector, **({} if lenders else policy.node_selector(pool))}
    required = pod.affinity.node_affinity if pod.affinity else None
    terms = required.required_during_scheduling_ignored_during_execution if required else None
    affinity = tuple(_term(term) for term in (terms.node_selector_terms if terms else []))
    liked = required.preferred_during_scheduling_ignored_during_execution if required else []
    preferred = tuple((p.weight, _term(p.preference)) for p in liked)
    if lenders:
        anywhere = Requirement(
            key=policy.label_key, operator=MatchOperator.IN, values=(pool, *lenders)
        )
        affinity = tuple((*term, anywhere) for term in affinity) or ((anywhere,),)
    own = Toleration(key=policy.taint_key, value=pool, effect=TaintEffect.NO_SCHEDULE)
    added = [own] + [
        Toleration(key=policy.taint_key, value=p, effect=TaintEffect.NO_SCHEDULE)
        for p in (lenders if tolerate_lenders else ())
    ]
    tolerations = (
        *(
            Toleration(
                key=t.key,
                operator=TolerationOperator(t.operator),
                value=t.value,
                effect=TaintEffect(t.effect) if t.effect else None,
            )
            for t in pod.tolerations
        ),
        *added,
    )
    return NodeConstraints(
        selector=tuple(sorted(selector.items())),
        affinity=affinity,
        tolerations=tolerations,
        preferred=preferred,
    )


def _term(term: NodeSelectorTerm) -> tuple[Requirement, ...]:
    return tuple(
        Requirement(key=r.key, operator=MatchOperator(r.operator), values=tuple(r.values))
        for r in term.match_expressions
    )


def check_pool_selector(
    selector: dict[str, str], pool_label: str, pool: str, where: str, pool_from: str
) -> None:
    """A pod's own nodeSelector on the pool label must agree with its pool: rackwise would
    otherwise bind it where it did not ask to go."""
    chosen = selector.get(pool_label)
    if chosen not in (None, pool):
        raise InvalidSpecError(
            f"{where}.nodeSelector.{pool_label}: {chosen!r} contradicts {pool_from} {pool!r}"
        )
