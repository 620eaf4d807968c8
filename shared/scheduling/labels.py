"""The one label-matching rule: whether a node's or a pod's labels satisfy one requirement.

The operators are those of the API server's string selectors (``=``, ``==``, ``!=``, ``in``,
``notin``, existence) and of ``matchExpressions`` in label and node selectors (``In``,
``NotIn``, ``Exists``, ``DoesNotExist``, and for node selectors ``Gt``/``Lt``). The API
emulator, the simulated scheduler and the clique allocator all match through
:func:`requirement_holds`, so they agree on what a selector selects.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping


class Op(enum.Enum):
    IN = "in"
    NOT_IN = "notin"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER = "gt"
    LESS = "lt"


# The operators of metav1.LabelSelectorRequirement and core/v1 NodeSelectorRequirement.
OPERATORS = {
    "In": Op.IN,
    "NotIn": Op.NOT_IN,
    "Exists": Op.EXISTS,
    "DoesNotExist": Op.DOES_NOT_EXIST,
    "Gt": Op.GREATER,
    "Lt": Op.LESS,
}
LABEL_SELECTOR_OPERATORS = frozenset({Op.IN, Op.NOT_IN, Op.EXISTS, Op.DOES_NOT_EXIST})


def requirement_holds(op: Op, key: str, values: Collection[str], labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy one requirement on ``key``.

    ``Gt``/``Lt`` compare integers: a label or a bound that is not one, or anything but a
    single bound, does not match, as in Kubernetes.
    """
    if op in (Op.IN, Op.EQUALS, Op.DOUBLE_EQUALS):
        value = labels.get(key)
        return value is not None and value in values
    if op in (Op.NOT_IN, Op.NOT_EQUALS):
        value = labels.get(key)
        return value is None or value not in values
    if op is Op.EXISTS:
        return key in labels
    if op is Op.DOES_NOT_EXIST:
        return key not in labels
    value = labels.get(key)
    if value is None or len(values) != 1:
        return False
    try:
        have, bound = int(value), int(next(iter(values)))
    except ValueError:
        return False
    return have > bound if op is Op.GREATER else have < bound
