"""Writes a controller made that its informer cache may not show yet.

A reconcile reads its children from a cache that lags the API server. Right after creating
three pods it may see none of them and create three more; right after deleting one it may still
count it. The real controllers guard against this with "expectations"; these are the same idea,
tracked per owner (by uid) and per object so that nothing depends on counting events:

- a **create** is outstanding until the cache holds an object of that name, or the cache's
  resourceVersion has reached the create's (the object was seen and has since gone: created
  and deleted while the watch was away, for example);
- a **delete** is outstanding while the cache still shows that uid alive (present and without a
  ``deletionTimestamp``);
- either is dropped after ``ttl_s`` whatever the cache says, so a write whose effect can never be
  observed (an unparsable resourceVersion) delays convergence by at most that long.

Reconciles combine them with the cache: outstanding creates count as existing children and
outstanding deletes as gone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from shared.kube.meta import KubeObject


@dataclass(frozen=True)
class PendingCreate:
    name: str
    resource_version: int | None
    tag: str
    expires: float


@dataclass
class _Owner:
    creates: dict[str, PendingCreate] = field(default_factory=dict)
    deletes: dict[str, float] = field(default_factory=dict)  # uid -> expiry


@dataclass(frozen=True)
class Outstanding:
    """What the cache does not show yet for one owner."""

    creates: tuple[PendingCreate, ...] = ()
    deletes: frozenset[str] = frozenset()

    def tags(self) -> list[str]:
        return [create.tag for create in self.creates]


def _version(text: str) -> int | None:
    return int(text) if text.isdigit() else None


class Expectations:
    """Outstanding writes per owner uid; see the module docstring."""

    def __init__(
        self,
        *,
        cache_version: Callable[[], str],
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cache_version = cache_version
        self._ttl_s = ttl_s
        self._clock = clock
        self._owners: dict[str, _Owner] = {}

    def created(self, owner: str, obj: KubeObject, *, tag: str = "") -> None:
        """Record a successful create (``obj`` as the API answered it)."""
        meta = obj.metadata
        self._owners.setdefault(owner, _Owner()).creates[meta.name] = PendingCreate(
            name=meta.name,
            resource_version=_version(meta.resource_version),
            tag=tag,
            expires=self._clock() + self._ttl_s,
        )

    def deleted(self, owner: str, uid: str) -> None:
        """Record a successful delete request for the object with ``uid``."""
        self._owners.setdefault(owner, _Owner()).deletes[uid] = self._clock() + self._ttl_s

    def forget(self, owner: str) -> None:
        self._owners.pop(owner, None)

    def outstanding(self, owner: str, children: Iterable[KubeObject]) -> Outstanding:
        """The owner's writes ``children`` (its objects in the cache now) do not reflect yet."""
        state = self._owners.get(owner)
        if state is None:
            return Outstanding()
        now = self._clock()
        cache_version = _version(self._cache_version())
        names: set[str] = set()
        alive: set[str] = set()
        for child in children:
            names.add(child.metadata.name)
            if child.metadata.deletion_timestamp is None:
                alive.add(child.metadata.uid)

        def create_pending(create: PendingCreate) -> bool:
            if create.expires <= now or create.name in names:
                return False
            seen = (
                cache_version is not None
                and create.resource_version is not None
                and cache_version >= create.resource_version
            )
            return not seen

        state.creates = {n: c for n, c in state.creates.items() if create_pending(c)}
        state.deletes = {u: t for u, t in state.deletes.items() if t > now and u in alive}
        if not state.creates and not state.deletes:
            del self._owners[owner]
        return Outstanding(creates=tuple(state.creates.values()), deletes=frozenset(state.deletes))
