"""``discovery.k8s.io/v1`` EndpointSlice: the ready addresses behind a Service.

Stored and validated like the real server (address type, addresses of that type, ports); no
endpoint controller fills them here, since there is no pod network: whoever needs one (a test,
a simulated control plane) writes it.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from sim.kubeapi.kinds.common import get
from sim.kubeapi.machinery import errors
from sim.kubeapi.machinery.errors import FieldError
from sim.kubeapi.storage import columns
from sim.kubeapi.storage.resources import Column, Obj, Strategy

ADDRESS_TYPES = ("IPv4", "IPv6", "FQDN")
MAX_ENDPOINTS = 1000


def _address_problem(kind: str, value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return "must be a non-empty string"
    if kind == "FQDN":
        return None
    try:
        parsed = ipaddress.ip_address(value)
    except ValueError:
        return f"must be a valid {kind} address"
    if (kind == "IPv4") != (parsed.version == 4):
        return f"must be a valid {kind} address"
    return None


class EndpointSliceStrategy(Strategy):
    def validate(self, obj: Obj) -> list[FieldError]:
        out: list[FieldError] = []
        kind = obj.get("addressType")
        if kind not in ADDRESS_TYPES:
            out.append(errors.not_supported("addressType", kind, ADDRESS_TYPES))
            return out
        endpoints = obj.get("endpoints") or []
        if not isinstance(endpoints, list):
            return [errors.type_invalid("endpoints", endpoints, "must be a list")]
        if len(endpoints) > MAX_ENDPOINTS:
            out.append(errors.too_many("endpoints", len(endpoints), MAX_ENDPOINTS))
        for index, endpoint in enumerate(endpoints):
            addresses = get(endpoint, "addresses") if isinstance(endpoint, dict) else None
            path = f"endpoints[{index}].addresses"
            if not isinstance(addresses, list) or not addresses:
                out.append(errors.required(path, "must contain at least one address"))
                continue
            for number, address in enumerate(addresses):
                if (problem := _address_problem(kind, address)) is not None:
                    out.append(errors.invalid(f"{path}[{number}]", address, problem))
        return out

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        out = self.validate(new)
        if new.get("addressType") != old.get("addressType"):
            out.append(errors.invalid("addressType", new.get("addressType"), "field is immutable"))
        return out

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column("AddressType", "string", lambda o: str(o.get("addressType", "")), "", ""),
            Column(
                "Endpoints",
                "string",
                lambda o: (
                    ",".join(
                        address
                        for endpoint in o.get("endpoints") or []
                        for address in (endpoint.get("addresses") or [])
                    )
                    or "<unset>"
                ),
                "",
                "",
            ),
            columns.age_column(),
        ]
