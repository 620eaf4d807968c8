"""An informer's cache: the latest object per key, with indexes kept up to date on every change."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Generic, TypeVar

from shared.kube.meta import KubeObject

T = TypeVar("T", bound=KubeObject)
IndexFunc = Callable[[T], Iterable[str]]


class Cache(Generic[T]):
    """Objects by ``namespace/name`` key, plus named indexes (value -> keys)."""

    def __init__(self) -> None:
        self._objects: dict[str, T] = {}
        self._index_funcs: dict[str, IndexFunc[T]] = {}
        self._indexes: dict[str, dict[str, set[str]]] = {}

    def add_index(self, name: str, func: IndexFunc[T]) -> None:
        """Index every object (present and future) by the values ``func`` returns."""
        self._index_funcs[name] = func
        index: dict[str, set[str]] = {}
        for key, obj in self._objects.items():
            for value in func(obj):
                index.setdefault(value, set()).add(key)
        self._indexes[name] = index

    def __len__(self) -> int:
        return len(self._objects)

    def get(self, key: str) -> T | None:
        return self._objects.get(key)

    def keys(self) -> list[str]:
        return list(self._objects)

    def objects(self) -> list[T]:
        return list(self._objects.values())

    def by_index(self, name: str, value: str) -> list[T]:
        """Objects whose index ``name`` yields ``value``, in key order."""
        keys = self._indexes[name].get(value, ())
        return [self._objects[key] for key in sorted(keys)]

    def index_values(self, name: str) -> list[str]:
        return [value for value, keys in self._indexes[name].items() if keys]

    def by_labels(self, selector: Mapping[str, str]) -> list[T]:
        """Objects whose labels contain every ``key=value`` of ``selector``."""
        return [
            obj
            for obj in self._objects.values()
            if all(obj.metadata.labels.get(k) == v for k, v in selector.items())
        ]

    def _unindex(self, key: str, obj: T) -> None:
        for name, func in self._index_funcs.items():
            index = self._indexes[name]
            for value in func(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]

    def _index(self, key: str, obj: T) -> None:
        for name, func in self._index_funcs.items():
            index = self._indexes[name]
            for value in func(obj):
                index.setdefault(value, set()).add(key)

    def upsert(self, obj: T) -> T | None:
        """Store ``obj``; returns the object it replaced."""
        key = obj.key
        old = self._objects.get(key)
        if old is not None:
            self._unindex(key, old)
        self._objects[key] = obj
        self._index(key, obj)
        return old

    def delete(self, key: str) -> T | None:
        old = self._objects.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def replace(self, objects: Iterable[T]) -> list[tuple[T | None, T | None]]:
        """Make the cache hold exactly ``objects``; the changes as (old, new) pairs.

        Unchanged objects (same resourceVersion) produce no change, so a relist after a 410
        reports only what really happened while the watch was away, deletions included.
        """
        changes: list[tuple[T | None, T | None]] = []
        fresh: dict[str, T] = {obj.key: obj for obj in objects}
        for key in [key for key in self._objects if key not in fresh]:
            changes.append((self.delete(key), None))
        for key, obj in fresh.items():
            old = self._objects.get(key)
            if old is None or old.metadata.resource_version != obj.metadata.resource_version:
                self.upsert(obj)
                changes.append((old, obj))
        return changes
