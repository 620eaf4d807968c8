"""What a rack's trays carry for the scheduler besides GPUs: labels, taints, allocatable.

A rack's ``labels``, ``taints`` and ``allocatable`` apply to every tray; each of its
``node_groups`` then changes some trays: its labels are added (a key given twice takes the
group's value), its taints replace the rack's, its allocatable fields override the rack's one by
one. Quantities are checked here, so a bad one is a TopologyError naming the field.
"""

from __future__ import annotations

import msgspec

from shared.scheduling.quantity import QuantityError, parse_milli
from sim.topology.errors import TopologyError
from sim.topology.spec import AllocatableSpec, RackSpec, TaintSpec
from sim.topology.trays import parse_trays

# Resource names the kubelet reports, per AllocatableSpec field.
_RESOURCES = {
    "cpu": "cpu",
    "memory": "memory",
    "ephemeral_storage": "ephemeral-storage",
    "pods": "pods",
}


class TrayScheduling(msgspec.Struct, frozen=True, kw_only=True):
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    taints: tuple[TaintSpec, ...] = ()
    allocatable: dict[str, str] = msgspec.field(default_factory=dict)


def _amounts(spec: AllocatableSpec | None, where: str) -> dict[str, str]:
    if spec is None:
        return {}
    amounts: dict[str, str] = {}
    for field, resource in _RESOURCES.items():
        value = getattr(spec, field)
        if value is None:
            continue
        try:
            milli = parse_milli(value)
        except QuantityError:
            raise TopologyError(f"{where}.{field}", f"{value!r} is not a quantity") from None
        if milli < 0 or (field == "pods" and milli % 1000):
            raise TopologyError(f"{where}.{field}", f"{value!r} must be a whole, positive amount")
        amounts[resource] = value
    return amounts


def tray_scheduling(rack: RackSpec, *, tray_count: int, where: str) -> list[TrayScheduling]:
    """Per tray index, what the rack and its node groups say (see the module docstring)."""
    base = TrayScheduling(
        labels=dict(rack.labels or {}),
        taints=rack.taints or (),
        allocatable=_amounts(rack.allocatable, f"{where}.allocatable"),
    )
    trays = [base] * tray_count
    for position, group in enumerate(rack.node_groups or ()):
        field = f"{where}.node_groups[{position}]"
        try:
            chosen = parse_trays(group.trays)
        except ValueError as error:
            raise TopologyError(f"{field}.trays", str(error)) from None
        extra = _amounts(group.allocatable, f"{field}.allocatable")
        for tray in chosen:
            if tray >= tray_count:
                raise TopologyError(
                    f"{field}.trays", f"tray {tray} is outside the rack's trays 0..{tray_count - 1}"
                )
            before = trays[tray]
            trays[tray] = TrayScheduling(
                labels={**before.labels, **(group.labels or {})},
                taints=group.taints if group.taints is not None else before.taints,
                allocatable={**before.allocatable, **extra},
            )
    return trays
