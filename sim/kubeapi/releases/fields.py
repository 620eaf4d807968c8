"""What a release does to DRA objects on write: fields of disabled gates are dropped, and the
rules that changed between releases.

kube-apiserver's strategies drop a field whose feature gate is off before they validate a
create or an update ("dropDisabledFields"), unless the stored object already uses that feature,
so that turning a gate off never breaks objects written while it was on. The same here, per
stored kind, on the stored (v1) form:

- ResourceSlice: ``devices[].taints`` (DRADeviceTaints); ``spec.sharedCounters``,
  ``spec.perDeviceNodeSelection`` and ``devices[].consumesCounters|nodeName|nodeSelector|allNodes``
  (DRAPartitionableDevices); ``devices[].bindingConditions|bindingFailureConditions|bindsToNode``
  (DRADeviceBindingConditions); ``devices[].allowMultipleAllocations`` (DRAConsumableCapacity);
- ResourceClaim and ResourceClaimTemplate specs: ``requests[].firstAvailable``
  (DRAPrioritizedList), ``tolerations`` (DRADeviceTaints), ``exactly.adminAccess``
  (DRAAdminAccess), ``capacity`` and ``constraints[].distinctAttribute`` (DRAConsumableCapacity);
- ResourceClaim status: results' ``shareID|consumedCapacity`` and ``devices[].shareID``
  (DRAConsumableCapacity), results' ``bindingConditions|bindingFailureConditions``
  (DRADeviceBindingConditions), ``status.devices`` (DRAResourceClaimDeviceStatus).

Rules that differ: before 1.35 a device taint's effect is ``NoSchedule`` or ``NoExecute`` only
(``None`` came with 1.35, KEP-5055).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sim.kubeapi.machinery import errors
from sim.kubeapi.machinery.errors import FieldError
from sim.kubeapi.releases.release import Release

Obj = dict[str, Any]

SLICES = "resource.k8s.io/resourceslices"
CLAIMS = "resource.k8s.io/resourceclaims"
TEMPLATES = "resource.k8s.io/resourceclaimtemplates"
TAINT_RULES = "resource.k8s.io/devicetaintrules"

EFFECT_NONE_SINCE = 35
EFFECTS_BEFORE_NONE = ("NoExecute", "NoSchedule")


def _dicts(value: Any) -> Iterator[Obj]:
    for item in value if isinstance(value, list) else ():
        if isinstance(item, dict):
            yield item


def _at(obj: Obj | None, *path: str) -> Any:
    node: Any = obj
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node


@dataclass(frozen=True)
class _Dropper:
    """One gate's fields of one part of an object: dropped unless the stored one uses them."""

    gate: str
    in_use: Callable[[Obj], bool]
    drop: Callable[[Obj], object]

    def apply(self, new: Obj, old: Obj | None, release: Release) -> None:
        if release.enabled(self.gate) or (old is not None and self.in_use(old)):
            return
        self.drop(new)


def _pop_all(items: Iterator[Obj], *keys: str) -> None:
    for item in items:
        for key in keys:
            item.pop(key, None)


def _any_has(items: Iterator[Obj], *keys: str) -> bool:
    return any(item.get(key) not in (None, [], {}) for item in items for key in keys)


# -- ResourceSlice -------------------------------------------------------------------------------

_PARTITIONABLE_SPEC = ("sharedCounters", "perDeviceNodeSelection")
_PARTITIONABLE_DEVICE = ("consumesCounters", "nodeName", "nodeSelector", "allNodes")
_BINDING_DEVICE = ("bindingConditions", "bindingFailureConditions", "bindsToNode")


def _devices(spec: Obj) -> Iterator[Obj]:
    return _dicts(spec.get("devices"))


def _drop_partitionable(spec: Obj) -> None:
    for key in _PARTITIONABLE_SPEC:
        spec.pop(key, None)
    _pop_all(_devices(spec), *_PARTITIONABLE_DEVICE)


def _uses_partitionable(spec: Obj) -> bool:
    return any(spec.get(k) is not None for k in _PARTITIONABLE_SPEC) or _any_has(
        _devices(spec), *_PARTITIONABLE_DEVICE
    )


_SLICE_SPEC = (
    _Dropper(
        "DRADeviceTaints",
        lambda s: _any_has(_devices(s), "taints"),
        lambda s: _pop_all(_devices(s), "taints"),
    ),
    _Dropper("DRAPartitionableDevices", _uses_partitionable, _drop_partitionable),
    _Dropper(
        "DRADeviceBindingConditions",
        lambda s: _any_has(_devices(s), *_BINDING_DEVICE),
        lambda s: _pop_all(_devices(s), *_BINDING_DEVICE),
    ),
    _Dropper(
        "DRAConsumableCapacity",
        lambda s: _any_has(_devices(s), "allowMultipleAllocations"),
        lambda s: _pop_all(_devices(s), "allowMultipleAllocations"),
    ),
)


# -- ResourceClaim spec ------------------------------------------------------------------------


def _requests(spec: Obj) -> Iterator[Obj]:
    return _dicts(_at(spec, "devices", "requests"))


def _exactly(spec: Obj) -> Iterator[Obj]:
    for request in _requests(spec):
        if isinstance(request.get("exactly"), dict):
            yield request["exactly"]


def _subrequests(spec: Obj) -> Iterator[Obj]:
    for request in _requests(spec):
        yield from _dicts(request.get("firstAvailable"))


def _choices(spec: Obj) -> Iterator[Obj]:
    """Every place a device is asked for: ``exactly`` and each ``firstAvailable`` entry."""
    yield from _exactly(spec)
    yield from _subrequests(spec)


def _constraints(spec: Obj) -> Iterator[Obj]:
    return _dicts(_at(spec, "devices", "constraints"))


def _drop_consumable(spec: Obj) -> None:
    _pop_all(_constraints(spec), "distinctAttribute")
    _pop_all(_choices(spec), "capacity")


def _uses_consumable(spec: Obj) -> bool:
    return _any_has(_constraints(spec), "distinctAttribute") or _any_has(_choices(spec), "capacity")


_CLAIM_SPEC = (
    _Dropper(
        "DRAPrioritizedList",
        lambda s: _any_has(_requests(s), "firstAvailable"),
        lambda s: _pop_all(_requests(s), "firstAvailable"),
    ),
    _Dropper(
        "DRADeviceTaints",
        lambda s: _any_has(_choices(s), "tolerations"),
        lambda s: _pop_all(_choices(s), "tolerations"),
    ),
    _Dropper(
        "DRAAdminAccess",
        lambda s: _any_has(_exactly(s), "adminAccess"),
        lambda s: _pop_all(_exactly(s), "adminAccess"),
    ),
    _Dropper("DRAConsumableCapacity", _uses_consumable, _drop_consumable),
)


# -- ResourceClaim status ----------------------------------------------------------------------


def _results(status: Obj) -> Iterator[Obj]:
    return _dicts(_at(status, "allocation", "devices", "results"))


def _device_statuses(status: Obj) -> Iterator[Obj]:
    return _dicts(status.get("devices"))


def _drop_shares(status: Obj) -> None:
    _pop_all(_results(status), "shareID", "consumedCapacity")
    _pop_all(_device_statuses(status), "shareID")


def _uses_shares(status: Obj) -> bool:
    return _any_has(_results(status), "shareID", "consumedCapacity") or _any_has(
        _device_statuses(status), "shareID"
    )


_CLAIM_STATUS = (
    _Dropper("DRAConsumableCapacity", _uses_shares, _drop_shares),
    _Dropper(
        "DRADeviceBindingConditions",
        lambda s: _any_has(_results(s), "bindingConditions", "bindingFailureConditions"),
        lambda s: _pop_all(_results(s), "bindingConditions", "bindingFailureConditions"),
    ),
    _Dropper(
        "DRAResourceClaimDeviceStatus",
        lambda s: bool(s.get("devices")),
        lambda s: s.pop("devices", None),
    ),
)


# -- entry points ------------------------------------------------------------------------------

_SPEC_PATHS: dict[str, tuple[tuple[str, ...], tuple[_Dropper, ...]]] = {
    SLICES: (("spec",), _SLICE_SPEC),
    CLAIMS: (("spec",), _CLAIM_SPEC),
    TEMPLATES: (("spec", "spec"), _CLAIM_SPEC),
}


def drop_disabled_fields(storage: str, new: Obj, old: Obj | None, release: Release) -> None:
    """Drop from ``new`` (a create when ``old`` is None) what the release's gates disable."""
    found = _SPEC_PATHS.get(storage)
    if found is None:
        return
    path, droppers = found
    spec = _at(new, *path)
    if not isinstance(spec, dict):
        return
    before = _at(old, *path) if old is not None else None
    for dropper in droppers:
        dropper.apply(spec, before if isinstance(before, dict) else None, release)


def drop_disabled_status_fields(storage: str, new: Obj, old: Obj, release: Release) -> None:
    """Drop from a status update what the release's gates disable."""
    status = new.get("status")
    if storage != CLAIMS or not isinstance(status, dict):
        return
    before = old.get("status")
    for dropper in _CLAIM_STATUS:
        dropper.apply(status, before if isinstance(before, dict) else None, release)


def release_errors(storage: str, obj: Obj, release: Release) -> list[FieldError]:
    """What the release's validation refuses beyond the newest release's rules."""
    if release.minor >= EFFECT_NONE_SINCE:
        return []
    if storage == SLICES:
        taints = [
            (f"spec.devices[{i}].taints[{j}].effect", taint.get("effect"))
            for i, device in enumerate(_dicts(_at(obj, "spec", "devices")))
            for j, taint in enumerate(_dicts(device.get("taints")))
        ]
    elif storage == TAINT_RULES:
        taints = [("spec.taint.effect", _at(obj, "spec", "taint", "effect"))]
    else:
        return []
    return [
        errors.not_supported(path, effect, EFFECTS_BEFORE_NONE)
        for path, effect in taints
        if effect == "None"
    ]
