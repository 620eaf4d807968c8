"""``resource.k8s.io`` (Dynamic Resource Allocation): DeviceClass, ResourceClaim,
ResourceClaimTemplate and ResourceSlice, stored as v1 and also served as v1beta1 (device taints
and DeviceTaintRule are in :mod:`sim.kubeapi.kinds.devicetaints`).

v1beta1 differs from v1 in two places, converted here: a claim's device request keeps its
class, selectors and count directly on the request (v1 nests them under ``exactly``), and
a slice's device keeps its attributes and capacity under ``basic``.
"""

from __future__ import annotations

from typing import Any

from sim.kubeapi.kinds.common import get, text
from sim.kubeapi.kinds.devicetaints import stamp_slice_taints, validate_device_taints
from sim.kubeapi.machinery import codec, errors, names
from sim.kubeapi.machinery.errors import FieldError
from sim.kubeapi.storage import columns
from sim.kubeapi.storage.resources import Column, Converter, Obj, Strategy

_EXACT_FIELDS = (
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
    "tolerations",
    "capacity",
)
_SLICE_SELECTORS = ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")


def _requests_parent(obj: Obj, template: bool) -> Obj | None:
    spec = get(obj, "spec", "spec") if template else obj.get("spec")
    devices = get(spec, "devices")
    return devices if isinstance(devices, dict) else None


def _claim_to_v1(obj: Obj, template: bool) -> Obj:
    obj = codec.copy(obj)
    devices = _requests_parent(obj, template)
    if devices is not None:
        converted = []
        for request in devices.get("requests") or ():
            if not isinstance(request, dict) or "exactly" in request or "firstAvailable" in request:
                converted.append(request)
                continue
            exactly = {k: request[k] for k in _EXACT_FIELDS if k in request}
            out = {k: v for k, v in request.items() if k not in _EXACT_FIELDS}
            out["exactly"] = exactly
            converted.append(out)
        if "requests" in devices:
            devices["requests"] = converted
    return obj


def _claim_to_v1beta1(obj: Obj, template: bool) -> Obj:
    devices = _requests_parent(obj, template)
    if devices is not None and "requests" in devices:
        converted = []
        for request in devices["requests"] or ():
            exactly = request.get("exactly") if isinstance(request, dict) else None
            if isinstance(exactly, dict):
                flat = {k: v for k, v in request.items() if k != "exactly"}
                flat.update(exactly)
                converted.append(flat)
            else:
                converted.append(request)
        devices["requests"] = converted
    return obj


def _slice_to_v1(obj: Obj) -> Obj:
    obj = codec.copy(obj)
    for device in get(obj, "spec", "devices") or ():
        basic = device.pop("basic", None) if isinstance(device, dict) else None
        if isinstance(basic, dict):
            device.update(basic)
    return obj


def _slice_to_v1beta1(obj: Obj) -> Obj:
    devices = get(obj, "spec", "devices")
    if isinstance(devices, list):
        converted = []
        for device in devices:
            if isinstance(device, dict) and "basic" not in device:
                basic = {k: v for k, v in device.items() if k != "name"}
                converted.append({"name": device.get("name"), "basic": basic})
            else:
                converted.append(device)
        obj["spec"]["devices"] = converted
    return obj


CLAIM_V1BETA1 = Converter(lambda o: _claim_to_v1(o, False), lambda o: _claim_to_v1beta1(o, False))
TEMPLATE_V1BETA1 = Converter(lambda o: _claim_to_v1(o, True), lambda o: _claim_to_v1beta1(o, True))
SLICE_V1BETA1 = Converter(_slice_to_v1, _slice_to_v1beta1)


def _default_requests(devices: Any) -> None:
    for request in get(devices, "requests") or ():
        exactly = request.get("exactly") if isinstance(request, dict) else None
        if isinstance(exactly, dict):
            exactly.setdefault("allocationMode", "ExactCount")
            if exactly["allocationMode"] == "ExactCount":
                exactly.setdefault("count", 1)


def _validate_claim_spec(spec: Any, path: str) -> list[FieldError]:
    if not isinstance(spec, dict):
        return []
    out: list[FieldError] = []
    seen: set[str] = set()
    for i, request in enumerate(get(spec, "devices", "requests") or ()):
        rpath = f"{path}.devices.requests[{i}]"
        if not isinstance(request, dict):
            out.append(errors.type_invalid(rpath, request, "must be an object"))
            continue
        name = request.get("name")
        if not name:
            out.append(errors.required(f"{rpath}.name"))
        else:
            for problem in names.dns1123_label(name):
                out.append(errors.invalid(f"{rpath}.name", name, problem))
            if name in seen:
                out.append(errors.duplicate(f"{rpath}.name", name))
            seen.add(name)
        has_exact = isinstance(request.get("exactly"), dict)
        has_first = bool(request.get("firstAvailable"))
        if has_exact == has_first:
            out.append(
                errors.required(rpath, "exactly one of `exactly` or `firstAvailable` is required")
            )
        if has_exact:
            exactly = request["exactly"]
            if not exactly.get("deviceClassName"):
                out.append(errors.required(f"{rpath}.exactly.deviceClassName"))
            mode = exactly.get("allocationMode", "ExactCount")
            if mode not in ("ExactCount", "All"):
                out.append(
                    errors.not_supported(
                        f"{rpath}.exactly.allocationMode", mode, ("All", "ExactCount")
                    )
                )
            count = exactly.get("count")
            if (
                mode == "ExactCount"
                and count is not None
                and (not isinstance(count, int) or count <= 0)
            ):
                out.append(
                    errors.invalid(f"{rpath}.exactly.count", count, "must be greater than zero")
                )
            for j, selector in enumerate(exactly.get("selectors") or ()):
                if not get(selector, "cel", "expression"):
                    out.append(errors.required(f"{rpath}.exactly.selectors[{j}].cel.expression"))
    return out


def _claim_state(o: Obj) -> str:
    parts = []
    if get(o, "status", "allocation"):
        parts.append("allocated")
    if get(o, "status", "reservedFor"):
        parts.append("reserved")
    if get(o, "metadata", "deletionTimestamp"):
        parts.append("deleted")
    return ",".join(parts) or "pending"


class ResourceClaimStrategy(Strategy):
    status_subresource = True
    has_generation = True

    def default(self, obj: Obj) -> None:
        _default_requests(get(obj, "spec", "devices"))

    def initial_status(self, obj: Obj) -> Any:
        return None

    def validate(self, obj: Obj) -> list[FieldError]:
        return _validate_claim_spec(obj.get("spec"), "spec")

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        out = self.validate(new)
        if new.get("spec") != old.get("spec"):
            out.append(errors.immutable("spec", new.get("spec")))
        return out

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        reserved = get(new, "status", "reservedFor") or []
        if len(reserved) > 256:
            return [errors.too_many("status.reservedFor", len(reserved), 256)]
        if reserved and not get(new, "status", "allocation"):
            return [
                errors.forbidden(
                    "status.reservedFor", "may not be specified when `allocated` is not set"
                )
            ]
        return []

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column("State", "string", _claim_state, "", "The state of the claim."),
            columns.age_column(),
        ]


class ResourceClaimTemplateStrategy(Strategy):
    has_generation = True

    def default(self, obj: Obj) -> None:
        _default_requests(get(obj, "spec", "spec", "devices"))

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [errors.required("spec")]
        return _validate_claim_spec(spec.get("spec"), "spec.spec")

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        out = self.validate(new)
        if new.get("spec") != old.get("spec"):
            out.append(errors.immutable("spec", new.get("spec")))
        return out


class DeviceClassStrategy(Strategy):
    has_generation = True

    def validate(self, obj: Obj) -> list[FieldError]:
        out: list[FieldError] = []
        for i, selector in enumerate(get(obj, "spec", "selectors") or ()):
            if not get(selector, "cel", "expression"):
                out.append(errors.required(f"spec.selectors[{i}].cel.expression"))
        return out


class ResourceSliceStrategy(Strategy):
    has_generation = True
    field_getters = {
        "spec.nodeName": lambda o: text(o, "spec", "nodeName"),
        "spec.driver": lambda o: text(o, "spec", "driver"),
    }

    def default(self, obj: Obj) -> None:
        stamp_slice_taints(obj)

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [errors.required("spec")]
        out: list[FieldError] = []
        driver = spec.get("driver")
        if not driver:
            out.append(errors.required("spec.driver"))
        else:
            for problem in names.dns1123_subdomain(driver):
                out.append(errors.invalid("spec.driver", driver, problem))
        pool = spec.get("pool")
        if not isinstance(pool, dict):
            out.append(errors.required("spec.pool"))
        else:
            if not pool.get("name"):
                out.append(errors.required("spec.pool.name"))
            count = pool.get("resourceSliceCount")
            if not isinstance(count, int) or count <= 0:
                out.append(
                    errors.invalid(
                        "spec.pool.resourceSliceCount", count, "must be greater than zero"
                    )
                )
            generation = pool.get("generation", 0)
            if not isinstance(generation, int) or generation < 0:
                out.append(
                    errors.invalid(
                        "spec.pool.generation", generation, "must be greater than or equal to zero"
                    )
                )
        chosen = [k for k in _SLICE_SELECTORS if spec.get(k)]
        if not chosen:
            out.append(
                errors.required(
                    "spec",
                    "exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                    "`perDeviceNodeSelection` is required",
                )
            )
        elif len(chosen) > 1:
            out.append(
                errors.invalid(
                    "spec",
                    chosen,
                    "exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                    "`perDeviceNodeSelection` is required, but multiple fields are set",
                )
            )
        seen: set[str] = set()
        for i, device in enumerate(spec.get("devices") or ()):
            dpath = f"spec.devices[{i}].name"
            name = device.get("name") if isinstance(device, dict) else None
            if not name:
                out.append(errors.required(dpath))
                continue
            for problem in names.dns1123_label(name):
                out.append(errors.invalid(dpath, name, problem))
            if name in seen:
                out.append(errors.duplicate(dpath, name))
            seen.add(name)
            out.extend(validate_device_taints(device.get("taints"), f"spec.devices[{i}].taints"))
        return out

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        out = self.validate(new)
        for key in ("nodeName", "driver"):
            if get(new, "spec", key) != get(old, "spec", key):
                out.append(errors.immutable(f"spec.{key}", get(new, "spec", key)))
        return out

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column(
                "Node",
                "string",
                lambda o: text(o, "spec", "nodeName") or "<none>",
                "",
                "The node of the slice.",
            ),
            Column(
                "Driver",
                "string",
                lambda o: text(o, "spec", "driver"),
                "",
                "The driver of the slice.",
            ),
            Column(
                "Pool",
                "string",
                lambda o: text(o, "spec", "pool", "name"),
                "",
                "The pool of the slice.",
            ),
            columns.age_column(),
        ]
