"""The leader's own Placement writes, trusted until its informer shows them.

A watch event for a write arrives a moment after the write returns. A decision taken in that
moment from the informer's cache alone would not see the slots just reserved and could give them
out twice. The book keeps, per domain, the Placement this process last wrote (or deleted) and
the resourceVersions of all its writes, and the allocator reads Placements through it:

- an informer event carrying one of our own versions is our echo: once the newest one arrives
  the cache has caught up and the entry goes;
- an event with a version we never wrote (someone else changed or deleted the Placement) drops
  the entry too: the cache is the truth again, and the allocator's next write, conditional on
  the version it read, fails with a conflict rather than overwrite it; after a conflict the
  allocator reads the Placement from the API and adopts it, so its next attempt starts from
  the server's state without waiting for the watch;
- a deletion of an earlier incarnation (another uid) does not touch a newer record.
"""

from __future__ import annotations

import msgspec

from shared.crds.placement import Placement


class _Entry(msgspec.Struct, kw_only=True):
    placement: Placement | None
    """What we last wrote; None after we deleted it."""
    uid: str
    """uid of the Placement last written or deleted."""
    versions: set[str]
    """Every resourceVersion our writes to this key produced since the cache last caught up."""


class PlacementBook:
    """Placements by ``namespace/name``: our latest write, or the informer's cache."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[str]:
        return list(self._entries)

    def current(self, key: str, cached: Placement | None) -> Placement | None:
        entry = self._entries.get(key)
        return cached if entry is None else entry.placement

    def wrote(self, placement: Placement) -> None:
        """We created or replaced ``placement`` (as the API returned it)."""
        meta = placement.metadata
        entry = self._entries.get(placement.key)
        versions = entry.versions if entry is not None else set()
        versions.add(meta.resource_version)
        self._entries[placement.key] = _Entry(placement=placement, uid=meta.uid, versions=versions)

    def deleted(self, key: str, *, uid: str) -> None:
        """We deleted the Placement ``key`` whose uid was ``uid``."""
        entry = self._entries.get(key)
        versions = entry.versions if entry is not None else set()
        self._entries[key] = _Entry(placement=None, uid=uid, versions=versions)

    def adopt(self, key: str, placement: Placement | None) -> None:
        """The API's current ``placement`` (read after a conflict) is the truth for ``key``
        until the informer shows it or anything newer."""
        if placement is None:
            self._entries.pop(key, None)
            return
        meta = placement.metadata
        self._entries[key] = _Entry(
            placement=placement, uid=meta.uid, versions={meta.resource_version}
        )

    def forget(self, key: str) -> None:
        """Trust the cache for ``key`` again (after a conflict showed our view is stale)."""
        self._entries.pop(key, None)

    def observe(self, old: Placement | None, new: Placement | None) -> bool:
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
            return entry.placement is not None
        if entry is None:
            return True
        if meta.resource_version in entry.versions:
            latest = entry.placement
            if latest is not None and latest.metadata.resource_version == meta.resource_version:
                self._entries.pop(obj.key)  # the cache has caught up
            return False
        if entry.placement is None and entry.uid == meta.uid:
            return False  # an update to what we deleted since, arriving late
        self._entries.pop(obj.key)
        return True
