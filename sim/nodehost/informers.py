"""How many objects each hosted service's informers hold: ``GET /nodes/<name>/informers``.

A per-node service should read what concerns its node and its clique, nothing else, so what
its informers hold must not grow with the cluster (a test counts them at two sizes of a hollow
cluster, ``cdo sim up --racks N --full-racks 1``). The services are cdo's own, unchanged, so the
census finds their :class:`shared.kube.informer.Informer` objects by walking the service
object's attributes (a few levels down: the agent keeps some in its parts), as a debugger would.

    {"imex-agent": {"nodes": 1, "placements.cdo.dev": 3},
     "health-monitor": {"nodes": 4608, "devicetaintrules": 0, "resourceslices": 0}}

Informers of one resource in one service are summed; a resource the service does not watch
is absent.
"""

from __future__ import annotations

from collections.abc import Iterator

from shared.kube.informer import Informer
from shared.kube.meta import KubeObject

MAX_DEPTH = 4
"""How many attribute levels below the service object are searched."""

_LEAVES = (str, bytes, int, float, bool, type(None))


def informers_of(root: object, *, depth: int = MAX_DEPTH) -> list[Informer[KubeObject]]:
    """Every Informer reachable from ``root`` through attributes, lists, tuples and dict
    values, at most ``depth`` levels down, each once."""
    found: dict[int, Informer[KubeObject]] = {}
    seen: set[int] = set()

    def walk(obj: object, level: int) -> None:
        if isinstance(obj, _LEAVES) or id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, Informer):
            found[id(obj)] = obj
            return  # its cache holds objects, not informers
        if level >= depth:
            return
        for child in _children(obj):
            walk(child, level + 1)

    walk(root, 0)
    return list(found.values())


def _children(obj: object) -> Iterator[object]:
    if isinstance(obj, dict):
        yield from obj.values()
    elif isinstance(obj, list | tuple | set | frozenset):
        yield from obj
    else:
        attributes = getattr(obj, "__dict__", None)
        if attributes is not None:
            yield from attributes.values()
        for slot in getattr(type(obj), "__slots__", ()):
            if hasattr(obj, slot):
                yield getattr(obj, slot)


def census(root: object) -> dict[str, int]:
    """Objects held per resource (``plural`` or ``plural.group``) by ``root``'s informers."""
    held: dict[str, int] = {}
    for informer in informers_of(root):
        resource = informer.resource
        name = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
        held[name] = held.get(name, 0) + len(informer.cache)
    return dict(sorted(held.items()))
