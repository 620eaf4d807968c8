"""A controller's own writes (and deletes), trusted until its informer shows them.

A watch event for a write arrives a moment after the write returns. A decision taken in that
moment from the informer's cache alone acts on the older version: it adds a finalizer twice (a
409 and a retry), writes the same status again, or gives out the slots it just reserved a second
time. ``OwnWrites`` keeps, per key, the object this process last wrote (or None once it deleted
it) and the resourceVersions of all its writes; the controller reads its objects through
:meth:`OwnWrites.current` and feeds every informer event to :meth:`OwnWrites.observe`:

- an event carrying one of our own versions is our echo: once the newest one arrives the cache
  has caught up and the entry goes (a read that finds the cache holding our newest version
  drops it too);
- an event with a version we never wrote (someone else changed or deleted the object) drops the
  entry: the cache is the truth again, and a write conditional on the version read fails with a
  conflict rather than overwrite it; after a conflict the controller may read the object from the
  API and :meth:`~OwnWrites.adopt` it, so its next attempt starts from the server's state without
  waiting for the watch;
- a deletion of an earlier incarnation (another uid) does not touch a newer record, and a late
  update of what we deleted since does not bring it back.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import msgspec

from shared.kube.meta import KubeObject

T = TypeVar("T", bound=KubeObject)


class _Entry(msgspec.Struct, Generic[T], kw_only=True):
    obj: T | None
    """What we last wrote; None after we deleted it."""
    uid: str
    """uid of the object last written or deleted."""
    versions: set[str]
    """Every resourceVersion our writes to this key produced since the cache last caught up."""


class OwnWrites(Generic[T]):
    """Objects by ``namespace/name``: our latest write, or the informer's cache."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry[T]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[str]:
        """Keys with a write the cache does not show yet (a created object may be among them)."""
        return list(self._entries)

    def current(self, key: str, cached: T | None) -> T | None:
        """The newest version of ``key`` this process knows: its own write, else ``cached``."""
        entry = self._entries.get(key)
        if entry is None:
            return cached
        latest = entry.obj
        if (
            cached is not None
            and latest is not None
            and cached.metadata.resource_version == latest.metadata.resource_version
        ):
            del self._entries[key]  # the cache has caught up: trust it again
            return cached
        return latest

    def wrote(self, obj: T) -> None:
        """We created or changed ``obj`` (as the API returned it)."""
        meta = obj.metadata
        entry = self._entries.get(obj.key)
        versions = entry.versions if entry is not None else set()
        versions.add(meta.resource_version)
        self._entries[obj.key] = _Entry(obj=obj, uid=meta.uid, versions=versions)

    def deleted(self, key: str, *, uid: str) -> None:
        """We deleted the object ``key`` whose uid was ``uid``."""
        entry = self._entries.get(key)
        versions = entry.versions if entry is not None else set()
        self._entries[key] = _Entry(obj=None, uid=uid, versions=versions)

    def adopt(self, key: str, obj: T | None) -> None:
        """The API's current ``obj`` (read after a conflict) is the truth for ``key`` until the
        informer shows it or anything newer."""
        if obj is None:
            self._entries.pop(key, None)
            return
        meta = obj.metadata
        self._entries[key] = _Entry(obj=obj, uid=meta.uid, versions={meta.resource_version})

    def forget(self, key: str) -> None:
        """Trust the cache for ``key`` again (after a conflict showed our view is stale)."""
        self._entries.pop(key, None)

    def observe(self, old: T | None, new: T | None) -> bool:
        """An informer event; True when it shows a change this process did not make."""
        obj = new or old
        if obj is None:
            return False
        entry = self._entries.get(obj.key)
        meta = obj.metadata
        if new is None:  # deleted
            if entry is None:
                return True
            if entry.uid != meta.uid:
                return False  # an earlier incarnation going away
            self._entries.pop(obj.key)
            return entry.obj is not None
        if entry is None:
            return True
        if meta.resource_version in entry.versions:
            latest = entry.obj
            if latest is not None and latest.metadata.resource_version == meta.resource_version:
                self._entries.pop(obj.key)  # the cache has caught up
            return False
        if entry.obj is None and entry.uid == meta.uid:
            return False  # an update to what we deleted since, arriving late
        self._entries.pop(obj.key)
        return True
