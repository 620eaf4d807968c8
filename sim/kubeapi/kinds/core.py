"""Core (``v1``) kinds: Namespace, Node, Pod, ConfigMap, Secret, Service, ServiceAccount, Event."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import itertools
from typing import Any

from sim.kubeapi.kinds.common import (
    canonical_pod_spec,
    condition,
    default_pod_spec,
    ensure,
    get,
    text,
    validate_pod_spec,
)
from sim.kubeapi.machinery import codec, errors, names
from sim.kubeapi.machinery.errors import FieldError
from sim.kubeapi.storage import columns
from sim.kubeapi.storage.resources import Column, Obj, Strategy

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


class NamespaceStrategy(Strategy):
    status_subresource = True
    name_rule = staticmethod(names.dns1123_label)
    field_getters = {"status.phase": lambda o: text(o, "status", "phase")}

    def default(self, obj: Obj) -> None:
        spec = ensure(obj, "spec")
        spec.setdefault("finalizers", ["kubernetes"])
        name = get(obj, "metadata", "name")
        if name:
            ensure(obj["metadata"], "labels")[NAMESPACE_NAME_LABEL] = name

    def initial_status(self, obj: Obj) -> Any:
        return {"phase": "Active"}

    def prepare_update(self, new: Obj, old: Obj) -> None:
        # spec.finalizers only change through the finalize subresource.
        new["spec"] = old.get("spec", {})

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column(
                "Status",
                "string",
                lambda o: text(o, "status", "phase"),
                "",
                "The status of the namespace",
            ),
            columns.age_column(),
        ]


def _node_status(obj: Obj) -> str:
    ready = condition(obj, "Ready")
    state = "Unknown"
    if ready is not None:
        state = {"True": "Ready", "False": "NotReady"}.get(ready.get("status", ""), "Unknown")
    if get(obj, "spec", "unschedulable"):
        state += ",SchedulingDisabled"
    return state


def _node_roles(obj: Obj) -> str:
    roles = sorted(
        key.split("/", 1)[1]
        for key in (get(obj, "metadata", "labels") or {})
        if key.startswith("node-role.kubernetes.io/") and key.split("/", 1)[1]
    )
    return ",".join(roles) if roles else "<none>"


class NodeStrategy(Strategy):
    status_subresource = True
    field_getters = {"spec.unschedulable": lambda o: text(o, "spec", "unschedulable") or "false"}

    def initial_status(self, obj: Obj) -> Any:
        return obj.get("status") or {}

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column("Status", "string", _node_status, "", "The status of the node"),
            Column("Roles", "string", _node_roles, "", "The roles of the node"),
            columns.age_column(),
            Column(
                "Version",
                "string",
                lambda o: text(o, "status", "nodeInfo", "kubeletVersion"),
                "",
                "Kubelet Version reported by the node.",
            ),
        ]


# -- pods ---------------------------------------------------------------------------------------

POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)"
)


def _qos_class(spec: Obj) -> str:
    requests_seen = False
    guaranteed = True
    for container in spec.get("containers") or ():
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        if requests or limits:
            requests_seen = True
        for res in ("cpu", "memory"):
            if res not in limits or (res in requests and requests[res] != limits[res]):
                guaranteed = False
    if not requests_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _pod_ready(obj: Obj) -> str:
    statuses = get(obj, "status", "containerStatuses") or []
    total = len(get(obj, "spec", "containers") or [])
    ready = sum(1 for s in statuses if s.get("ready"))
    return f"{ready}/{total}"


def _pod_status(obj: Obj) -> str:
    if get(obj, "metadata", "deletionTimestamp"):
        return "Terminating"
    if get(obj, "spec", "schedulingGates"):
        return "SchedulingGated"
    reason = text(obj, "status", "reason")
    if reason:
        return reason
    for status in get(obj, "status", "containerStatuses") or []:
        waiting = get(status, "state", "waiting", "reason")
        if waiting:
            return str(waiting)
    return text(obj, "status", "phase") or "Pending"


def _pod_restarts(obj: Obj) -> int:
    return sum(int(s.get("restartCount", 0)) for s in get(obj, "status", "containerStatuses") or [])


def _without(spec: Obj, *keys: str) -> Obj:
    return {k: v for k, v in spec.items() if k not in keys}


class PodStrategy(Strategy):
    status_subresource = True
    has_generation = True
    return_deleted_object = True
    field_getters = {
        "spec.nodeName": lambda o: text(o, "spec", "nodeName"),
        "spec.restartPolicy": lambda o: text(o, "spec", "restartPolicy"),
        "spec.schedulerName": lambda o: text(o, "spec", "schedulerName"),
        "spec.serviceAccountName": lambda o: text(o, "spec", "serviceAccountName"),
        "spec.hostNetwork": lambda o: text(o, "spec", "hostNetwork") or "false",
        "status.phase": lambda o: text(o, "status", "phase"),
        "status.podIP": lambda o: text(o, "status", "podIP"),
        "status.nominatedNodeName": lambda o: text(o, "status", "nominatedNodeName"),
    }

    def canonical(self, obj: Obj) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            canonical_pod_spec(spec)

    def default(self, obj: Obj) -> None:
        spec = ensure(obj, "spec")
        default_pod_spec(spec)
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
        spec.setdefault("priority", 0)

    def initial_status(self, obj: Obj) -> Any:
        spec = obj.get("spec") or {}
        status: dict[str, Any] = {"phase": "Pending", "qosClass": _qos_class(spec)}
        if spec.get("schedulingGates"):
            status["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "lastProbeTime": None,
                    "lastTransitionTime": codec.format_time(codec.now()),
                    "reason": "SchedulingGated",
                    "message": "Scheduling is blocked due to non-empty scheduling gates",
                }
            ]
        return status

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec")
        out = validate_pod_spec(spec, "spec")
        if isinstance(spec, dict) and spec.get("schedulingGates") and spec.get("nodeName"):
            out.append(
                errors.forbidden(
                    "spec.nodeName", "cannot be set until all schedulingGates have been cleared"
                )
            )
        return out

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        out = validate_pod_spec(new.get("spec"), "spec")
        new_spec: Obj = new.get("spec") or {}
        old_spec: Obj = old.get("spec") or {}
        old_gates = [g.get("name") for g in old_spec.get("schedulingGates") or ()]
        for gate in new_spec.get("schedulingGates") or ():
            if gate.get("name") not in old_gates:
                out.append(
                    errors.forbidden(
                        "spec.schedulingGates",
                        "only deletion is allowed, but found new scheduling gate "
                        f"'{gate.get('name')}'",
                    )
                )
        gated = bool(old_gates)
        mutable = [
            "activeDeadlineSeconds",
            "tolerations",
            "terminationGracePeriodSeconds",
            "schedulingGates",
        ]
        if gated:
            old_sel = old_spec.get("nodeSelector") or {}
            new_sel = new_spec.get("nodeSelector") or {}
            changed = {k: v for k, v in old_sel.items() if new_sel.get(k) != v}
            if changed:
                out.append(
                    errors.invalid(
                        "spec.nodeSelector",
                        new_sel,
                        "only additions to spec.nodeSelector are allowed (no mutations or "
                        "deletions)",
                    )
                )
            mutable += ["nodeSelector", "affinity"]
        comparable_new = _without(new_spec, *mutable)
        comparable_old = _without(old_spec, *mutable)
        for key in ("containers", "initContainers"):
            for spec_copy in (comparable_new, comparable_old):
                if key in spec_copy:
                    spec_copy[key] = [
                        {k: v for k, v in c.items() if k != "image"} for c in spec_copy[key]
                    ]
        if comparable_new != comparable_old:
            out.append(errors.forbidden("spec", POD_UPDATE_FORBIDDEN))
        return out

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column(
                "Ready",
                "string",
                _pod_ready,
                "",
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            Column(
                "Status",
                "string",
                _pod_status,
                "",
                "The aggregate status of the containers in this pod.",
            ),
            Column(
                "Restarts",
                "string",
                lambda o: str(_pod_restarts(o)),
                "",
                "The number of times the containers in this pod have been restarted.",
            ),
            columns.age_column(),
            Column(
                "IP",
                "string",
                lambda o: text(o, "status", "podIP") or "<none>",
                "",
                "IP address allocated to the pod.",
                1,
            ),
            Column(
                "Node",
                "string",
                lambda o: text(o, "spec", "nodeName") or "<none>",
                "",
                "Name of the Node the Pod is assigned to.",
                1,
            ),
        ]


# -- config -------------------------------------------------------------------------------------


def _validate_data_keys(obj: Obj, field: str) -> list[FieldError]:
    out: list[FieldError] = []
    for key in obj.get(field) or {}:
        for problem in names.config_key(key):
            out.append(errors.invalid(f"{field}", key, problem))
    return out


def _immutable_data(new: Obj, old: Obj, fields: tuple[str, ...]) -> list[FieldError]:
    if not old.get("immutable"):
        return []
    out: list[FieldError] = []
    for field in fields:
        if new.get(field) != old.get(field):
            out.append(errors.forbidden(field, "field is immutable when `immutable` is set"))
    if new.get("immutable") is not True:
        out.append(errors.forbidden("immutable", "field is immutable when `immutable` is set"))
    return out


class ConfigMapStrategy(Strategy):
    def validate(self, obj: Obj) -> list[FieldError]:
        out = _validate_data_keys(obj, "data") + _validate_data_keys(obj, "binaryData")
        for key in set(obj.get("data") or {}) & set(obj.get("binaryData") or {}):
            out.append(errors.invalid("data", key, "duplicate of key present in binaryData"))
        return out

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return self.validate(new) + _immutable_data(new, old, ("data", "binaryData"))

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column(
                "Data",
                "string",
                lambda o: str(len(o.get("data") or {}) + len(o.get("binaryData") or {})),
                "",
                "Number of data entries",
            ),
            columns.age_column(),
        ]


class SecretStrategy(Strategy):
    field_getters = {"type": lambda o: text(o, "type")}

    def default(self, obj: Obj) -> None:
        obj.setdefault("type", "Opaque")
        for key, value in (obj.get("data") or {}).items():
            try:
                base64.b64decode(value or "", validate=True)
            except (binascii.Error, TypeError, ValueError) as exc:
                raise errors.bad_request(
                    'Secret in version "v1" cannot be handled as a Secret: illegal base64 '
                    f"data for key {key!r}: {exc}"
                ) from None
        string_data = obj.pop("stringData", None)
        if string_data:
            data = obj.setdefault("data", {})
            for key, value in string_data.items():
                data[key] = base64.b64encode(str(value).encode()).decode()

    def validate(self, obj: Obj) -> list[FieldError]:
        return _validate_data_keys(obj, "data")

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        out = self.validate(new) + _immutable_data(new, old, ("data",))
        if new.get("type") != old.get("type"):
            out.append(errors.immutable("type", new.get("type")))
        return out

    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column("Type", "string", lambda o: text(o, "type"), "", "The type of the secret"),
            Column(
                "Data",
                "string",
                lambda o: str(len(o.get("data") or {})),
                "",
                "Number of data entries",
            ),
            columns.age_column(),
        ]


class ServiceAccountStrategy(Strategy):
    def columns(self) -> list[Column]:
        return [
            columns.name_column(),
            Column(
                "Secrets",
                "string",
                lambda o: str(len(o.get("secrets") or [])),
                "",
                "Number of secrets",
            ),
            columns.age_column(),
        ]


# -- services -----------------------------------------------------------------------------------

SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")


class ServiceStrategy(Strategy):
    status_subresource = True
    allow_create_on_update = True
    name_rule = staticmethod(names.dns1123_label)
    field_getters = {
        "spec.clusterIP": lambda o: text(o, "spec", "clusterIP"),
        "spec.type": lambda o: text(o, "spec", "type"),
    }

    def __init__(self) -> None:
        self._next_ip = itertools.count(10)
        self._network = ipaddress.IPv4Network("10.96.0.0/12")

    def default(self, obj: Obj) -> None:
        spec = ensure(obj, "spec")
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec["type"] != "ExternalName":
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
            spec.setdefault("internalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or ():
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                if "port" in port:
                    port.setdefault("targetPort", port["port"])

    def prepare_create(self, obj: Obj) -> None:
        spec = ensure(obj, "spec")
        if spec.get("type") != "ExternalName" and not spec.get("clusterIP"):
            spec["clusterIP"] = str(self._network.network_address + next(self._next_ip))
        if spec.get("clusterIP"):
            spec.setdefault("clusterIPs", [spec["clusterIP"]])

    def initial_status(self, obj: Obj) -> Any:
        return {"loadBalancer": {}}

    def prepare_update(self, new: Obj, old: Obj) -> None:
        spec = ensure(new, "spec")
        old_spec = old.get("spec") or {}
        if not spec.get("clusterIP") and old_spec.get("clusterIP"):
            spec["clusterIP"] = old_spec["clusterIP"]
            spec["clusterIPs"] = old_spec.get("clusterIPs", [old_spec["clusterIP"]])

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec") or {}
        out: list[FieldError] = []
        kind = spec.get("type", "ClusterIP")
        if kind not in SERVICE_TYPES:
            out.append(errors.not_supported("spec.type", kind, SERVICE_TYPES))
        ports = spec.get("ports") or []
        if not ports and kind != "ExternalName" and spec.get("clusterIP") != "None":
            out.append(errors.required("spec.ports"))
        seen: set[str] = set()
        for i, port in enumerate(ports):
            path = f"spec.ports[{i}]"
            number = port.get("port")
            if not isinstance(number, int) or not 1 <= number <= 65535:
                out.append(
                    errors.invalid(f"{path}.port", number, "must be between 1 and 65535, inclusive")
                )
            if len(ports) > 1 and not port.get("name"):
                out.append(errors.required(f"{path}.name"))
            pname = port.get("name", "")
            if pname in seen:
                out.append(errors.duplicate(f"{path}.name", pname))
            seen.add(pname)
        return out

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        out = self.validate(new)
        old_ip = get(old, "spec", "clusterIP")
        new_ip = get(new, "spec", "clusterIP")
        if old_ip and new_ip != old_ip:
            out.append(errors.immutable("spec.clusterIP", new_ip))
        return out

    def columns(self) -> list[Column]:
        def ports(o: Obj) -> str:
            shown = [
                f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in get(o, "spec", "ports") or []
            ]
            return ",".join(shown) or "<none>"

        return [
            columns.name_column(),
            Column(
                "Type", "string", lambda o: text(o, "spec", "type"), "", "The type of the service."
            ),
            Column(
                "Cluster-IP",
                "string",
                lambda o: text(o, "spec", "clusterIP") or "<none>",
                "",
                "The IP address of the service.",
            ),
            Column(
                "External-IP",
                "string",
                lambda o: "<none>",
                "",
                "The external IP address of the service.",
            ),
            Column("Port(s)", "string", ports, "", "The port(s) of the service."),
            columns.age_column(),
        ]


# -- events -------------------------------------------------------------------------------------

EVENT_FIELDS = {
    "involvedObject.kind": ("involvedObject", "kind"),
    "involvedObject.namespace": ("involvedObject", "namespace"),
    "involvedObject.name": ("involvedObject", "name"),
    "involvedObject.uid": ("involvedObject", "uid"),
    "involvedObject.apiVersion": ("involvedObject", "apiVersion"),
    "involvedObject.resourceVersion": ("involvedObject", "resourceVersion"),
    "involvedObject.fieldPath": ("involvedObject", "fieldPath"),
    "reason": ("reason",),
    "reportingComponent": ("reportingComponent",),
    "source": ("source", "component"),
    "type": ("type",),
}


def _event_getter(path: tuple[str, ...]) -> Any:
    return lambda o: text(o, *path)


class EventStrategy(Strategy):
    allow_create_on_update = True
    field_getters = {
        **{name: _event_getter(path) for name, path in EVENT_FIELDS.items()},
        # events.k8s.io/v1 spellings of the same fields.
        **{
            name.replace("involvedObject", "regarding"): _event_getter(path)
            for name, path in EVENT_FIELDS.items()
            if name.startswith("involvedObject")
        },
        "reportingController": _event_getter(("reportingComponent",)),
    }

    def validate(self, obj: Obj) -> list[FieldError]:
        out: list[FieldError] = []
        involved = obj.get("involvedObject")
        if not isinstance(involved, dict):
            out.append(errors.required("involvedObject"))
            return out
        ns = get(obj, "metadata", "namespace")
        inv_ns = involved.get("namespace")
        if inv_ns and ns and inv_ns != ns:
            out.append(
                errors.invalid("involvedObject.namespace", inv_ns, "does not match event.namespace")
            )
        if obj.get("eventTime"):
            for key in ("reportingComponent", "reportingInstance", "action"):
                if not obj.get(key):
                    out.append(errors.required(key))
        return out

    def columns(self) -> list[Column]:
        def last_seen(o: Obj) -> str:
            return columns.since(
                o.get("lastTimestamp")
                or o.get("eventTime")
                or get(o, "metadata", "creationTimestamp")
            )

        def involved(o: Obj) -> str:
            return (
                f"{text(o, 'involvedObject', 'kind').lower()}/{text(o, 'involvedObject', 'name')}"
            )

        return [
            Column("Last Seen", "string", last_seen, "", "Time since the event was last observed."),
            Column("Type", "string", lambda o: text(o, "type"), "", "Event type."),
            Column("Reason", "string", lambda o: text(o, "reason"), "", "Why the event happened."),
            Column("Object", "string", involved, "", "The object the event is about."),
            Column(
                "Message", "string", lambda o: text(o, "message"), "", "Human readable description."
            ),
        ]
