"""DRA device taints (KEP-5055, GA in Kubernetes 1.37): the ``DeviceTaintRule`` kind, and the
taint rules shared with ResourceSlice devices.

A taint is ``{key, value, effect, timeAdded}``; ``effect`` is ``None``, ``NoSchedule`` or
``NoExecute`` (``PreferNoSchedule``, valid on nodes, is not valid here). ``timeAdded`` is set
when it is missing, and in a DeviceTaintRule also when an update changes the effect but keeps
the old time, as kube-apiserver does. A DeviceTaintRule is cluster-scoped: ``spec.taint`` is
required, ``spec.deviceSelector`` (``driver``, ``pool``, ``device``, all optional) picks the
devices; without a selector it matches none, an empty one matches all. ``status`` holds
conditions written by the eviction controller (since 1.35; before, a rule has no status).
Which versions are served depends on the release (:mod:`sim.kubeapi.releases.apis`).
"""

from __future__ import annotations

from typing import Any

from sim.kubeapi.kinds.common import get, text
from sim.kubeapi.machinery import codec, errors, names
from sim.kubeapi.machinery.errors import FieldError
from sim.kubeapi.storage import columns
from sim.kubeapi.storage.resources import Column, Obj, Strategy

TAINT_EFFECTS = ("None", "NoSchedule", "NoExecute")
STATUS_SINCE = 35
"""The release whose DeviceTaintRule got ``status`` (KEP-5055's revised alpha)."""
MAX_TAINTS_PER_DEVICE = 16


def validate_taint(taint: Any, path: str) -> list[FieldError]:
    """A device taint's key (a qualified name), value (a label value) and effect."""
    if not isinstance(taint, dict):
        return [errors.required(path)]
    out: list[FieldError] = []
    key = taint.get("key")
    if not key:
        out.append(errors.required(f"{path}.key"))
    else:
        out.extend(errors.invalid(f"{path}.key", key, p) for p in names.qualified_name(key))
    value = taint.get("value", "")
    out.extend(errors.invalid(f"{path}.value", value, p) for p in names.label_value(value))
    effect = taint.get("effect")
    if not effect:
        out.append(errors.required(f"{path}.effect"))
    elif effect not in TAINT_EFFECTS:
        out.append(errors.not_supported(f"{path}.effect", effect, TAINT_EFFECTS))
    return out


def validate_device_taints(taints: Any, path: str) -> list[FieldError]:
    """``devices[i].taints`` of a ResourceSlice."""
    if not taints:
        return []
    if not isinstance(taints, list):
        return [errors.type_invalid(path, taints, "must be a list")]
    if len(taints) > MAX_TAINTS_PER_DEVICE:
        return [errors.too_many(path, len(taints), MAX_TAINTS_PER_DEVICE)]
    out: list[FieldError] = []
    for i, taint in enumerate(taints):
        out.extend(validate_taint(taint, f"{path}[{i}]"))
    return out


def stamp_taint(taint: Any) -> None:
    """Set a missing ``timeAdded`` to now."""
    if isinstance(taint, dict) and not taint.get("timeAdded"):
        taint["timeAdded"] = codec.format_time(codec.now())


def stamp_slice_taints(obj: Obj) -> None:
    for device in get(obj, "spec", "devices") or ():
        if isinstance(device, dict):
            for taint in device.get("taints") or ():
                stamp_taint(taint)


class DeviceTaintRuleStrategy(Strategy):
    status_subresource = True
    has_generation = True

    def default(self, obj: Obj) -> None:
        stamp_taint(get(obj, "spec", "taint"))

    def initial_status(self, obj: Obj) -> Any:
        return {}

    def prepare_update(self, new: Obj, old: Obj) -> None:
        taint, before = get(new, "spec", "taint"), get(old, "spec", "taint")
        if not isinstance(taint, dict) or not isinstance(before, dict):
            return
        if taint.get("effect") != before.get("effect") and taint.get("timeAdded") == before.get(
            "timeAdded"
        ):
            taint["timeAdded"] = ""
        stamp_taint(taint)

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [errors.required("spec")]
        out = validate_taint(spec.get("taint"), "spec.taint")
        selector = spec.get("deviceSelector")
        if selector is not None and not isinstance(selector, dict):
            out.append(errors.type_invalid("spec.deviceSelector", selector, "must be an object"))
        elif selector:
            for field in ("driver", "pool", "device"):
                value = selector.get(field)
                if value is not None and not isinstance(value, str):
                    out.append(
                        errors.type_invalid(f"spec.deviceSelector.{field}", value, "a string")
                    )
        return out

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column(
                "Effect",
                "string",
                lambda o: text(o, "spec", "taint", "effect"),
                "",
                "The effect of the taint.",
            ),
            Column(
                "Key",
                "string",
                lambda o: text(o, "spec", "taint", "key"),
                "",
                "The key of the taint.",
            ),
            columns.age_column(),
        ]


class StatuslessDeviceTaintRuleStrategy(DeviceTaintRuleStrategy):
    """A DeviceTaintRule before 1.35: no status, no status subresource."""

    status_subresource = False

    def initial_status(self, obj: Obj) -> Any:
        return None
