"""The versioned store: one counter, event windows, floors, snapshots, compaction."""

from __future__ import annotations

from typing import Any

import pytest

from sim.kubeapi.machinery import errors
from sim.kubeapi.storage.store import Store


def _fields(obj: dict[str, Any]) -> dict[str, str]:
    return {"metadata.name": obj["metadata"]["name"]}


def _obj(name: str, value: str = "0", namespace: str = "ns") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"v": value},
    }


def test_global_counter_and_events() -> None:
    store = Store(window=100)
    a = store.put("configmaps", _obj("a"), prev=None, fields=_fields)
    n = store.put(
        "nodes",
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}},
        prev=None,
        fields=_fields,
    )
    a2 = store.put("configmaps", _obj("a", "1"), prev=a, fields=_fields)
    gone = store.remove("configmaps", a2, fields=_fields)
    assert [a.rv, n.rv, a2.rv, gone.rv] == [2, 3, 4, 5]
    events = store.bucket("configmaps").events_after(0)
    assert [(e.type, e.rv) for e in events] == [("ADDED", 2), ("MODIFIED", 4), ("DELETED", 5)]
    assert events[2].entry.obj()["metadata"]["resourceVersion"] == "5"
    assert events[1].line() == b'{"type":"MODIFIED","object":' + a2.raw + b"}\n"


def test_typed_entries_list_without_type_meta() -> None:
    store = Store()
    entry = store.put("configmaps", _obj("a"), prev=None, fields=_fields)
    assert b'"kind"' not in entry.item
    assert entry.obj()["kind"] == "ConfigMap" and entry.obj()["apiVersion"] == "v1"
    custom = store.put("x", _obj("b"), prev=None, fields=_fields, typed=False)
    assert custom.raw == custom.item and b'"kind":"ConfigMap"' in custom.item


def test_window_sets_floor_and_expires() -> None:
    store = Store(window=10)
    entry = None
    for i in range(25):
        entry = store.put("configmaps", _obj("a", str(i)), prev=entry, fields=_fields)
    bucket = store.bucket("configmaps")
    assert len(bucket.events) <= 10
    assert bucket.floor == bucket.events[0].rv - 1
    with pytest.raises(errors.ApiError) as exc:
        bucket.events_after(bucket.floor - 1)
    assert exc.value.code == 410 and exc.value.reason == "Expired"
    assert exc.value.message == f"too old resource version: {bucket.floor - 1} ({bucket.floor})"
    assert [e.rv for e in bucket.events_after(bucket.floor)] == [e.rv for e in bucket.events]


def test_snapshot_rebuilds_the_past() -> None:
    store = Store()
    a = store.put("configmaps", _obj("a", "1"), prev=None, fields=_fields)
    b = store.put("configmaps", _obj("b", "1"), prev=None, fields=_fields)
    rv = store.rv
    store.put("configmaps", _obj("a", "2"), prev=a, fields=_fields)
    store.remove("configmaps", b, fields=_fields)
    store.put("configmaps", _obj("c", "1"), prev=None, fields=_fields)
    past = list(store.bucket("configmaps").snapshot(rv))
    assert [(e.name, e.obj()["data"]["v"]) for e in past] == [("a", "1"), ("b", "1")]
    now = list(store.bucket("configmaps").snapshot(store.rv))
    assert [(e.name, e.obj()["data"]["v"]) for e in now] == [("a", "2"), ("c", "1")]
    assert [e.name for e in store.bucket("configmaps").snapshot(rv, after=("ns", "a"))] == ["b"]


def test_compaction() -> None:
    store = Store()
    a = store.put("configmaps", _obj("a"), prev=None, fields=_fields)
    store.put("configmaps", _obj("a", "1"), prev=a, fields=_fields)
    floor = store.compact()
    bucket = store.bucket("configmaps")
    assert bucket.events == [] and bucket.floor == floor == store.rv
    with pytest.raises(errors.ApiError):
        bucket.events_after(a.rv)
    assert bucket.events_after(store.rv) == []


def test_owner_and_uid_indexes() -> None:
    store = Store()
    owner = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "o", "namespace": "ns", "uid": "u1"},
    }
    child = _obj("c")
    child["metadata"]["ownerReferences"] = [
        {"uid": "u1", "name": "o", "kind": "ConfigMap", "apiVersion": "v1"}
    ]
    store.put("configmaps", owner, prev=None, fields=_fields)
    c = store.put("configmaps", child, prev=None, fields=_fields)
    assert [e.name for _, e in store.dependents_of("u1")] == ["c"]
    found = store.lookup_uid("u1")
    assert found is not None and found[1].name == "o"
    store.remove("configmaps", c, fields=_fields)
    assert store.dependents_of("u1") == []


def test_sorted_iteration_and_counts() -> None:
    store = Store()
    for ns, name in (("b", "2"), ("a", "9"), ("b", "1"), ("a", "1")):
        store.put("configmaps", _obj(name, namespace=ns), prev=None, fields=_fields)
    bucket = store.bucket("configmaps")
    assert [e.key for e in bucket.entries()] == [("a", "1"), ("a", "9"), ("b", "1"), ("b", "2")]
    assert [e.key for e in bucket.entries("b")] == [("b", "1"), ("b", "2")]
    assert [e.key for e in bucket.entries(after=("a", "9"))] == [("b", "1"), ("b", "2")]
    assert bucket.count_after(None, ("a", "1")) == 3
    assert bucket.count_after("b", ("b", "1")) == 1
