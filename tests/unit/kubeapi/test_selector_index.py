"""The selector index: a selective read through it returns exactly what a walk over every
object returns, after random creates, updates that change labels or ``spec.nodeName``, deletes
and a restore; reads of the past (snapshots) keep their resourceVersion semantics."""

from __future__ import annotations

import random
from typing import Any

import pytest

from sim.kubeapi.machinery.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)
from sim.kubeapi.storage.selectindex import SelectorIndex, required_pin
from sim.kubeapi.storage.store import Bucket, Entry, Key, Store

NO = FieldSelector(())
FIELDS = ("metadata.name", "metadata.namespace", "spec.nodeName", "status.phase")
NAMESPACES = ("ns-a", "ns-b")
NAMES = tuple(f"p{i:02d}" for i in range(40))
NODES = tuple(f"n{i}" for i in range(6))
LABELS = (
    "",
    "clique=c1",
    "clique==c2",
    "clique in (c0,c3)",
    "clique",
    "!clique",
    "clique!=c1",
    "clique notin (c1,c2)",
    "clique=c1,app=a0",
    "app in (a1),tier",
    "app=a2,clique in (c0,c1,c2)",
    "clique=nowhere",
)
FIELD_SELECTORS = (
    "",
    "spec.nodeName=n1",
    "spec.nodeName=",
    "spec.nodeName!=n2",
    "metadata.name=p03",
    "spec.nodeName=n4,status.phase=Running",
    "spec.nodeName=n0,metadata.name=p07",
    "spec.nodeName=nowhere",
)


def _fields(obj: dict[str, Any]) -> dict[str, str]:
    meta, spec = obj["metadata"], obj.get("spec") or {}
    return {
        "metadata.name": meta["name"],
        "metadata.namespace": meta.get("namespace", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "status.phase": (obj.get("status") or {}).get("phase", ""),
    }


def _pod(rng: random.Random, namespace: str, name: str) -> dict[str, Any]:
    labels = {
        key: rng.choice(values)
        for key, values in (("clique", ("c0", "c1", "c2", "c3")), ("app", ("a0", "a1", "a2")))
        if rng.random() < 0.8
    }
    if rng.random() < 0.3:
        labels["tier"] = "x"
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "status": {"phase": rng.choice(("Pending", "Running"))},
    }
    if rng.random() < 0.85:
        obj["spec"] = {"nodeName": rng.choice(NODES)}
    return obj


def _scan(
    entries: list[Entry], labels: LabelSelector, fields: FieldSelector, after: Key | None
) -> list[Key]:
    return [
        e.key
        for e in entries
        if (after is None or e.key > after)
        and labels.matches(e.labels)
        and fields.matches(e.fields)
    ]


def _selectors() -> list[tuple[LabelSelector, FieldSelector]]:
    return [
        (parse_label_selector(text), parse_field_selector(field_text, FIELDS))
        for text in LABELS
        for field_text in FIELD_SELECTORS
    ]


def _check_current(bucket: Bucket, rng: random.Random) -> None:
    for labels, fields in _selectors():
        namespace = rng.choice((None, *NAMESPACES))
        after = rng.choice((None, (rng.choice(NAMESPACES), rng.choice(NAMES))))
        expected = _scan(list(bucket.entries(namespace)), labels, fields, after)
        got = [e.key for e in bucket.select(namespace, labels, fields, after=after)]
        assert got == expected, (labels.text(), fields, namespace, after)
        # The index may over-approximate, never miss a match.
        candidates = bucket.index.candidates(labels, fields)
        if candidates is not None:
            assert set(_scan(list(bucket.entries()), labels, fields, None)) <= candidates


def _rebuilt(bucket: Bucket) -> SelectorIndex:
    index = SelectorIndex()
    for entry in bucket.entries():
        index.add(entry.key, entry.labels, entry.fields)
    return index


def _mutate(store: Store, rng: random.Random, steps: int) -> None:
    bucket = store.bucket("pods")
    for _ in range(steps):
        namespace, name = rng.choice(NAMESPACES), rng.choice(NAMES)
        prev = bucket.get(namespace, name)
        if prev is not None and rng.random() < 0.3:
            store.remove("pods", prev, fields=_fields)
        else:
            store.put("pods", _pod(rng, namespace, name), prev=prev, fields=_fields)


@pytest.mark.parametrize("seed", range(4))
def test_indexed_reads_equal_the_walk_through_changes(seed: int) -> None:
    rng = random.Random(seed)
    store = Store(window=100_000)
    bucket = store.bucket("pods")
    past: list[tuple[int, list[Entry]]] = []
    for _ in range(6):
        _mutate(store, rng, 60)
        _check_current(bucket, rng)
        past.append((store.rv, list(bucket.entries())))
    index = _rebuilt(bucket)
    assert bucket.index.labels == index.labels  # no stale key, no empty set left behind
    assert bucket.index.fields == index.fields
    # Reads at an older resourceVersion answer with that version's objects.
    for rv, entries in past:
        for labels, fields in _selectors()[::5]:
            got = [e.key for e in bucket.snapshot(rv, None, labels, fields)]
            assert got == _scan(entries, labels, fields, None), rv
            assert all(e.rv <= rv for e in bucket.snapshot(rv, None, labels, fields))


def test_a_restored_store_is_indexed() -> None:
    rng = random.Random(7)
    store = Store()
    _mutate(store, rng, 150)
    restored = Store()
    restored.restore(store.objects(), rv=store.rv)
    # Restoring over what is already there replaces it in the index too.
    restored.restore(store.objects(), rv=store.rv)
    bucket = restored.bucket("pods")
    assert bucket.index.labels == _rebuilt(bucket).labels
    assert bucket.index.fields == _rebuilt(bucket).fields
    _check_current(bucket, rng)
    _mutate(restored, rng, 100)
    _check_current(bucket, rng)


def test_a_pinned_field_reads_only_its_objects() -> None:
    """A node's pods among many are found without walking the others."""
    store = Store()
    for i in range(300):
        obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i:03d}", "namespace": "ns", "labels": {"rack": str(i % 30)}},
            "spec": {"nodeName": f"n{i % 100}"},
        }
        store.put("pods", obj, prev=None, fields=_fields)
    bucket = store.bucket("pods")
    by_node = parse_field_selector("spec.nodeName=n7", FIELDS)
    assert bucket.index.candidates(parse_label_selector(""), by_node) == {
        ("ns", "p007"),
        ("ns", "p107"),
        ("ns", "p207"),
    }
    by_rack = parse_label_selector("rack=7")
    assert len(bucket.index.candidates(by_rack, parse_field_selector("", FIELDS)) or ()) == 10
    # The narrowest requirement wins.
    both = bucket.index.candidates(by_rack, by_node)
    assert both is not None and len(both) == 3
    assert [e.name for e in bucket.select("ns", by_rack, by_node)] == [
        "p007"
    ]  # 107, 207: racks 17, 27
    unanswered = parse_label_selector("rack!=7")
    assert bucket.index.candidates(unanswered, parse_field_selector("", FIELDS)) is None


@pytest.mark.parametrize("seed", range(3))
def test_a_pinned_watcher_reads_every_change_its_selector_can_see(seed: int) -> None:
    """The events kept under a pin (an indexed field's value, a label's value) are exactly the
    changes whose old or new state has it, from any resourceVersion in the window; a window
    that moves on forgets the pins no change has any more."""
    rng = random.Random(seed)
    store = Store(window=200)
    bucket = store.bucket("pods")
    _mutate(store, rng, 150)
    since = [bucket.floor, *(ev.rv for ev in bucket.events[::17])]
    _mutate(store, rng, 40)
    for text, field_text in (
        ("clique=c1", ""),
        ("clique in (c3)", ""),
        ("app==a2,clique", ""),
        ("", "spec.nodeName=n2"),
        ("clique=c0", "spec.nodeName="),
        ("", "metadata.name=p05"),
    ):
        labels = parse_label_selector(text)
        fields = parse_field_selector(field_text, FIELDS)
        pin = required_pin(labels, fields)
        assert pin is not None
        kind, name = pin[0][:2], pin[0][2:]
        for rv in since:
            if rv < bucket.floor:
                continue
            expected = [
                ev.rv
                for ev in bucket.events_after(rv)
                if any(
                    (e.labels.get(name) if kind == "l:" else e.fields.get(name, "")) == pin[1]
                    for e in (ev.entry, ev.prev)
                    if e is not None
                )
            ]
            assert [ev.rv for ev in bucket.events_after(rv, pin)] == expected, (pin, rv)
    assert required_pin(parse_label_selector("clique!=c1,app notin (a0)"), NO) is None
    # A change wakes the watchers of its own pins only.
    woken = bucket.changed(("l:clique", "c1"))
    other = bucket.changed(("l:clique", "c2"))
    obj = _pod(rng, "ns-a", "fresh")
    obj["metadata"]["labels"] = {"clique": "c1"}
    store.put("pods", obj, prev=None, fields=_fields)
    assert woken.is_set() and not other.is_set()
    # Pins whose every change left the window are forgotten.
    _mutate(store, rng, 600)
    assert all(keyed[-1].rv >= bucket.floor for keyed in bucket._keyed_events.values())
