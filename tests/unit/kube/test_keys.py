"""Object keys: text form, parsing, ordering, and reading them from API objects."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.kube import ObjectKey, key_of

# DNS-1123 labels, as Kubernetes namespaces and most names are.
NAMES = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)


@given(namespace=st.one_of(st.just(""), NAMES), name=NAMES)
def test_text_form_round_trips(namespace: str, name: str) -> None:
    key = ObjectKey(namespace=namespace, name=name)
    assert ObjectKey.parse(str(key)) == key
    assert key.cluster_scoped == (namespace == "")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("team-a/training-domain-1", ObjectKey(namespace="team-a", name="training-domain-1")),
        ("gb200-r1-n01", ObjectKey(name="gb200-r1-n01")),
    ],
)
def test_parse(text: str, expected: ObjectKey) -> None:
    assert ObjectKey.parse(text) == expected
    assert str(expected) == text


@pytest.mark.parametrize("text", ["", "/", "/name", "ns/", "a/b/c"])
def test_parse_refuses_malformed_text(text: str) -> None:
    with pytest.raises(ValueError, match="key"):
        ObjectKey.parse(text)


def test_keys_are_hashable_and_sort_by_namespace_then_name() -> None:
    keys = [
        ObjectKey(namespace="b", name="a"),
        ObjectKey(name="z"),
        ObjectKey(namespace="a", name="b"),
    ]
    assert [str(key) for key in sorted(keys)] == ["z", "a/b", "b/a"]
    assert len({ObjectKey(namespace="a", name="b"), ObjectKey.parse("a/b")}) == 1


class Meta(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    namespace: str = ""


class Thing(msgspec.Struct, frozen=True, kw_only=True):
    metadata: Meta


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"metadata": {"namespace": "ns", "name": "x"}}, "ns/x"),
        ({"metadata": {"name": "node-1"}}, "node-1"),
        (Thing(metadata=Meta(namespace="ns", name="x")), "ns/x"),
        (Thing(metadata=Meta(name="node-1")), "node-1"),
    ],
    ids=["dict", "dict-cluster", "struct", "struct-cluster"],
)
def test_key_of_reads_dicts_and_structs(obj: object, expected: str) -> None:
    assert str(key_of(obj)) == expected


def test_key_of_an_object_without_a_name_is_refused() -> None:
    with pytest.raises(ValueError, match="name"):
        key_of({"metadata": {"namespace": "ns"}})
