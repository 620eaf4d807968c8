"""Merge patch, JSON patch and strategic merge patch."""

from __future__ import annotations

from typing import Any

import pytest

from sim.kubeapi.patches.failures import PatchError, PatchFormatError
from sim.kubeapi.patches.json_patch import json_patch
from sim.kubeapi.patches.merge_patch import merge_patch
from sim.kubeapi.patches.strategic_merge import strategic_merge_patch
from sim.kubeapi.validation import builtin_schemas


def test_merge_patch_rfc7386_examples() -> None:
    assert merge_patch({"a": "b"}, {"a": "c"}) == {"a": "c"}
    assert merge_patch({"a": "b"}, {"b": "c"}) == {"a": "b", "b": "c"}
    assert merge_patch({"a": "b"}, {"a": None}) == {}
    assert merge_patch({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}
    assert merge_patch({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}) == {"a": {"b": "d"}}
    assert merge_patch(["a"], {"a": "b"}) == {"a": "b"}
    original = {"a": {"b": 1}}
    merge_patch(original, {"a": {"b": 2}})
    assert original == {"a": {"b": 1}}


def test_json_patch_operations() -> None:
    doc = {"a": [1, 2], "b": {"c": "d"}, "x/y": 1, "t~": 2}
    ops = [
        {"op": "add", "path": "/a/1", "value": 9},
        {"op": "add", "path": "/a/-", "value": 3},
        {"op": "remove", "path": "/b/c"},
        {"op": "replace", "path": "/x~1y", "value": 2},
        {"op": "copy", "from": "/t~0", "path": "/copied"},
        {"op": "move", "from": "/copied", "path": "/moved"},
        {"op": "test", "path": "/a/0", "value": 1},
    ]
    assert json_patch(doc, ops) == {"a": [1, 9, 2, 3], "b": {}, "x/y": 2, "t~": 2, "moved": 2}
    assert doc["a"] == [1, 2]


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/a", "value": 2}],
        [{"op": "remove", "path": "/missing"}],
        [{"op": "replace", "path": "/missing", "value": 1}],
        [{"op": "add", "path": "/x/y", "value": 1}],
        [{"op": "add", "path": "/list/5", "value": 1}],
    ],
)
def test_json_patch_failures(ops: list[dict[str, Any]]) -> None:
    with pytest.raises(PatchError):
        json_patch({"a": 1, "list": [1]}, ops)


def test_json_patch_format_errors() -> None:
    with pytest.raises(PatchFormatError):
        json_patch({}, {"op": "add"})
    with pytest.raises(PatchFormatError):
        json_patch({}, [{"op": "frobnicate", "path": "/a"}])


POD_SCHEMA = builtin_schemas.load().schema("", "v1", "Pod")


def _pod() -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "finalizers": ["a"], "labels": {"x": "1"}},
        "spec": {
            "containers": [
                {
                    "name": "c1",
                    "image": "i:1",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "env": [{"name": "A", "value": "1"}],
                },
                {"name": "c2", "image": "j:1"},
            ],
            "volumes": [{"name": "v1", "emptyDir": {}}],
            "tolerations": [{"key": "t1", "operator": "Exists"}],
        },
        "status": {
            "conditions": [
                {"type": "Ready", "status": "False"},
                {"type": "PodScheduled", "status": "True"},
            ]
        },
    }


def test_strategic_merge_uses_schema_merge_keys() -> None:
    patch = {
        "metadata": {"finalizers": ["b"], "labels": {"x": None, "y": "2"}},
        "spec": {
            "containers": [
                {
                    "name": "c1",
                    "env": [{"name": "B", "value": "2"}],
                    "ports": [{"containerPort": 81}],
                }
            ],
            "volumes": [{"name": "v2", "emptyDir": {}}],
            "tolerations": [{"key": "t2", "operator": "Exists"}],
        },
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    out = strategic_merge_patch(_pod(), patch, POD_SCHEMA)
    assert out["metadata"]["finalizers"] == ["a", "b"]
    assert out["metadata"]["labels"] == {"y": "2"}
    c1 = out["spec"]["containers"][0]
    assert [e["name"] for e in c1["env"]] == ["A", "B"]
    assert [p["containerPort"] for p in c1["ports"]] == [80, 81]
    assert [c["name"] for c in out["spec"]["containers"]] == ["c1", "c2"]
    assert [v["name"] for v in out["spec"]["volumes"]] == ["v1", "v2"]
    assert out["spec"]["tolerations"] == [{"key": "t2", "operator": "Exists"}]
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "PodScheduled", "status": "True"},
    ]


def test_strategic_merge_directives() -> None:
    patch = {
        "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]},
        "spec": {
            "containers": [{"name": "c2", "$patch": "delete"}],
            "$setElementOrder/volumes": [{"name": "v1"}],
            "volumes": [{"$patch": "replace"}, {"name": "only", "emptyDir": {}}],
        },
    }
    out = strategic_merge_patch(_pod(), patch, POD_SCHEMA)
    assert out["metadata"].get("finalizers") == []
    assert [c["name"] for c in out["spec"]["containers"]] == ["c1"]
    assert out["spec"]["volumes"] == [{"name": "only", "emptyDir": {}}]
    replaced = strategic_merge_patch(
        _pod(),
        {"spec": {"$patch": "replace", "containers": [{"name": "n", "image": "i"}]}},
        POD_SCHEMA,
    )
    assert replaced["spec"] == {"containers": [{"name": "n", "image": "i"}]}
    retained = strategic_merge_patch(
        _pod(), {"metadata": {"$retainKeys": ["name"], "name": "p"}}, POD_SCHEMA
    )
    assert retained["metadata"] == {"name": "p"}
