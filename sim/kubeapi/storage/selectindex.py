"""The selector index of one stored resource: the keys of its objects by label value and by the
value of each indexed field, so a selective LIST (or a watch's initial events) reads the few
objects that can match instead of every object of the resource.

The index only narrows: it answers which keys *may* match the requirements it can answer
(``=``, ``==`` and ``in`` on a label, ``exists`` on a label, ``=`` on an indexed field) and the
caller still matches every candidate against the whole selector. Requirements it cannot answer
(``!=``, ``notin``, ``!key``, ``<``, ``>``) leave the choice to the others; a selector with none
it can answer is not narrowed (``None``). kube-apiserver's watch cache keeps such indexes for
``spec.nodeName`` of Pods (its "indexers"); labels are indexed here because every per-node
service of a 256-rack cluster lists one clique's Nodes by label.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from shared.scheduling.labels import Op
from sim.kubeapi.machinery.selectors import FieldSelector, LabelSelector

Key = tuple[str, str]

INDEXED_FIELDS = ("spec.nodeName", "metadata.name")
"""Selectable fields indexed by value (an object without the field is indexed under "")."""

_BY_VALUE = (Op.EQUALS, Op.DOUBLE_EQUALS, Op.IN)

Pin = tuple[str, str]
"""One value an object has: ``("f:<field>", value)`` for an indexed field (every object has one,
"" when the field is unset), ``("l:<label key>", value)`` for each of its labels. A watcher whose
selector requires one pin waits for and reads only the changes to objects that had or have it."""


def pins(labels: Mapping[str, str], fields: Mapping[str, str]) -> list[Pin]:
    """The pins of an object stored with ``labels`` and ``fields``."""
    out = [("f:" + field, fields.get(field, "")) for field in INDEXED_FIELDS]
    out += [("l:" + key, value) for key, value in labels.items()]
    return out


def required_pin(labels: LabelSelector, fields: FieldSelector) -> Pin | None:
    """A pin every object matching both selectors has: an indexed field pinned to a value, else
    a label required to equal one value; None when the selectors require none."""
    for field in INDEXED_FIELDS:
        value = fields.exact(field)
        if value is not None:
            return ("f:" + field, value)
    for req in labels.requirements:
        if req.op in _BY_VALUE and len(req.values) == 1:
            return ("l:" + req.key, next(iter(req.values)))
    return None


class SelectorIndex:
    """Keys by label (key, value) and by indexed field value. Objects are added and discarded
    with the labels and fields they were stored with."""

    def __init__(self) -> None:
        self.labels: dict[str, dict[str, set[Key]]] = {}
        self.fields: dict[str, dict[str, set[Key]]] = {field: {} for field in INDEXED_FIELDS}

    def add(self, key: Key, labels: Mapping[str, str], fields: Mapping[str, str]) -> None:
        for name, value in labels.items():
            self.labels.setdefault(name, {}).setdefault(value, set()).add(key)
        for field, by_value in self.fields.items():
            by_value.setdefault(fields.get(field, ""), set()).add(key)

    def discard(self, key: Key, labels: Mapping[str, str], fields: Mapping[str, str]) -> None:
        for name, value in labels.items():
            _discard(self.labels, name, value, key, keep=False)
        for field in self.fields:
            _discard(self.fields, field, fields.get(field, ""), key, keep=True)

    def candidates(self, labels: LabelSelector, fields: FieldSelector) -> set[Key] | None:
        """The keys that may match both selectors, from the narrowest requirement the index
        answers; None when it answers none of them. Read-only: it may be the index's own set."""
        best: set[Key] | None = None
        for found in self._answers(labels, fields):
            if best is None or len(found) < len(best):
                best = found
            if not best:
                break
        return best

    def _answers(self, labels: LabelSelector, fields: FieldSelector) -> list[set[Key]]:
        answers: list[set[Key]] = []
        for requirement in fields.requirements:
            by_value = self.fields.get(requirement.field)
            if by_value is not None and not requirement.negate:
                answers.append(by_value.get(requirement.value, set()))
        for req in labels.requirements:
            by_value = self.labels.get(req.key, {})
            if req.op in _BY_VALUE:
                answers.append(_union(by_value.get(value, set()) for value in req.values))
            elif req.op is Op.EXISTS:
                answers.append(_union(by_value.values()))
        return answers


def _union(sets: Iterable[set[Key]]) -> set[Key]:
    out: set[Key] = set()
    for found in sets:
        out |= found
    return out


def _discard(
    index: dict[str, dict[str, set[Key]]], name: str, value: str, key: Key, *, keep: bool
) -> None:
    """Forget ``key`` under ``name=value``; empty sets go, and ``name`` too unless ``keep``."""
    by_value = index.get(name)
    if by_value is None:
        return
    keys = by_value.get(value)
    if keys is None:
        return
    keys.discard(key)
    if not keys:
        del by_value[value]
        if not by_value and not keep:
            del index[name]
