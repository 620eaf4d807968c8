"""Label and field selector parsing and matching."""

from __future__ import annotations

import pytest

from sim.kubeapi.machinery import errors
from sim.kubeapi.machinery.selectors import (
    from_label_selector_object,
    parse_field_selector,
    parse_label_selector,
)

LABELS = {"env": "prod", "tier": "web", "rank": "5"}


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("", True),
        ("env=prod", True),
        ("env==prod", True),
        ("env!=prod", False),
        ("env!=dev", True),
        ("missing!=x", True),
        ("env in (prod,dev)", True),
        ("env in (dev)", False),
        ("env notin (dev)", True),
        ("missing notin (dev)", True),
        ("tier", True),
        ("!tier", False),
        ("!missing", True),
        ("env=prod,tier=web", True),
        ("env=prod,tier=db", False),
        ("rank>4", True),
        ("rank<5", False),
        ("env=", False),
        ("  env = prod , tier ", True),
    ],
)
def test_label_selector_matching(text: str, matches: bool) -> None:
    assert parse_label_selector(text).matches(LABELS) is matches


@pytest.mark.parametrize(
    "text",
    ["env in prod", "env in (a", "!", "env=prod,", "a=b=c", "rank>x", "-bad=1", "env=bad value!"],
)
def test_label_selector_errors_are_bad_requests(text: str) -> None:
    with pytest.raises(errors.ApiError) as exc:
        parse_label_selector(text)
    assert exc.value.code == 400 and exc.value.reason == "BadRequest"


def test_selector_object() -> None:
    sel = from_label_selector_object(
        {
            "matchLabels": {"env": "prod"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web", "db"]}],
        }
    )
    assert sel.matches(LABELS)
    assert not sel.matches({"env": "prod"})
    assert from_label_selector_object(None).matches({})
    assert from_label_selector_object(
        {"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}
    ).matches(LABELS)


def test_field_selector() -> None:
    fields = {"metadata.name": "a,b", "spec.nodeName": "n1", "status.phase": "Running"}
    supported = set(fields)
    assert parse_field_selector(r"metadata.name=a\,b", supported).matches(fields)
    assert parse_field_selector("spec.nodeName==n1,status.phase!=Pending", supported).matches(
        fields
    )
    assert not parse_field_selector("spec.nodeName=", supported).matches(fields)
    assert parse_field_selector("spec.nodeName=", supported).matches({"spec.nodeName": ""})
    assert parse_field_selector("spec.nodeName=n1", supported).exact("spec.nodeName") == "n1"


def test_field_selector_errors() -> None:
    with pytest.raises(errors.ApiError) as exc:
        parse_field_selector("spec.other=1", {"metadata.name"})
    assert exc.value.message == "field label not supported: spec.other"
    with pytest.raises(errors.ApiError) as exc:
        parse_field_selector("metadata.name", {"metadata.name"})
    assert (
        exc.value.message == "invalid selector: 'metadata.name'; can't understand 'metadata.name'"
    )
