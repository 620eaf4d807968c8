"""``events.k8s.io/v1`` Event: the same stored objects as core/v1 Event, renamed fields."""

from __future__ import annotations

from sim.kubeapi.machinery import codec
from sim.kubeapi.storage.resources import Converter, Obj

# (events.k8s.io/v1 field, core/v1 field)
_RENAMES = (
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
)


def to_core(obj: Obj) -> Obj:
    out = codec.copy(obj)
    for new_name, core_name in _RENAMES:
        if new_name in out:
            out[core_name] = out.pop(new_name)
    return out


def from_core(obj: Obj) -> Obj:
    out = dict(obj)
    for new_name, core_name in _RENAMES:
        if core_name in out:
            out[new_name] = out.pop(core_name)
    return out


EVENTS_V1 = Converter(to_storage=to_core, from_storage=from_core)
