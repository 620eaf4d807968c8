"""Label selectors and node selectors, as the API server and kube-scheduler read them.

- A :class:`~sim.scheduler.objects.LabelSelector` matches when every ``matchLabels`` pair and
  every ``matchExpressions`` requirement (In, NotIn, Exists, DoesNotExist) holds; an empty
  selector matches everything (a missing one, ``None``, is the caller's business).
- A :class:`~sim.scheduler.objects.NodeSelector` matches when any of its terms does; a term
  matches when all its ``matchExpressions`` (In, NotIn, Exists, DoesNotExist, Gt, Lt) and
  ``matchFields`` (only ``metadata.name``, with In or NotIn) hold; an empty term matches nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from sim.scheduler.objects import (
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
)


def _requirement(
    operator: str, key: str, values: tuple[str, ...], labels: Mapping[str, str]
) -> bool:
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt"):
        # Both sides must be integers; anything else does not match, as in Kubernetes.
        if key not in labels or len(values) != 1:
            return False
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if operator == "Gt" else have < want
    return False


def label_requirement_matches(req: LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    if req.operator in ("Gt", "Lt"):
        return False  # not valid in a label selector
    return _requirement(req.operator, req.key, req.values, labels)


def label_selector_matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy ``selector`` (an empty selector matches everything)."""
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    return all(label_requirement_matches(req, labels) for req in selector.match_expressions)


def node_requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    return _requirement(req.operator, req.key, req.values, labels)


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


def node_name_selector(name: str) -> NodeSelector:
    """The selector kube-scheduler writes into a claim allocated on one node."""
    return NodeSelector(
        node_selector_terms=(
            NodeSelectorTerm(
                match_fields=(
                    NodeSelectorRequirement(key="metadata.name", operator="In", values=(name,)),
                )
            ),
        )
    )
