"""From a changed object of any kind to the keys of the root objects that must look again.

A reconcile loop owns one root kind (a ComputeDomain, say) but depends on others: the claim
template it owns, the pods that use it, the nodes they run on. A change to any of those must
queue the affected roots, and only their keys: the reconcile reads current state itself.

A :data:`KeyMapper` is a pure function from an object (a dict as decoded from JSON, or a
msgspec Struct) to root keys. The helpers build the common ones:

- :func:`own_key` for the root kind itself;
- :func:`map_by_owner` follows ``metadata.ownerReferences`` to an owner of the root kind;
- :func:`map_by_label` reads the root's name from a label the root's controller set;
- :func:`map_by_index` looks values of the object up in an index the caller keeps (for
  example, "domains by member node" for node changes);
- :func:`union` combines mappers, each key once.

An event handler turns a mapper into adds with :func:`enqueue_mapped`. On an update it should
map both the old and the new object, so that a root the object stopped referring to also looks
again. A mapper never raises for odd data: an object it cannot map yields no key.

A :data:`Route` maps a whole change, ``(old, new)`` as an informer reports it, to root keys, so
that it can also decide that a change concerns no root (a heartbeat); :func:`enqueue_routed`
turns one into an informer handler. Each controller keeps its routes in its ``routing`` module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from shared.kube.keys import ObjectKey
from shared.kube.objects import get_field, get_str, labels_of, metadata_str, owner_references_of
from shared.kube.workqueue import WorkQueue

KeyMapper = Callable[[object], Iterable[ObjectKey]]
T = TypeVar("T")
Route = Callable[[T | None, T | None], Iterable[ObjectKey]]


def _key(*, namespace: str, name: str) -> ObjectKey | None:
    try:
        return ObjectKey(namespace=namespace, name=name)
    except ValueError:
        return None


def own_key(obj: object) -> Iterator[ObjectKey]:
    """The object's own key: for events of the root kind."""
    key = _key(namespace=metadata_str(obj, "namespace"), name=metadata_str(obj, "name"))
    if key is not None:
        yield key


def _group_of(api_version: str) -> str:
    # "resource.nvidia.com/v1beta1" -> "resource.nvidia.com"; the core group is "v1" -> "".
    group, _, _version = api_version.rpartition("/")
    return group


def map_by_owner(
    *, group: str, kind: str, controller_only: bool = False, cluster_scoped: bool = False
) -> KeyMapper:
    """Keys of the object's owners of ``kind`` in API ``group`` (any version).

    ``controller_only`` keeps only the owner reference marked ``controller: true``.
    ``cluster_scoped`` says the owner kind has no namespace; otherwise the owner lives in the
    object's namespace, as Kubernetes requires of namespaced owners.
    """

    def mapper(obj: object) -> Iterator[ObjectKey]:
        namespace = "" if cluster_scoped else metadata_str(obj, "namespace")
        for ref in owner_references_of(obj):
            if get_str(ref, "kind") != kind or _group_of(get_str(ref, "apiVersion")) != group:
                continue
            if controller_only and get_field(ref, "controller") is not True:
                continue
            key = _key(namespace=namespace, name=get_str(ref, "name"))
            if key is not None:
                yield key

    return mapper


def map_by_label(label: str, *, cluster_scoped: bool = False) -> KeyMapper:
    """The root named by the object's ``label``, in the object's namespace unless cluster-scoped."""

    def mapper(obj: object) -> Iterator[ObjectKey]:
        name = labels_of(obj).get(label)
        if not isinstance(name, str):
            return
        namespace = "" if cluster_scoped else metadata_str(obj, "namespace")
        key = _key(namespace=namespace, name=name)
        if key is not None:
            yield key

    return mapper


def map_by_index(
    *, values: Callable[[object], Iterable[str]], lookup: Callable[[str], Iterable[ObjectKey]]
) -> KeyMapper:
    """Roots found by looking each of ``values(obj)`` up in an index (``lookup``).

    ``lookup`` reads state the caller maintains (an informer cache index); the mapper stays
    free of I/O and answers from that state as it is now.
    """

    def mapper(obj: object) -> Iterator[ObjectKey]:
        for value in values(obj):
            yield from lookup(value)

    return mapper


def union(*mappers: KeyMapper) -> KeyMapper:
    """Every key any of ``mappers`` yields, each once, in first-seen order."""

    def mapper(obj: object) -> Iterator[ObjectKey]:
        seen: set[ObjectKey] = set()
        for each in mappers:
            for key in each(obj):
                if key not in seen:
                    seen.add(key)
                    yield key

    return mapper


def enqueue_mapped(queue: WorkQueue[ObjectKey], mapper: KeyMapper) -> Callable[[object], None]:
    """An event handler that adds every key ``mapper`` finds for an object to ``queue``."""

    def handle(obj: object) -> None:
        for key in mapper(obj):
            queue.add(key)

    return handle


def enqueue_routed(
    queue: WorkQueue[ObjectKey], route: Route[T]
) -> Callable[[T | None, T | None], None]:
    """An informer handler that adds every key ``route`` finds for a change to ``queue``."""

    def handle(old: T | None, new: T | None) -> None:
        for key in route(old, new):
            queue.add(key)

    return handle
