"""The CustomResourceDefinitions, built from the Structs, and the API resources they serve.

The ComputeDomain CRD serves ``v1beta2`` (NVIDIA's current API; stored, and the version every cdo
service reads, so that none of them needs the conversion webhook) and ``v1beta1`` (the older
one, with ``spec.numNodes``), converted by the clique allocator's webhook
(``spec.conversion.strategy: Webhook``, :func:`conversion`). The webhook's ``caBundle`` is not
part of the manifest: the installation writes it, as for the pod webhook.
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec

from shared.crds.computedomain import (
    ROOT_RULES,
    SPEC_RULES,
    ComputeDomainSpec,
    ComputeDomainSpecV1beta1,
    ComputeDomainStatus,
)
from shared.crds.names import (
    CDO_GROUP,
    CONVERSION_PATH,
    CONVERSION_SERVICE,
    CONVERSION_SERVICE_NAMESPACE,
)
from shared.crds.openapi import Schema, struct_schema
from shared.crds.placement import PlacementSpec
from shared.kube.resources import COMPUTE_DOMAINS, Resource

__all__ = [
    "COMPUTE_DOMAINS",
    "COMPUTE_DOMAINS_V1BETA1",
    "PLACEMENTS",
    "all_crds",
    "compute_domain_crd",
    "conversion",
    "placement_crd",
]

COMPUTE_DOMAINS_V1BETA1 = msgspec.structs.replace(COMPUTE_DOMAINS, version="v1beta1")
"""The older ComputeDomain version, served through the conversion webhook."""
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


def _version(
    name: str,
    *,
    schema: Schema,
    columns: list[dict[str, Any]],
    status_subresource: bool,
    storage: bool = True,
) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": name,
        "served": True,
        "storage": storage,
        "schema": {"openAPIV3Schema": schema},
        "additionalPrinterColumns": columns,
    }
    if status_subresource:
        version["subresources"] = {"status": {}}
    return version


def _crd(
    *,
    resource: Resource,
    singular: str,
    categories: list[str],
    versions: list[dict[str, Any]],
    conversion: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "group": resource.group,
        "names": {
            "kind": resource.kind,
            "listKind": f"{resource.kind}List",
            "plural": resource.plural,
            "singular": singular,
            "categories": categories,
        },
        "scope": "Namespaced" if resource.namespaced else "Cluster",
        "versions": versions,
    }
    if conversion is not None:
        spec["conversion"] = conversion
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{resource.plural}.{resource.group}",
            "labels": {"app.kubernetes.io/part-of": "cdo"},
        },
        "spec": spec,
    }


def conversion(*, url: str | None = None, ca_bundle: bytes | None = None) -> dict[str, Any]:
    """``spec.conversion`` of the ComputeDomain CRD: the clique allocator's ``/convert``,
    through its Service (or ``url``, as the simulated cluster reaches it), ``ConversionReview``
    v1; ``ca_bundle`` (PEM) when known."""
    client: dict[str, Any]
    if url is not None:
        client = {"url": f"{url.rstrip('/')}{CONVERSION_PATH}"}
    else:
        client = {
            "service": {
                "namespace": CONVERSION_SERVICE_NAMESPACE,
                "name": CONVERSION_SERVICE,
                "path": CONVERSION_PATH,
                "port": 443,
            }
        }
    if ca_bundle is not None:
        client["caBundle"] = base64.b64encode(ca_bundle).decode()
    return {
        "strategy": "Webhook",
        "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": client},
    }


def compute_domain_crd(*, webhook: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ComputeDomain CRD; ``webhook`` replaces the default ``spec.conversion``."""
    columns = [
        _column("Status", "string", ".status.status", "Ready or NotReady."),
        _column("Clique", "string", ".status.clique", "The NVLink clique of the domain."),
        _column("Channel", "integer", ".status.channel", "The domain's IMEX channel."),
        _AGE,
    ]
    description = (
        "A set of pods that share GPU memory over NVLink through one IMEX channel, placed "
        "together inside one NVLink clique."
    )

    def schema(spec: type[msgspec.Struct]) -> Schema:
        return _root(
            description=description,
            spec=spec,
            status=ComputeDomainStatus,
            spec_rules=SPEC_RULES,
            root_rules=ROOT_RULES,
        )

    return _crd(
        resource=COMPUTE_DOMAINS,
        singular="computedomain",
        categories=["cdo"],
        versions=[
            _version(
                COMPUTE_DOMAINS_V1BETA1.version,
                schema=schema(ComputeDomainSpecV1beta1),
                columns=columns,
                status_subresource=True,
                storage=False,
            ),
            _version(
                COMPUTE_DOMAINS.version,
                schema=schema(ComputeDomainSpec),
                columns=columns,
                status_subresource=True,
            ),
        ],
        conversion=webhook if webhook is not None else conversion(),
    )


def placement_crd() -> dict[str, Any]:
    schema = _root(
        description="Where the clique allocator placed a ComputeDomain's gang: its slices, "
        "each with a clique, a channel, nodes and ranked pods. Same namespace and name as "
        "its domain.",
        spec=PlacementSpec,
        status=None,
        spec_rules=[],
        root_rules=[],
    )
    columns = [
        _column("Size", "integer", ".spec.size", "Pods in the gang."),
        _column("GPUs/pod", "integer", ".spec.gpusPerPod"),
        _column("Slice size", "integer", ".spec.sliceSize", "Fixed slice size, if any."),
        _AGE,
    ]
    return _crd(
        resource=PLACEMENTS,
        singular="placement",
        categories=["cdo"],
        versions=[
            _version(PLACEMENTS.version, schema=schema, columns=columns, status_subresource=False)
        ],
    )


def all_crds() -> list[dict[str, Any]]:
    """Every CRD cdo defines, in install order."""
    return [compute_domain_crd(), placement_crd()]
