"""Mapping changed objects of other kinds to the root keys that must look again."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec
import pytest

from shared.kube import (
    KeyMapper,
    ManualClock,
    ObjectKey,
    WorkQueue,
    enqueue_mapped,
    map_by_index,
    map_by_label,
    map_by_owner,
    own_key,
    union,
)
from shared.metrics import Metrics

GROUP = "resource.nvidia.com"
DOMAIN = "ComputeDomain"


def owner(
    name: str,
    *,
    kind: str = DOMAIN,
    api_version: str = f"{GROUP}/v1beta1",
    controller: bool | None = None,
) -> dict[str, object]:
    ref: dict[str, object] = {"apiVersion": api_version, "kind": kind, "name": name, "uid": "u"}
    if controller is not None:
        ref["controller"] = controller
    return ref


def template(*refs: dict[str, object], namespace: str = "team-a") -> dict[str, object]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"namespace": namespace, "name": "t", "ownerReferences": list(refs)},
    }


def keys(mapper: KeyMapper, obj: object) -> list[str]:
    return [str(key) for key in mapper(obj)]


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (template(owner("d1")), ["team-a/d1"]),
        (template(owner("d1", api_version=f"{GROUP}/v1")), ["team-a/d1"]),
        (template(owner("d1", kind="Deployment")), []),
        (template(owner("d1", api_version="other.example.com/v1beta1")), []),
        (template(owner("d1"), owner("d2")), ["team-a/d1", "team-a/d2"]),
        (template(owner("")), []),
        (template(), []),
        ({"metadata": {"name": "no-owners"}}, []),
        ({}, []),
    ],
    ids=[
        "owned",
        "any-version",
        "other-kind",
        "other-group",
        "two-owners",
        "nameless-owner",
        "no-refs",
        "no-refs-field",
        "no-metadata",
    ],
)
def test_map_by_owner(obj: object, expected: list[str]) -> None:
    assert keys(map_by_owner(group=GROUP, kind=DOMAIN), obj) == expected


def test_map_by_owner_can_follow_only_the_controller() -> None:
    obj = template(owner("d1"), owner("d2", controller=True), owner("d3", controller=False))
    assert keys(map_by_owner(group=GROUP, kind=DOMAIN, controller_only=True), obj) == ["team-a/d2"]


def test_map_by_owner_of_a_core_kind_and_a_cluster_scoped_owner() -> None:
    pod = template(owner("n1", kind="Node", api_version="v1"))
    assert keys(map_by_owner(group="", kind="Node", cluster_scoped=True), pod) == ["n1"]


class OwnerReference(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    api_version: str
    kind: str
    name: str
    controller: bool | None = None


class ObjectMeta(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    name: str
    namespace: str = ""
    labels: dict[str, str] = {}
    owner_references: list[OwnerReference] = []


class Pod(msgspec.Struct, frozen=True, kw_only=True):
    metadata: ObjectMeta


def test_mappers_read_structs_like_dicts() -> None:
    raw = (
        b'{"metadata": {"namespace": "team-a", "name": "p", "labels": {"domain": "d9"},'
        b' "ownerReferences": [{"apiVersion": "resource.nvidia.com/v1beta1",'
        b' "kind": "ComputeDomain", "name": "d1", "controller": true}]}}'
    )
    pod = msgspec.json.decode(raw, type=Pod)
    as_dict = msgspec.json.decode(raw)
    for mapper in [
        map_by_owner(group=GROUP, kind=DOMAIN, controller_only=True),
        map_by_label("domain"),
        own_key,
    ]:
        assert keys(mapper, pod) == keys(mapper, as_dict)
    assert keys(map_by_owner(group=GROUP, kind=DOMAIN), pod) == ["team-a/d1"]
    assert keys(map_by_label("domain"), pod) == ["team-a/d9"]


@pytest.mark.parametrize(
    ("labels", "cluster_scoped", "expected"),
    [
        ({"cdo.dev/domain": "d1"}, False, ["team-a/d1"]),
        ({"cdo.dev/domain": "d1"}, True, ["d1"]),
        ({"other": "d1"}, False, []),
        ({"cdo.dev/domain": ""}, False, []),
        ({"cdo.dev/domain": "bad/value"}, False, []),
        (None, False, []),
    ],
)
def test_map_by_label(
    labels: dict[str, str] | None, cluster_scoped: bool, expected: list[str]
) -> None:
    obj = {"metadata": {"namespace": "team-a", "name": "p", "labels": labels}}
    assert keys(map_by_label("cdo.dev/domain", cluster_scoped=cluster_scoped), obj) == expected


def test_map_by_index_looks_values_up_in_the_callers_index() -> None:
    # "Which domains have a member on this node?", kept by the caller.
    members = {
        "n1": [ObjectKey(namespace="a", name="d1"), ObjectKey(namespace="b", name="d2")],
        "n2": [ObjectKey(namespace="a", name="d1")],
    }

    def node_name(obj: object) -> Iterable[str]:
        assert isinstance(obj, dict)
        return [obj["metadata"]["name"]]

    mapper = map_by_index(values=node_name, lookup=lambda node: members.get(node, []))
    assert keys(mapper, {"metadata": {"name": "n1"}}) == ["a/d1", "b/d2"]
    assert keys(mapper, {"metadata": {"name": "n3"}}) == []


def test_union_yields_each_key_once_in_first_seen_order() -> None:
    obj = {
        "metadata": {
            "namespace": "team-a",
            "name": "p",
            "labels": {"domain": "d2"},
            "ownerReferences": [owner("d1"), owner("d2")],
        }
    }
    mapper = union(map_by_owner(group=GROUP, kind=DOMAIN), map_by_label("domain"), own_key)
    assert keys(mapper, obj) == ["team-a/d1", "team-a/d2", "team-a/p"]


async def test_enqueue_mapped_adds_the_keys_to_the_queue() -> None:
    queue = WorkQueue[ObjectKey](name="domains", metrics=Metrics(), clock=ManualClock())
    handle = enqueue_mapped(queue, map_by_owner(group=GROUP, kind=DOMAIN))
    handle(template(owner("d1"), owner("d2")))
    handle(template(owner("d1")))  # coalesces with the waiting key
    taken = []
    while len(queue):
        key = await queue.get()
        queue.done(key)
        taken.append(str(key))
    assert taken == ["team-a/d1", "team-a/d2"]
