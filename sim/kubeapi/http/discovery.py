"""Discovery documents: /version, /api, /apis, and the per group-version resource lists.

Only the classic (unaggregated) documents are served; clients that ask for aggregated
discovery fall back to them when the response is plain ``application/json``.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from sim.kubeapi.releases import Release
from sim.kubeapi.storage.resources import Registry, ResourceType

SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"],
    "binding": ["create"],
    "eviction": ["create"],
    "finalize": ["update"],
    "token": ["create"],
}
SUBRESOURCE_KINDS = {
    "binding": "Binding",
    "eviction": "Eviction",
    "token": "TokenRequest",
    "scale": "Scale",
}
SUBRESOURCE_GROUPS = {
    "eviction": ("policy", "v1"),
    "token": ("authentication.k8s.io", "v1"),
    "scale": ("autoscaling", "v1"),
}
"""Subresources whose kind lives in another group (the real discovery names it)."""


def version_info(release: Release) -> dict[str, Any]:
    """``/version`` of the release (``kubectl version`` prints its gitVersion)."""
    minor = str(release.minor)
    return {
        "major": "1",
        "minor": minor,
        "emulationMajor": "1",
        "emulationMinor": minor,
        "gitVersion": f"v1.{minor}.0-cdo.sim",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def _group(registry: Registry, group: str) -> dict[str, Any]:
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in registry.versions(group)]
    preferred = registry.preferred_version(group) or versions[0]["version"]
    return {
        "name": group,
        "versions": versions,
        "preferredVersion": {"groupVersion": f"{group}/{preferred}", "version": preferred},
    }


def api_group_list(registry: Registry) -> dict[str, Any]:
    groups = [_group(registry, g) for g in registry.groups() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    if group not in registry.groups() or not group:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(registry, group)}


def _storage_hash(rt: ResourceType) -> str:
    digest = hashlib.sha256(f"{rt.group}/{rt.storage_version}/{rt.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def _resource_entries(rt: ResourceType) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        main["shortNames"] = list(rt.short_names)
    if rt.categories:
        main["categories"] = list(rt.categories)
    main["storageVersionHash"] = _storage_hash(rt)
    out = [main]
    for sub in rt.subresources:
        out.append(
            {
                "name": f"{rt.plural}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": SUBRESOURCE_KINDS.get(sub, rt.kind),
                "verbs": SUBRESOURCE_VERBS.get(sub, ["get", "patch", "update"]),
                **_group_of(sub),
            }
        )
    return out


def resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = sorted(registry.resources(group, version), key=lambda rt: rt.plural)
    if not types:
        return None
    resources: list[dict[str, Any]] = []
    for rt in types:
        resources.extend(_resource_entries(rt))
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def _group_of(subresource: str) -> dict[str, str]:
    found = SUBRESOURCE_GROUPS.get(subresource)
    return {} if found is None else {"group": found[0], "version": found[1]}
