"""The versioned object store: one global resourceVersion, per-resource event windows.

Objects rest as encoded JSON bytes (``Entry.raw``) next to the few decoded values the
server filters on (labels, selectable fields, owner uids), so a list is a join of byte
strings and a watch event is encoded once for all watchers.

Rules kept here, as etcd plus the watch cache keep them on a real server:
- every committed write takes the next value of one global counter;
- each resource keeps a bounded window of events; a watch or exact read from a
  resourceVersion older than ``floor`` (the newest event dropped from the window) fails
  with ``410 Expired``;
- ``compact()`` drops history on demand, like an etcd compaction;
- ``restore()`` fills the store from disk (``journal``) as a restarted server finds etcd: the
  objects and the counter as they were, no event history (every window starts at the restored
  resourceVersion, so older versions are ``410 Expired``).
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

from sim.kubeapi.machinery import codec, errors
from sim.kubeapi.machinery.selectors import EVERYTHING, NO_FIELDS, FieldSelector, LabelSelector
from sim.kubeapi.storage.selectindex import Pin, SelectorIndex, pins

Key = tuple[str, str]
"""(namespace, name); namespace is "" for cluster-scoped objects."""


class Entry:
    """One stored object version. Immutable by convention; ``obj()`` returns a fresh dict.

    ``item`` is the encoded object as a list carries it: typed (built-in) lists omit each
    item's apiVersion and kind, so for those kinds they live apart in ``type_meta`` and
    ``raw`` puts them back. ``api_version`` is the version the object is stored in (a custom
    resource keeps the version it was written in until it is written again).
    """

    __slots__ = (
        "api_version",
        "deleting",
        "fields",
        "finalizers",
        "item",
        "labels",
        "name",
        "namespace",
        "owners",
        "rv",
        "type_meta",
        "uid",
    )

    def __init__(
        self,
        *,
        item: bytes,
        type_meta: bytes = b"",
        rv: int,
        namespace: str,
        name: str,
        uid: str,
        labels: dict[str, str],
        fields: dict[str, str],
        owners: tuple[str, ...],
        deleting: bool = False,
        finalizers: tuple[str, ...] = (),
        api_version: str = "",
    ) -> None:
        self.item = item
        self.api_version = api_version
        self.type_meta = type_meta
        self.deleting = deleting
        self.finalizers = finalizers
        self.rv = rv
        self.namespace = namespace
        self.name = name
        self.uid = uid
        self.labels = labels
        self.fields = fields
        self.owners = owners

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)

    @property
    def raw(self) -> bytes:
        """The whole encoded object, apiVersion and kind included."""
        if not self.type_meta:
            return self.item
        if self.item == b"{}":
            return b"{" + self.type_meta[:-1] + b"}"
        return b"{" + self.type_meta + self.item[1:]

    def obj(self) -> dict[str, Any]:
        result: dict[str, Any] = codec.decode(self.raw)
        return result


class Event:
    """A committed change. ``entry`` is the new state; for DELETED it is the last state
    carrying the deletion's resourceVersion, as etcd reports it."""

    __slots__ = ("_lines", "_making", "_prev_as_deleted", "entry", "prev", "rv", "type")

    def __init__(self, type_: str, entry: Entry, prev: Entry | None) -> None:
        self.type = type_
        self.rv = entry.rv
        self.entry = entry
        self.prev = prev
        self._lines: dict[str, bytes] = {}
        self._making: dict[str, asyncio.Future[bytes]] = {}
        self._prev_as_deleted: bytes | None = None

    def line(self, type_: str | None = None) -> bytes:
        """The watch line for this event, optionally re-typed for a selector transition."""
        kind = type_ or self.type
        cached = self._lines.get(kind)
        if cached is not None:
            return cached
        raw = self.entry.raw
        if kind == "DELETED" and self.type == "MODIFIED":
            raw = self.prev_with_event_rv()
        line = b'{"type":"' + kind.encode() + b'","object":' + raw + b"}\n"
        self._lines[kind] = line
        return line

    async def shared_line(self, key: str, make: Callable[[], Awaitable[bytes]]) -> bytes:
        """The watch line kept under ``key`` (``"<apiVersion> <type>"``), made by ``make``
        once for every watcher that asks, concurrent ones included: watchers of one version
        share one conversion per event, as that version's watch cache does on a real server.
        A failed ``make`` is not kept."""
        cached = self._lines.get(key)
        if cached is not None:
            return cached
        task = self._making.get(key)
        if task is None:
            task = self._making[key] = asyncio.ensure_future(make())
        try:
            line = await asyncio.shield(task)
        finally:
            if task.done() and self._making.get(key) is task:
                del self._making[key]
        self._lines[key] = line
        return line

    def prev_with_event_rv(self) -> bytes:
        """The previous content with this event's resourceVersion: what a watcher whose
        selector stops matching receives as DELETED."""
        if self._prev_as_deleted is None:
            assert self.prev is not None
            obj = self.prev.obj()
            obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
            self._prev_as_deleted = codec.encode(obj)
        return self._prev_as_deleted


class Bucket:
    """All objects of one stored resource (shared by every served version of it)."""

    def __init__(self, name: str, *, window: int, floor: int = 0) -> None:
        self.name = name
        self.window = window
        self.namespaces: dict[str, dict[str, Entry]] = {}
        self._sorted: dict[str, list[str]] = {}
        self._sorted_ns: list[str] | None = None
        self.events: list[Event] = []
        self.floor = floor
        self.drop_epoch = 0
        self._changed = asyncio.Event()
        self._keyed: dict[Pin, asyncio.Event] = {}
        self._keyed_events: dict[Pin, list[Event]] = {}
        self.count = 0
        self.index = SelectorIndex()

    # -- reads ----------------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> Entry | None:
        names = self.namespaces.get(namespace)
        return names.get(name) if names is not None else None

    def _sorted_names(self, namespace: str) -> list[str]:
        cached = self._sorted.get(namespace)
        if cached is None:
            cached = sorted(self.namespaces.get(namespace, {}))
            self._sorted[namespace] = cached
        return cached

    def _sorted_namespaces(self) -> list[str]:
        if self._sorted_ns is None:
            self._sorted_ns = sorted(ns for ns, names in self.namespaces.items() if names)
        return self._sorted_ns

    def entries(self, namespace: str | None = None, *, after: Key | None = None) -> Iterator[Entry]:
        """Entries in key order (namespace, then name), optionally strictly after ``after``."""
        spaces = [namespace] if namespace is not None else self._sorted_namespaces()
        for ns in spaces:
            if after is not None and ns < after[0]:
                continue
            names = self.namespaces.get(ns)
            if not names:
                continue
            ordered = self._sorted_names(ns)
            start = 0
            if after is not None and ns == after[0]:
                start = bisect.bisect_right(ordered, after[1])
            for i in range(start, len(ordered)):
                yield names[ordered[i]]

    def select(
        self,
        namespace: str | None = None,
        labels: LabelSelector = EVERYTHING,
        fields: FieldSelector = NO_FIELDS,
        *,
        after: Key | None = None,
    ) -> Iterator[Entry]:
        """The current entries matching both selectors, in key order, optionally strictly after
        ``after``: read through the selector index when it narrows them to under half of the
        resource, else by walking every entry."""
        if labels.empty and fields.empty:
            return self.entries(namespace, after=after)
        keys = self.index.candidates(labels, fields)
        if keys is None or 2 * len(keys) > self.count:
            scan = self.entries(namespace, after=after)
            return (e for e in scan if labels.matches(e.labels) and fields.matches(e.fields))
        found = sorted(
            k
            for k in keys
            if (namespace is None or k[0] == namespace) and (after is None or k > after)
        )
        entries = (self.namespaces[ns][name] for ns, name in found)
        return (e for e in entries if labels.matches(e.labels) and fields.matches(e.fields))

    def snapshot(
        self,
        rv: int,
        namespace: str | None = None,
        labels: LabelSelector = EVERYTHING,
        fields: FieldSelector = NO_FIELDS,
        *,
        after: Key | None = None,
    ) -> Iterator[Entry]:
        """The entries matching both selectors as they were at ``rv``, in key order; 410 if
        history is gone."""
        if rv < self.floor:
            raise errors.too_old_resource_version(rv, self.floor)
        start = self.first_index_after(rv)
        if start >= len(self.events):
            return self.select(namespace, labels, fields, after=after)
        state: dict[Key, Entry] = {e.key: e for e in self.entries(namespace)}
        for ev in reversed(self.events[start:]):
            key = ev.entry.key
            if namespace is not None and key[0] != namespace:
                continue
            if ev.type == "ADDED":
                state.pop(key, None)
            elif ev.prev is not None:
                state[key] = ev.prev
        return iter(
            [
                entry
                for k in sorted(state)
                if (after is None or k > after)
                and labels.matches((entry := state[k]).labels)
                and fields.matches(entry.fields)
            ]
        )

    def count_after(self, namespace: str | None, key: Key) -> int:
        """How many current entries sort after ``key`` (within ``namespace`` if given)."""
        spaces = [namespace] if namespace is not None else self._sorted_namespaces()
        total = 0
        for ns in spaces:
            if ns < key[0]:
                continue
            names = self.namespaces.get(ns)
            if not names:
                continue
            if ns == key[0]:
                ordered = self._sorted_names(ns)
                total += len(ordered) - bisect.bisect_right(ordered, key[1])
            else:
                total += len(names)
        return total

    def is_current(self, rv: int) -> bool:
        """True when nothing in this bucket changed after ``rv``."""
        return not self.events or self.events[-1].rv <= rv

    # -- history --------------------------------------------------------------------------------

    def first_index_after(self, rv: int) -> int:
        return bisect.bisect_right(self.events, rv, key=lambda ev: ev.rv)

    def events_after(self, rv: int, key: Pin | None = None) -> list[Event]:
        """Every event newer than ``rv``; 410 when some of them left the window.

        With ``key`` only the events whose old or new state has that pin (see
        ``selectindex.Pin``), so a watcher pinned to one node, or to one clique's label, reads
        its own changes, not every node's.
        """
        if rv < self.floor:
            raise errors.too_old_resource_version(rv, self.floor)
        if key is None:
            return self.events[self.first_index_after(rv) :]
        keyed = self._keyed_events.get(key, [])
        return keyed[bisect.bisect_right(keyed, rv, key=lambda ev: ev.rv) :]

    def _index_event(self, change: Event, keys: set[Pin]) -> None:
        for key in keys:
            keyed = self._keyed_events.setdefault(key, [])
            keyed.append(change)
            if keyed[0].rv < self.floor:  # forget what left the window, a batch at a time
                del keyed[: bisect.bisect_left(keyed, self.floor, key=lambda ev: ev.rv)]

    def _sweep_keyed_events(self) -> None:
        """Forget, for every pin, the events that left the window, and the pins left with none
        (a deleted object's name, a label value no object has any more)."""
        for key in list(self._keyed_events):
            keyed = self._keyed_events[key]
            if keyed[-1].rv < self.floor:
                del self._keyed_events[key]
            elif keyed[0].rv < self.floor:
                del keyed[: bisect.bisect_left(keyed, self.floor, key=lambda ev: ev.rv)]

    @property
    def last_event_rv(self) -> int:
        return self.events[-1].rv if self.events else self.floor

    def compact(self, rv: int) -> None:
        keep = self.first_index_after(rv)
        if keep:
            del self.events[:keep]
        self.floor = max(self.floor, rv)

    def _trim(self) -> None:
        excess = len(self.events) - self.window
        if excess > 0:
            # Drop a tenth at a time so trimming stays amortised O(1) per write.
            cut = excess + self.window // 10
            self.floor = self.events[cut - 1].rv
            del self.events[:cut]
            self._sweep_keyed_events()

    # -- change notification --------------------------------------------------------------------

    def changed(self, key: Pin | None = None) -> asyncio.Event:
        """An asyncio.Event set at the next change (or watch drop) of this bucket.

        With ``key`` (a pin its selector requires, see ``selectindex.required_pin``) the event
        fires only for changes whose old or new state has that pin. Many watchers pinned to
        different values (every kubelet's ``spec.nodeName=<node>`` pod watch, every node's
        watch of its clique's Nodes by label) then cost the wake-ups of the few a write
        concerns instead of one per watcher, as the real server's watch cache indexes them.
        """
        if key is None:
            return self._changed
        event = self._keyed.get(key)
        if event is None:
            event = self._keyed[key] = asyncio.Event()
        return event

    def notify(self, keys: set[Pin] | None = None) -> None:
        """Wake the watchers of every change, and those waiting on one of ``keys`` (the pins of
        the change committed); None (a watch drop) wakes every keyed watcher too."""
        fired = self._changed
        self._changed = asyncio.Event()
        fired.set()
        if not self._keyed:
            return
        if keys is None:
            keyed, self._keyed = self._keyed, {}
            for event in keyed.values():
                event.set()
            return
        for key in keys:
            waiting = self._keyed.pop(key, None)
            if waiting is not None:
                waiting.set()

    def drop_watches(self) -> None:
        self.drop_epoch += 1
        self.notify()

    # -- writes (called by Store only) ----------------------------------------------------------

    def _restore(self, entry: Entry) -> None:
        names = self.namespaces.setdefault(entry.namespace, {})
        replaced = names.get(entry.name)
        if replaced is None:
            self.count += 1
        else:
            self.index.discard(replaced.key, replaced.labels, replaced.fields)
        names[entry.name] = entry
        self.index.add(entry.key, entry.labels, entry.fields)
        self._sorted.pop(entry.namespace, None)
        self._sorted_ns = None

    def _put(self, entry: Entry, prev: Entry | None) -> None:
        names = self.namespaces.get(entry.namespace)
        if names is None:
            names = self.namespaces[entry.namespace] = {}
            self._sorted_ns = None
        if prev is None:
            self._sorted.pop(entry.namespace, None)
            if not names:
                self._sorted_ns = None
            self.count += 1
        replaced = names.get(entry.name)
        if replaced is not None:
            self.index.discard(replaced.key, replaced.labels, replaced.fields)
        names[entry.name] = entry
        self.index.add(entry.key, entry.labels, entry.fields)
        change = Event("MODIFIED" if prev else "ADDED", entry, prev)
        self.events.append(change)
        self._trim()
        keys = _change_pins(change)
        self._index_event(change, keys)
        self.notify(keys)

    def _remove(self, final: Entry, prev: Entry) -> None:
        names = self.namespaces[prev.namespace]
        stored = names.pop(prev.name)
        self.index.discard(stored.key, stored.labels, stored.fields)
        self.count -= 1
        self._sorted.pop(prev.namespace, None)
        if not names:
            self._sorted_ns = None
        change = Event("DELETED", final, prev)
        self.events.append(change)
        self._trim()
        keys = _change_pins(change)
        self._index_event(change, keys)
        self.notify(keys)


def _change_pins(change: Event) -> set[Pin]:
    """The pins of a change: those of its new state and of its previous one."""
    found = set(pins(change.entry.labels, change.entry.fields))
    if change.prev is not None:
        found.update(pins(change.prev.labels, change.prev.fields))
    return found


FieldsFn = Callable[[dict[str, Any]], dict[str, str]]


class Store:
    """All buckets, the global resourceVersion, and the uid / owner indexes."""

    def __init__(self, *, window: int = 10_000) -> None:
        self.window = window
        self.rv = 1
        self.buckets: dict[str, Bucket] = {}
        self.by_uid: dict[str, tuple[str, Key]] = {}
        self.dependents: dict[str, set[tuple[str, Key]]] = {}
        self._listeners: list[Callable[[str, Event], None]] = []
        self._type_metas: dict[tuple[str, str], bytes] = {}
        self._floor = 0  # the history every bucket starts without (restored from disk)

    def bucket(self, name: str) -> Bucket:
        found = self.buckets.get(name)
        if found is None:
            found = self.buckets[name] = Bucket(name, window=self.window, floor=self._floor)
        return found

    def restore(self, objects: Iterable[tuple[str, Entry]], *, rv: int) -> None:
        """Take ``objects`` (bucket name, entry) as stored, the counter at ``rv``, and no
        history before it: a watch or exact read from an older version is 410, as on a
        restarted kube-apiserver, whose watch cache starts empty."""
        self._floor = max(self.rv, rv)
        self.rv = self._floor
        for bucket in self.buckets.values():
            bucket.floor = max(bucket.floor, self._floor)
        for bucket_name, entry in objects:
            self.bucket(bucket_name)._restore(entry)
            self._index(bucket_name, entry)

    def objects(self) -> Iterator[tuple[str, Entry]]:
        """Every stored object as (bucket name, entry)."""
        for name, bucket in self.buckets.items():
            for entry in bucket.entries():
                yield name, entry

    @property
    def object_count(self) -> int:
        return sum(bucket.count for bucket in self.buckets.values())

    def add_listener(self, listener: Callable[[str, Event], None]) -> None:
        """Called synchronously after each commit (the garbage collector uses this)."""
        self._listeners.append(listener)

    def _emit(self, bucket: str, event: Event) -> None:
        for listener in self._listeners:
            listener(bucket, event)

    def put(
        self,
        bucket_name: str,
        obj: dict[str, Any],
        *,
        prev: Entry | None,
        fields: FieldsFn,
        typed: bool = True,
    ) -> Entry:
        """Commit ``obj`` (create if ``prev`` is None) under the next resourceVersion.

        Sets ``metadata.resourceVersion`` in ``obj`` and returns the new entry. ``typed``
        kinds (the built-in ones) are listed without per-item apiVersion and kind.
        """
        bucket = self.bucket(bucket_name)
        self.rv += 1
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self.rv)
        entry = self._entry(obj, fields, typed=typed)
        if prev is not None:
            self._unindex(bucket_name, prev)
        self._index(bucket_name, entry)
        bucket._put(entry, prev)
        self._emit(bucket_name, bucket.events[-1])
        return entry

    def remove(self, bucket_name: str, prev: Entry, *, fields: FieldsFn) -> Entry:
        """Delete the object of ``prev``; the DELETED event carries a new resourceVersion."""
        bucket = self.bucket(bucket_name)
        self.rv += 1
        obj = prev.obj()
        obj["metadata"]["resourceVersion"] = str(self.rv)
        final = self._entry(obj, fields, typed=bool(prev.type_meta))
        self._unindex(bucket_name, prev)
        bucket._remove(final, prev)
        self._emit(bucket_name, bucket.events[-1])
        return final

    def compact(self, rv: int | None = None) -> int:
        """Forget history up to ``rv`` (default: now) in every bucket; returns the rv used."""
        target = self.rv if rv is None else rv
        for bucket in self.buckets.values():
            bucket.compact(target)
        return target

    def drop_watches(self, bucket_name: str | None = None) -> None:
        targets = self.buckets.values() if bucket_name is None else [self.bucket(bucket_name)]
        for bucket in targets:
            bucket.drop_watches()

    def lookup_uid(self, uid: str) -> tuple[str, Entry] | None:
        found = self.by_uid.get(uid)
        if found is None:
            return None
        bucket_name, (ns, name) = found
        entry = self.bucket(bucket_name).get(ns, name)
        return (bucket_name, entry) if entry is not None else None

    def dependents_of(self, uid: str) -> list[tuple[str, Entry]]:
        out = []
        for bucket_name, (ns, name) in sorted(self.dependents.get(uid, ())):
            entry = self.bucket(bucket_name).get(ns, name)
            if entry is not None:
                out.append((bucket_name, entry))
        return out

    # -- internals ------------------------------------------------------------------------------

    def _type_meta(self, api_version: str, kind: str) -> bytes:
        key = (api_version, kind)
        found = self._type_metas.get(key)
        if found is None:
            encoded = codec.encode({"apiVersion": api_version, "kind": kind})
            found = self._type_metas[key] = encoded[1:-1] + b","
        return found

    def _entry(self, obj: dict[str, Any], fields: FieldsFn, *, typed: bool) -> Entry:
        meta = obj["metadata"]
        labels = meta.get("labels") or {}
        owners = tuple(ref.get("uid", "") for ref in meta.get("ownerReferences") or ())
        if typed:
            type_meta = self._type_meta(obj.get("apiVersion", ""), obj.get("kind", ""))
            item = codec.encode({k: v for k, v in obj.items() if k not in ("apiVersion", "kind")})
        else:
            type_meta = b""
            item = codec.encode(obj)
        return Entry(
            item=item,
            type_meta=type_meta,
            rv=self.rv,
            namespace=meta.get("namespace", ""),
            name=meta["name"],
            uid=meta.get("uid", ""),
            labels=dict(labels),
            fields=fields(obj),
            owners=owners,
            deleting=bool(meta.get("deletionTimestamp")),
            finalizers=tuple(meta.get("finalizers") or ()),
            api_version=str(obj.get("apiVersion", "")),
        )

    def _index(self, bucket_name: str, entry: Entry) -> None:
        if entry.uid:
            self.by_uid[entry.uid] = (bucket_name, entry.key)
        for owner in entry.owners:
            self.dependents.setdefault(owner, set()).add((bucket_name, entry.key))

    def _unindex(self, bucket_name: str, entry: Entry) -> None:
        if entry.uid:
            self.by_uid.pop(entry.uid, None)
        for owner in entry.owners:
            deps = self.dependents.get(owner)
            if deps is not None:
                deps.discard((bucket_name, entry.key))
                if not deps:
                    del self.dependents[owner]
