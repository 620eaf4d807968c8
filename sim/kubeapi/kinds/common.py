"""Validation and defaulting pieces shared by several built-in kinds."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sim.kubeapi.machinery import errors, names, selectors
from sim.kubeapi.machinery.errors import FieldError

Obj = dict[str, Any]

RESTART_POLICIES = ("Always", "OnFailure", "Never")


def get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def text(obj: Any, *path: str) -> str:
    found = get(obj, *path)
    if found is None:
        return ""
    if isinstance(found, bool):
        return "true" if found else "false"
    return str(found)


def ensure(obj: Obj, key: str) -> Obj:
    found = obj.get(key)
    if not isinstance(found, dict):
        found = obj[key] = {}
    return found


def image_pull_policy(image: str) -> str:
    tail = image.rsplit("/", 1)[-1]
    if "@" in tail:
        return "IfNotPresent"
    if ":" not in tail or tail.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def quantity_text(value: Any) -> Any:
    """A resource quantity as the API server writes it back: always a string (``4`` -> ``"4"``,
    ``0.5`` -> ``"500m"``); other values are left for validation to judge."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{round(value * 1000)}m"
    return value


def default_container(container: Obj) -> None:
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    if "image" in container and isinstance(container["image"], str):
        container.setdefault("imagePullPolicy", image_pull_policy(container["image"]))
    container.setdefault("resources", {})
    canonical_resources(container)
    for port in container.get("ports") or ():
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")


def canonical_resources(container: Obj) -> None:
    """The container's resource quantities as strings (``4`` -> ``"4"``)."""
    resources = container.get("resources")
    if isinstance(resources, dict):
        for kind in ("requests", "limits"):
            amounts = resources.get(kind)
            if isinstance(amounts, dict):
                resources[kind] = {name: quantity_text(v) for name, v in amounts.items()}


def canonical_pod_spec(spec: Obj) -> None:
    """A pod spec's quantities as the server decodes them (see ``Strategy.canonical``)."""
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or ():
            if isinstance(container, dict):
                canonical_resources(container)


def default_pod_spec(spec: Obj) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or ():
            if isinstance(container, dict):
                default_container(container)


def default_claim_template(claim: Obj) -> None:
    """A PersistentVolumeClaim embedded in a StatefulSet, defaulted as the server does."""
    claim.setdefault("apiVersion", "v1")
    claim.setdefault("kind", "PersistentVolumeClaim")
    spec = ensure(claim, "spec")
    spec.setdefault("volumeMode", "Filesystem")
    resources = spec.get("resources")
    if isinstance(resources, dict):
        for kind in ("requests", "limits"):
            amounts = resources.get(kind)
            if isinstance(amounts, dict):
                resources[kind] = {name: quantity_text(v) for name, v in amounts.items()}
    ensure(claim, "status").setdefault("phase", "Pending")


def validate_pod_spec(
    spec: Any, path: str, *, claim_volumes: Collection[str] = ()
) -> list[FieldError]:
    """``claim_volumes``: names volume mounts may use besides the spec's volumes (a
    StatefulSet's volumeClaimTemplates)."""
    if not isinstance(spec, dict):
        return [errors.required(path)]
    out: list[FieldError] = []
    volumes: set[str] = set()
    for i, volume in enumerate(spec.get("volumes") or ()):
        vpath = f"{path}.volumes[{i}]"
        name = volume.get("name") if isinstance(volume, dict) else None
        if not name:
            out.append(errors.required(f"{vpath}.name"))
            continue
        for problem in names.dns1123_label(name):
            out.append(errors.invalid(f"{vpath}.name", name, problem))
        if name in volumes:
            out.append(errors.duplicate(f"{vpath}.name", name))
        volumes.add(name)
    containers = spec.get("containers")
    if not containers:
        out.append(errors.required(f"{path}.containers"))
    seen: set[str] = set()
    mountable = volumes | set(claim_volumes)
    for key in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(key) or ()):
            out.extend(_validate_container(container, f"{path}.{key}[{i}]", seen, mountable))
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in RESTART_POLICIES:
        out.append(errors.not_supported(f"{path}.restartPolicy", policy, RESTART_POLICIES))
    gates: set[str] = set()
    for i, gate in enumerate(spec.get("schedulingGates") or ()):
        gpath = f"{path}.schedulingGates[{i}].name"
        name = gate.get("name") if isinstance(gate, dict) else None
        if not name:
            out.append(errors.required(gpath))
            continue
        for problem in names.qualified_name(name):
            out.append(errors.invalid(gpath, name, problem))
        if name in gates:
            out.append(errors.duplicate(gpath, name))
        gates.add(name)
    claims: set[str] = set()
    for i, claim in enumerate(spec.get("resourceClaims") or ()):
        cpath = f"{path}.resourceClaims[{i}]"
        name = claim.get("name") if isinstance(claim, dict) else None
        if not name:
            out.append(errors.required(f"{cpath}.name"))
            continue
        if name in claims:
            out.append(errors.duplicate(f"{cpath}.name", name))
        claims.add(name)
        sources = [k for k in ("resourceClaimName", "resourceClaimTemplateName") if claim.get(k)]
        if len(sources) != 1:
            out.append(
                errors.invalid(
                    cpath,
                    claim,
                    "must specify exactly one of: `resourceClaimName`, `resourceClaimTemplateName`",
                )
            )
    for i, toleration in enumerate(spec.get("tolerations") or ()):
        op = toleration.get("operator") if isinstance(toleration, dict) else None
        if op not in (None, "", "Exists", "Equal"):
            out.append(
                errors.not_supported(f"{path}.tolerations[{i}].operator", op, ("Equal", "Exists"))
            )
    node_selector = spec.get("nodeSelector")
    if isinstance(node_selector, dict):
        out.extend(names.validate_labels(node_selector, f"{path}.nodeSelector"))
    return out


def _validate_container(
    container: Any, path: str, seen: set[str], volumes: set[str]
) -> list[FieldError]:
    if not isinstance(container, dict):
        return [errors.type_invalid(path, container, "must be an object")]
    out: list[FieldError] = []
    name = container.get("name")
    if not name:
        out.append(errors.required(f"{path}.name"))
    else:
        for problem in names.dns1123_label(name):
            out.append(errors.invalid(f"{path}.name", name, problem))
        if name in seen:
            out.append(errors.duplicate(f"{path}.name", name))
        seen.add(name)
    if not container.get("image"):
        out.append(errors.required(f"{path}.image"))
    port_names: set[str] = set()
    for i, port in enumerate(container.get("ports") or ()):
        ppath = f"{path}.ports[{i}]"
        number = port.get("containerPort") if isinstance(port, dict) else None
        if number is None:
            out.append(errors.required(f"{ppath}.containerPort"))
        elif not isinstance(number, int) or not 1 <= number <= 65535:
            out.append(
                errors.invalid(
                    f"{ppath}.containerPort", number, "must be between 1 and 65535, inclusive"
                )
            )
        pname = port.get("name") if isinstance(port, dict) else None
        if pname:
            if pname in port_names:
                out.append(errors.duplicate(f"{ppath}.name", pname))
            port_names.add(pname)
        protocol = port.get("protocol") if isinstance(port, dict) else None
        if protocol not in (None, "TCP", "UDP", "SCTP"):
            out.append(errors.not_supported(f"{ppath}.protocol", protocol, ("SCTP", "TCP", "UDP")))
    for i, env in enumerate(container.get("env") or ()):
        if not isinstance(env, dict) or not env.get("name"):
            out.append(errors.required(f"{path}.env[{i}].name"))
    for i, mount in enumerate(container.get("volumeMounts") or ()):
        mpath = f"{path}.volumeMounts[{i}]"
        if not isinstance(mount, dict):
            continue
        mname = mount.get("name")
        if not mname:
            out.append(errors.required(f"{mpath}.name"))
        elif mname not in volumes:
            out.append(errors.not_found_field(f"{mpath}.name", mname))
        if not mount.get("mountPath"):
            out.append(errors.required(f"{mpath}.mountPath"))
    return out


def validate_pod_template(
    template: Any,
    path: str,
    *,
    selector: selectors.LabelSelector | None,
    claim_volumes: Collection[str] = (),
) -> list[FieldError]:
    if not isinstance(template, dict):
        return [errors.required(path)]
    out: list[FieldError] = []
    labels = get(template, "metadata", "labels") or {}
    out.extend(names.validate_labels(labels, f"{path}.metadata.labels"))
    if selector is not None and not selector.empty and not selector.matches(labels):
        out.append(
            errors.invalid(
                f"{path}.metadata.labels", labels, "`selector` does not match template `labels`"
            )
        )
    out.extend(validate_pod_spec(template.get("spec"), f"{path}.spec", claim_volumes=claim_volumes))
    return out


def validate_workload_selector(
    spec: Obj, path: str, kind: str
) -> tuple[list[FieldError], selectors.LabelSelector | None]:
    raw = spec.get("selector")
    if raw is None:
        return [errors.required(f"{path}.selector")], None
    out = selectors.validate_label_selector_object(raw, f"{path}.selector")
    if out:
        return out, None
    selector = selectors.from_label_selector_object(raw)
    if selector.empty:
        out.append(errors.invalid(f"{path}.selector", raw, f"empty selector is invalid for {kind}"))
    return out, selector


def non_negative(value: Any, path: str) -> list[FieldError]:
    if value is None:
        return []
    if not isinstance(value, int) or value < 0:
        return [errors.invalid(path, value, "must be greater than or equal to 0")]
    return []


def condition(obj: Obj, type_: str) -> dict[str, Any] | None:
    for cond in get(obj, "status", "conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return None
