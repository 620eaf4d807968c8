"""``networking.k8s.io/v1`` NetworkPolicy: selectors, peers, ports, policy types.

Stored, defaulted and validated like the real server; nothing enforces them (there is no pod
network here).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from sim.kubeapi.kinds.common import ensure, get
from sim.kubeapi.machinery import errors, selectors
from sim.kubeapi.machinery.errors import FieldError
from sim.kubeapi.storage import columns
from sim.kubeapi.storage.resources import Column, Obj, Strategy

POLICY_TYPES = ("Ingress", "Egress")
PROTOCOLS = ("TCP", "UDP", "SCTP")
PORT_RANGE_MSG = "must be between 1 and 65535, inclusive"
CIDR_MSG = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
_PORT_NAME_CHARS = re.compile(r"^[-a-z0-9]+$")
_HAS_LETTER = re.compile(r"[a-z]")


def port_name(value: str) -> list[str]:
    """An IANA service name, as container and policy ports may be named."""
    problems = []
    if len(value) > 15:
        problems.append("must be no more than 15 characters")
    if not _PORT_NAME_CHARS.match(value):
        problems.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _HAS_LETTER.search(value):
        problems.append("must contain at least one letter (a-z)")
    if "--" in value:
        problems.append("must not contain consecutive hyphens")
    if value.startswith("-") or value.endswith("-"):
        problems.append("must not begin or end with a hyphen")
    return problems


def _port_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


def _validate_port(port: Any, path: str) -> list[FieldError]:
    if not isinstance(port, dict):
        return [errors.type_invalid(path, port, "must be an object")]
    out: list[FieldError] = []
    protocol = port.get("protocol")
    if protocol is not None and protocol not in PROTOCOLS:
        out.append(errors.not_supported(f"{path}.protocol", protocol, PROTOCOLS))
    number, end = port.get("port"), port.get("endPort")
    if number is None:
        if end is not None:
            out.append(
                errors.invalid(
                    f"{path}.endPort", end, "may not be specified when `port` is not specified"
                )
            )
    elif isinstance(number, int):
        if not _port_number(number):
            out.append(errors.invalid(f"{path}.port", number, PORT_RANGE_MSG))
        if end is not None:
            if isinstance(end, int) and end < number:
                out.append(
                    errors.invalid(
                        f"{path}.endPort", number, "must be greater than or equal to `port`"
                    )
                )
            if not _port_number(end):
                out.append(errors.invalid(f"{path}.endPort", end, PORT_RANGE_MSG))
    else:
        if end is not None:
            out.append(
                errors.invalid(
                    f"{path}.endPort", end, "may not be specified when `port` is non-numeric"
                )
            )
        for problem in port_name(str(number)):
            out.append(errors.invalid(f"{path}.port", number, problem))
    return out


def _network(value: Any) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(str(value), strict=False) if "/" in str(value) else None
    except ValueError:
        return None


def _validate_ip_block(block: Any, path: str) -> list[FieldError]:
    if not isinstance(block, dict):
        return [errors.type_invalid(path, block, "must be an object")]
    cidr = block.get("cidr")
    if not cidr:
        return [errors.required(f"{path}.cidr")]
    network = _network(cidr)
    if network is None:
        return [errors.invalid(f"{path}.cidr", cidr, CIDR_MSG)]
    out: list[FieldError] = []
    for i, value in enumerate(block.get("except") or ()):
        epath = f"{path}.except[{i}]"
        excluded = _network(value)
        if excluded is None:
            out.append(errors.invalid(epath, value, CIDR_MSG))
            continue
        inside = (
            excluded.version == network.version
            and excluded.network_address in network
            and excluded.prefixlen > network.prefixlen
        )
        if not inside:
            out.append(errors.invalid(epath, value, "must be a strict subset of `cidr`"))
    return out


def _validate_peer(peer: Any, path: str) -> list[FieldError]:
    if not isinstance(peer, dict):
        return [errors.type_invalid(path, peer, "must be an object")]
    out: list[FieldError] = []
    given = 0
    for key in ("podSelector", "namespaceSelector"):
        if peer.get(key) is not None:
            given += 1
            out.extend(selectors.validate_label_selector_object(peer[key], f"{path}.{key}"))
    if peer.get("ipBlock") is not None:
        given += 1
        out.extend(_validate_ip_block(peer["ipBlock"], f"{path}.ipBlock"))
    if given == 0:
        out.append(errors.required(path, "must specify a peer"))
    elif given > 1 and peer.get("ipBlock") is not None:
        out.append(errors.forbidden(path, "may not specify both ipBlock and another peer"))
    return out


def _validate_rules(spec: Obj, direction: str, peers: str) -> list[FieldError]:
    out: list[FieldError] = []
    for i, rule in enumerate(spec.get(direction) or ()):
        rpath = f"spec.{direction}[{i}]"
        if not isinstance(rule, dict):
            out.append(errors.type_invalid(rpath, rule, "must be an object"))
            continue
        for j, port in enumerate(rule.get("ports") or ()):
            out.extend(_validate_port(port, f"{rpath}.ports[{j}]"))
        for j, peer in enumerate(rule.get(peers) or ()):
            out.extend(_validate_peer(peer, f"{rpath}.{peers}[{j}]"))
    return out


def _pod_selector(o: Obj) -> str:
    raw = get(o, "spec", "podSelector")
    try:
        shown = selectors.from_label_selector_object(raw or {}).text()
    except errors.ApiError:
        return "<error>"
    return shown or "<none>"


class NetworkPolicyStrategy(Strategy):
    has_generation = True

    def default(self, obj: Obj) -> None:
        spec = ensure(obj, "spec")
        spec.setdefault("podSelector", {})
        if not spec.get("policyTypes"):
            spec["policyTypes"] = ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]
        for direction in ("ingress", "egress"):
            for rule in spec.get(direction) or ():
                for port in (rule.get("ports") or ()) if isinstance(rule, dict) else ():
                    if isinstance(port, dict):
                        port.setdefault("protocol", "TCP")

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec") or {}
        out = selectors.validate_label_selector_object(spec.get("podSelector"), "spec.podSelector")
        out.extend(_validate_rules(spec, "ingress", "from"))
        out.extend(_validate_rules(spec, "egress", "to"))
        types = spec.get("policyTypes") or []
        if len(types) > len(POLICY_TYPES):
            out.append(
                errors.invalid(
                    "spec.policyTypes", types, "may not specify more than two policyTypes"
                )
            )
            return out
        for i, kind in enumerate(types):
            if kind not in POLICY_TYPES:
                out.append(errors.not_supported(f"spec.policyTypes[{i}]", kind, POLICY_TYPES))
        return out

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column(
                "Pod-Selector",
                "string",
                _pod_selector,
                "",
                "The pods this policy applies to.",
            ),
            columns.age_column(),
        ]
