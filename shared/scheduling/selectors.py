"""Label selectors and node selectors, as the API server and kube-scheduler read them.

- A :class:`~shared.kube.affinity.LabelSelector` matches when every ``matchLabels`` pair and
  every ``matchExpressions`` requirement (In, NotIn, Exists, DoesNotExist) holds; an empty
  selector matches everything (a missing one, ``None``, is the caller's business).
- A :class:`~shared.kube.affinity.NodeSelector` matches when any of its terms does; a term
  matches when all its ``matchExpressions`` (In, NotIn, Exists, DoesNotExist, Gt, Lt) and
  ``matchFields`` (only ``metadata.name``, with In or NotIn) hold; an empty term matches nothing.
- A pod fits a node's labels (:func:`pod_matches_node`) when its ``spec.nodeSelector`` pairs
  all hold and its required node affinity, if any, matches (kube-scheduler's NodeAffinity).

Each requirement is matched by :func:`shared.scheduling.labels.requirement_holds`.
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.kube.affinity import (
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
)
from shared.scheduling.labels import LABEL_SELECTOR_OPERATORS, OPERATORS, requirement_holds


def label_requirement_matches(req: LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    op = OPERATORS.get(req.operator)
    if op not in LABEL_SELECTOR_OPERATORS:
        return False  # Gt and Lt are not valid in a label selector; unknown operators never match
    return requirement_holds(op, req.key, req.values, labels)


def label_selector_matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy ``selector`` (an empty selector matches everything)."""
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    return all(label_requirement_matches(req, labels) for req in selector.match_expressions)


def node_requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    op = OPERATORS.get(req.operator)
    return op is not None and requirement_holds(op, req.key, req.values, labels)


def _field_matches(req: NodeSelectorRequirement, node_name: str) -> bool:
    if req.key != "metadata.name":
        return False
    if req.operator == "In":
        return node_name in req.values
    if req.operator == "NotIn":
        return node_name not in req.values
    return False


def node_term_matches(term: NodeSelectorTerm, *, name: str, labels: Mapping[str, str]) -> bool:
    if not term.match_expressions and not term.match_fields:
        return False
    return all(node_requirement_matches(req, labels) for req in term.match_expressions) and all(
        _field_matches(req, name) for req in term.match_fields
    )


def node_selector_matches(selector: NodeSelector, *, name: str, labels: Mapping[str, str]) -> bool:
    """Whether the node ``name`` with ``labels`` satisfies any term of ``selector``."""
    return any(
        node_term_matches(term, name=name, labels=labels) for term in selector.node_selector_terms
    )


def pod_matches_node(
    node_selector: Mapping[str, str],
    required: NodeSelector | None,
    *,
    name: str,
    labels: Mapping[str, str],
) -> bool:
    """``spec.nodeSelector`` and required node affinity, both of which must hold."""
    for key, value in node_selector.items():
        if labels.get(key) != value:
            return False
    return required is None or node_selector_matches(required, name=name, labels=labels)
