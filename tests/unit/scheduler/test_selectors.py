"""Label selectors and node selector terms."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from sim.scheduler.objects import LabelSelector, NodeSelector
from sim.scheduler.selectors import (
    label_selector_matches,
    node_name_selector,
    node_selector_matches,
)

LABELS = {"app": "train", "tier": "gpu", "rank": "7"}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ({}, True),
        ({"matchLabels": {"app": "train"}}, True),
        ({"matchLabels": {"app": "train", "tier": "cpu"}}, False),
        ({"matchExpressions": [expr("app", "In", "train", "serve")]}, True),
        ({"matchExpressions": [expr("app", "In", "serve")]}, False),
        ({"matchExpressions": [expr("app", "NotIn", "serve")]}, True),
        ({"matchExpressions": [expr("missing", "NotIn", "x")]}, True),
        ({"matchExpressions": [expr("app", "Exists")]}, True),
        ({"matchExpressions": [expr("missing", "Exists")]}, False),
        ({"matchExpressions": [expr("missing", "DoesNotExist")]}, True),
        ({"matchExpressions": [expr("app", "DoesNotExist")]}, False),
        # Gt and Lt belong to node selectors only.
        ({"matchExpressions": [expr("rank", "Gt", "1")]}, False),
        (
            {
                "matchLabels": {"app": "train"},
                "matchExpressions": [expr("tier", "In", "gpu"), expr("x", "DoesNotExist")],
            },
            True,
        ),
    ],
)
def test_label_selector(selector: dict[str, Any], matches: bool) -> None:
    assert label_selector_matches(msgspec.convert(selector, LabelSelector), LABELS) is matches


def terms(*each: dict[str, Any]) -> NodeSelector:
    return msgspec.convert({"nodeSelectorTerms": list(each)}, NodeSelector)


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        (terms({"matchExpressions": [expr("tier", "In", "gpu")]}), True),
        (terms({"matchExpressions": [expr("tier", "NotIn", "gpu")]}), False),
        (terms({"matchExpressions": [expr("rank", "Gt", "5")]}), True),
        (terms({"matchExpressions": [expr("rank", "Gt", "7")]}), False),
        (terms({"matchExpressions": [expr("rank", "Lt", "8")]}), True),
        (terms({"matchExpressions": [expr("app", "Lt", "8")]}), False),  # not an integer
        (terms({"matchExpressions": [expr("missing", "Gt", "1")]}), False),
        (terms({"matchExpressions": [expr("missing", "DoesNotExist")]}), True),
        (terms({"matchFields": [expr("metadata.name", "In", "n1")]}), True),
        (terms({"matchFields": [expr("metadata.name", "NotIn", "n1")]}), False),
        (terms({"matchFields": [expr("metadata.uid", "In", "n1")]}), False),
        # terms are ORed; requirements inside a term are ANDed
        (
            terms(
                {"matchExpressions": [expr("tier", "In", "cpu")]},
                {"matchExpressions": [expr("app", "Exists")]},
            ),
            True,
        ),
        (
            terms(
                {
                    "matchExpressions": [expr("tier", "In", "gpu")],
                    "matchFields": [expr("metadata.name", "In", "other")],
                }
            ),
            False,
        ),
        (terms({}), False),  # an empty term matches nothing
        (terms(), False),
    ],
)
def test_node_selector(selector: NodeSelector, matches: bool) -> None:
    assert node_selector_matches(selector, name="n1", labels=LABELS) is matches


def test_node_name_selector_matches_only_that_node() -> None:
    selector = node_name_selector("n1")
    assert node_selector_matches(selector, name="n1", labels={})
    assert not node_selector_matches(selector, name="n2", labels={})
    assert msgspec.json.decode(msgspec.json.encode(selector)) == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
        ]
    }
