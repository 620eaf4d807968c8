"""The store's journal: the newest state of each object comes back, deletions stay deleted, a
line cut short by a kill is dropped, and a rewrite keeps only what exists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sim.kubeapi.storage.journal import FILE, Journal
from sim.kubeapi.storage.store import Store


def fields(obj: dict[str, Any]) -> dict[str, str]:
    return {"metadata.name": obj["metadata"]["name"]}


def config_map(name: str, value: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "data": {"v": value}}  # fmt: skip


def written(tmp_path: Path) -> tuple[Store, Journal]:
    store = Store()
    journal = Journal(tmp_path)
    store.add_listener(journal.append)
    a = store.put("configmaps", config_map("a", "1"), prev=None, fields=fields)
    store.put("configmaps", config_map("a", "2"), prev=a, fields=fields)
    b = store.put("configmaps", config_map("b", "1"), prev=None, fields=fields)
    store.remove("configmaps", b, fields=fields)
    store.put("namespaces", {"metadata": {"name": "x"}}, prev=None, fields=fields, typed=False)
    journal.close()
    return store, journal


def test_the_newest_state_of_each_object_and_the_counter_come_back(tmp_path: Path) -> None:
    store, _ = written(tmp_path)
    objects, rv = Journal(tmp_path).load()
    assert rv == store.rv
    restored = Store()
    restored.restore(objects, rv=rv)
    entry = restored.bucket("configmaps").get("default", "a")
    assert entry is not None and entry.obj()["data"] == {"v": "2"}
    assert entry.obj()["kind"] == "ConfigMap"  # typed kinds keep their apiVersion and kind
    assert entry.rv == store.bucket("configmaps").get("default", "a").rv  # type: ignore[union-attr]
    assert restored.bucket("configmaps").get("default", "b") is None
    assert restored.lookup_uid("uid-a") is not None
    assert restored.object_count == 2
    with pytest.raises(Exception, match="too old"):  # no history from before the restart
        restored.bucket("configmaps").events_after(rv - 1)
    assert restored.bucket("pods").floor == rv  # nor for a resource first written after it


def test_a_line_cut_short_by_a_kill_is_dropped(tmp_path: Path) -> None:
    store, _ = written(tmp_path)
    with (tmp_path / FILE).open("ab") as out:
        out.write(b'{"bucket":"configmaps","rv":99,"name":"half')
    objects, rv = Journal(tmp_path).load()
    assert rv == store.rv and len(objects) == 2


def test_a_rewrite_keeps_one_line_per_object_and_the_counter(tmp_path: Path) -> None:
    store, journal = written(tmp_path)
    last = store.put("configmaps", config_map("c", "1"), prev=None, fields=fields)
    store.remove("configmaps", last, fields=fields)  # the newest version is a deletion's
    journal.rewrite(store.objects(), rv=store.rv)
    assert len((tmp_path / FILE).read_bytes().splitlines()) == 3  # the counter, a, x
    objects, rv = Journal(tmp_path).load()
    assert sorted(entry.name for _, entry in objects) == ["a", "x"]
    assert rv == store.rv, "a resourceVersion is never given out twice"
