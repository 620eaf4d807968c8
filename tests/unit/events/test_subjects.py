import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.events.subjects import (
    NODE_FAULT,
    SubjectTemplate,
    escape_token,
    unescape_token,
)

# A NATS subject token: no dots, wildcards or whitespace; a JetStream KV key segment: only these.
KV_SAFE = re.compile(r"[-/_=.a-zA-Z0-9]+")


@given(st.text(min_size=1))
def test_escape_is_reversible_and_safe(value: str) -> None:
    token = escape_token(value)
    assert unescape_token(token) == value
    assert "." not in token and "*" not in token and ">" not in token
    assert not any(ch.isspace() for ch in token)
    assert KV_SAFE.fullmatch(token)


def test_plain_names_are_left_alone_and_dots_escaped() -> None:
    assert escape_token("gb200-r1-n01") == "gb200-r1-n01"
    assert escape_token("gb200-r1-n01.example.com") == "gb200-r1-n01=2Eexample=2Ecom"
    assert escape_token("a=b") == "a=3Db"


def test_empty_token_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        escape_token("")


def test_template_renders_parses_and_makes_wildcards() -> None:
    template = SubjectTemplate("cdo.v1.domain.{namespace}.{name}.membership")
    subject = template.render(namespace="team.a", name="job-1")
    assert subject == "cdo.v1.domain.team=2Ea.job-1.membership"
    assert template.parse(subject) == {"namespace": "team.a", "name": "job-1"}
    assert template.parse("cdo.v1.node.x.fault") is None
    assert template.wildcard() == "cdo.v1.domain.*.*.membership"
    assert template.wildcard(namespace="team.a") == "cdo.v1.domain.team=2Ea.*.membership"


def test_clique_ids_keep_one_token() -> None:
    subject = NODE_FAULT.render(node="n.1")
    assert subject.count(".") == 4


def test_placeholder_must_fill_a_token() -> None:
    with pytest.raises(ValueError, match="whole token"):
        SubjectTemplate("cdo.v1.node-{node}.fault")
