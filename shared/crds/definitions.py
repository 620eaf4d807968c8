"""The CustomResourceDefinitions, built from the Structs, and the API resources they serve."""

from __future__ import annotations

from typing import Any

import msgspec

from shared.crds.computedomain import ROOT_RULES, SPEC_RULES, ComputeDomainSpec, ComputeDomainStatus
from shared.crds.names import CDO_GROUP, NVIDIA_GROUP
from shared.crds.openapi import Schema, struct_schema
from shared.crds.placement import PlacementSpec
from shared.kube.resources import Resource

COMPUTE_DOMAINS = Resource(
    group=NVIDIA_GROUP,
    version="v1beta1",
    plural="computedomains",
    kind="ComputeDomain",
    namespaced=True,
)
PLACEMENTS = Resource(
    group=CDO_GROUP, version="v1alpha1", plural="placements", kind="Placement", namespaced=True
)


def _column(name: str, type_: str, path: str, description: str = "") -> dict[str, Any]:
    column = {"name": name, "type": type_, "jsonPath": path}
    if description:
        column["description"] = description
    return column


_AGE = _column("Age", "date", ".metadata.creationTimestamp")


def _root(
    *,
    description: str,
    spec: type[msgspec.Struct],
    status: type[msgspec.Struct] | None,
    spec_rules: list[dict[str, Any]],
    root_rules: list[dict[str, Any]],
) -> Schema:
    spec_schema = struct_schema(spec)
    if spec_rules:
        spec_schema["x-kubernetes-validations"] = spec_rules
    properties: dict[str, Schema] = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": spec_schema,
    }
    if status is not None:
        properties["status"] = struct_schema(status)
    schema: Schema = {
        "type": "object",
        "description": description,
        "required": ["spec"],
        "properties": properties,
    }
    if root_rules:
        schema["x-kubernetes-validations"] = root_rules
    return schema


def _crd(
    *,
    resource: Resource,
    singular: str,
    categories: list[str],
    schema: Schema,
    columns: list[dict[str, Any]],
    status_subresource: bool,
) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": resource.version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
        "additionalPrinterColumns": columns,
    }
    if status_subresource:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{resource.plural}.{resource.group}",
            "labels": {"app.kubernetes.io/part-of": "cdo"},
        },
        "spec": {
            "group": resource.group,
            "names": {
                "kind": resource.kind,
                "listKind": f"{resource.kind}List",
                "plural": resource.plural,
                "singular": singular,
                "categories": categories,
            },
            "scope": "Namespaced" if resource.namespaced else "Cluster",
            "versions": [version],
        },
    }


def compute_domain_crd() -> dict[str, Any]:
    return _crd(
        resource=COMPUTE_DOMAINS,
        singular="computedomain",
        categories=["cdo"],
        schema=_root(
            description="A set of pods that share GPU memory over NVLink through one IMEX "
            "channel, placed together inside one NVLink clique.",
            spec=ComputeDomainSpec,
            status=ComputeDomainStatus,
            spec_rules=SPEC_RULES,
            root_rules=ROOT_RULES,
        ),
        columns=[
            _column("Status", "string", ".status.status", "Ready or NotReady."),
            _column("Clique", "string", ".status.clique", "The NVLink clique of the domain."),
            _column("Channel", "integer", ".status.channel", "The domain's IMEX channel."),
            _AGE,
        ],
        status_subresource=True,
    )


def placement_crd() -> dict[str, Any]:
    return _crd(
        resource=PLACEMENTS,
        singular="placement",
        categories=["cdo"],
        schema=_root(
            description="Where the clique allocator placed a ComputeDomain's gang: its slices, "
            "each with a clique, a channel, nodes and ranked pods. Same namespace and name as "
            "its domain.",
            spec=PlacementSpec,
            status=None,
            spec_rules=[],
            root_rules=[],
        ),
        columns=[
            _column("Size", "integer", ".spec.size", "Pods in the gang."),
            _column("GPUs/pod", "integer", ".spec.gpusPerPod"),
            _column("Slice size", "integer", ".spec.sliceSize", "Fixed slice size, if any."),
            _AGE,
        ],
        status_subresource=False,
    )


def all_crds() -> list[dict[str, Any]]:
    """Every CRD cdo defines, in install order."""
    return [compute_domain_crd(), placement_crd()]
