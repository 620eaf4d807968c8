"""OpenAPI v3: the index at /openapi/v3 and one document per group-version.

Documents list every served path with its operations (each tagged with
``x-kubernetes-group-version-kind`` and ``x-kubernetes-action``, PATCH ones accepting
``fieldValidation``), so kubectl uses server-side field validation; schemas come from the
built-in definitions (with their patch strategies, so kubectl computes strategic merge
patches from them) and from each CRD version's ``openAPIV3Schema``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sim.kubeapi.machinery import codec
from sim.kubeapi.storage.resources import Registry, ResourceType
from sim.kubeapi.validation import builtin_schemas

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
PATCH = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
STATUS = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"


def gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _hash(registry: Registry, key: str) -> str:
    return hashlib.sha256(f"{registry.generation}:{key}".encode()).hexdigest()[:32].upper()


def index(registry: Registry) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for group in registry.groups():
        for version in registry.versions(group):
            key = gv_path(group, version)
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={_hash(registry, key)}"}
    return {"paths": paths}


def _convert(node: Any) -> Any:
    """JSON Schema export -> OpenAPI v3 component: refs and nullable type lists."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                out[key] = "#/components/schemas/" + value.rsplit("/", 1)[-1]
            elif key == "type" and isinstance(value, list):
                kinds = [t for t in value if t != "null"]
                if kinds:
                    out[key] = kinds[0]
            else:
                out[key] = _convert(value)
        if isinstance(out.get("$ref"), str) and len(out) > 1:
            ref = out.pop("$ref")
            out["allOf"] = [{"$ref": ref}]
        return out
    if isinstance(node, list):
        return [_convert(v) for v in node]
    return node


def _closure(definitions: dict[str, Any], roots: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in found or name not in definitions:
            continue
        node = definitions[name]
        found[name] = _convert(node)
        stack = [node]
        while stack:
            current = stack.pop()
            if isinstance(current, dict):
                ref = current.get("$ref")
                if isinstance(ref, str):
                    pending.append(ref.rsplit("/", 1)[-1])
                stack.extend(current.values())
            elif isinstance(current, list):
                stack.extend(current)
    return found


def _crd_schema_name(rt: ResourceType) -> str:
    reversed_group = ".".join(reversed(rt.group.split(".")))
    return f"{reversed_group}.{rt.version}.{rt.kind}"


def _param(name: str, description: str, kind: str = "string") -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "description": description,
        "schema": {"type": kind, "uniqueItems": True},
    }


WRITE_PARAMS = [
    _param("dryRun", "When present, indicates that modifications should not be persisted."),
    _param(
        "fieldManager",
        "fieldManager is a name associated with the actor or entity that is making these changes.",
    ),
    _param(
        "fieldValidation",
        "fieldValidation instructs the server on how to handle objects in the request "
        "containing unknown or duplicate fields. Valid values are: Ignore, Warn, Strict.",
    ),
]
LIST_PARAMS = [
    _param(name, name)
    for name in (
        "allowWatchBookmarks",
        "continue",
        "fieldSelector",
        "labelSelector",
        "limit",
        "resourceVersion",
        "resourceVersionMatch",
        "sendInitialEvents",
        "timeoutSeconds",
        "watch",
    )
]


def _operation(
    rt: ResourceType,
    action: str,
    schema_ref: str,
    *,
    params: list[dict[str, Any]],
    body: dict[str, Any] | None = None,
    suffix: str = "",
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "description": f"{action} {rt.kind}",
        "operationId": f"{action}{rt.kind}{suffix}",
        "parameters": params,
        "responses": {
            "200": {
                "description": "OK",
                "content": {"application/json": {"schema": {"$ref": schema_ref}}},
            },
            "401": {"description": "Unauthorized"},
        },
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {
            "group": rt.group,
            "version": rt.version,
            "kind": rt.kind,
        },
    }
    if body is not None:
        op["requestBody"] = body
    return op


def _paths_for(rt: ResourceType, schema_name: str) -> dict[str, Any]:
    ref = f"#/components/schemas/{schema_name}"
    base = f"/api/{rt.version}" if not rt.group else f"/apis/{rt.group}/{rt.version}"
    collection = (
        f"{base}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{base}/{rt.plural}"
    )
    item = f"{collection}/{{name}}"
    json_body = {"content": {"*/*": {"schema": {"$ref": ref}}}, "required": True}
    patch_types = ["application/json-patch+json", "application/merge-patch+json"]
    if not rt.custom:
        patch_types.append("application/strategic-merge-patch+json")
    patch_types.append("application/apply-patch+yaml")
    patch_body = {
        "content": {t: {"schema": {"$ref": f"#/components/schemas/{PATCH}"}} for t in patch_types},
        "required": True,
    }
    patch_params = [
        *WRITE_PARAMS,
        _param("force", "Force is going to force Apply requests.", "boolean"),
    ]
    paths: dict[str, Any] = {
        collection: {
            "get": _operation(rt, "list", ref, params=LIST_PARAMS, suffix="List"),
            "post": _operation(rt, "post", ref, params=WRITE_PARAMS, body=json_body),
            "delete": _operation(
                rt, "deletecollection", ref, params=LIST_PARAMS, suffix="Collection"
            ),
        },
        item: {
            "get": _operation(rt, "get", ref, params=[]),
            "put": _operation(rt, "put", ref, params=WRITE_PARAMS, body=json_body),
            "patch": _operation(rt, "patch", ref, params=patch_params, body=patch_body),
            "delete": _operation(rt, "delete", ref, params=[]),
        },
    }
    if rt.namespaced:
        paths[f"{base}/{rt.plural}"] = {
            "get": _operation(rt, "list", ref, params=LIST_PARAMS, suffix="ForAllNamespaces")
        }
    if "status" in rt.subresources:
        paths[f"{item}/status"] = {
            "get": _operation(rt, "get", ref, params=[], suffix="Status"),
            "put": _operation(rt, "put", ref, params=WRITE_PARAMS, body=json_body, suffix="Status"),
            "patch": _operation(
                rt, "patch", ref, params=patch_params, body=patch_body, suffix="Status"
            ),
        }
    return paths


def gv_document(
    registry: Registry,
    group: str,
    version: str,
    *,
    server_version: str,
    schemas: builtin_schemas.BuiltinSchemas,
) -> dict[str, Any] | None:
    """The OpenAPI v3 document of one group version, from the published ``schemas`` of the
    emulated release."""
    types = registry.resources(group, version)
    if not types:
        return None
    definitions = schemas.definitions
    roots = [OBJECT_META, PATCH, STATUS]
    components: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    for rt in sorted(types, key=lambda t: t.plural):
        if rt.custom:
            name = _crd_schema_name(rt)
            root: dict[str, Any] = (
                dict(codec.copy(rt.schema.root)) if rt.schema is not None else {"type": "object"}
            )
            props = root.setdefault("properties", {})
            props["apiVersion"] = {"type": "string"}
            props["kind"] = {"type": "string"}
            props["metadata"] = {"allOf": [{"$ref": f"#/components/schemas/{OBJECT_META}"}]}
            root["x-kubernetes-group-version-kind"] = [
                {"group": rt.group, "version": rt.version, "kind": rt.kind}
            ]
            components[name] = root
        else:
            found = schemas.definition_name(rt.group, rt.version, rt.kind)
            name = found or f"{rt.group or 'core'}.{rt.version}.{rt.kind}"
            if found:
                roots.append(found)
            else:
                components[name] = {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "x-kubernetes-group-version-kind": [
                        {"group": rt.group, "version": rt.version, "kind": rt.kind}
                    ],
                }
        paths.update(_paths_for(rt, name))
    components.update(_closure(definitions, roots))
    components.setdefault(
        PATCH,
        {
            "type": "object",
            "description": "Patch is provided to give a concrete name and type to the "
            "Kubernetes PATCH request body.",
        },
    )
    components.setdefault(OBJECT_META, {"type": "object"})
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": server_version},
        "paths": paths,
        "components": {"schemas": components},
    }
