"""The MutatingWebhookConfiguration that sends new pods to the allocator (pure rendering).

Choices, and why:

- **only pods that can be a domain's are sent**: a ``matchCondition`` lets through only pods
  with at least one claim made from a template
  (``has(object.spec.resourceClaims) && object.spec.resourceClaims.exists(c,
  has(c.resourceClaimTemplateName))``), evaluated by the API server itself; every other pod
  is admitted without a call;
- **failurePolicy Ignore**: a pod the allocator does not answer for is admitted as it is, so
  no pod of any other workload (one of another DRA driver's claim templates, say) ever waits
  for cdo. A domain's pod admitted ungated would be scheduled anywhere; that is what the
  ValidatingAdmissionPolicy ``cdo-pod-gate`` (deploy/kustomize/base/clique-allocator/
  pod-gate-policy.yaml) prevents, inside the API server: it refuses a pod that uses a
  ComputeDomain's claim template without the gate, and the pod's workload controller creates
  it again until a replica answers;
- ``namespaceSelector`` leaves out the system namespaces (``kube-system`` and cdo's own), so
  the allocator's own pods never depend on the allocator;
- CREATE only (gates can be added only at creation), ``sideEffects: None`` (the webhook writes
  nothing), ``reinvocationPolicy: Never``, a short ``timeoutSeconds``.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

WEBHOOK_PATH = "/mutate-pods"
"""Path the allocator serves the pod webhook on."""
DEFAULT_NAME = "cdo-clique-allocator"
WEBHOOK_NAME = "pod-gate.clique-allocator.cdo.dev"
MATCH_TEMPLATE_CLAIMS = (
    "has(object.spec.resourceClaims) && "
    "object.spec.resourceClaims.exists(c, has(c.resourceClaimTemplateName))"
)
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
DEFAULT_EXCLUDED_NAMESPACES = ("kube-system", "cdo-system")


class ServiceReference(msgspec.Struct, frozen=True, kw_only=True):
    """The in-cluster Service in front of the allocator's replicas."""

    namespace: str
    name: str
    port: int = 443


POD_CREATE_RULE: dict[str, Any] = {
    "operations": ["CREATE"],
    "apiGroups": [""],
    "apiVersions": ["v1"],
    "resources": ["pods"],
    "scope": "Namespaced",
}


def webhook_configuration(
    *,
    ca_bundle: bytes,
    service: ServiceReference | None = None,
    url: str | None = None,
    name: str = DEFAULT_NAME,
    failure_policy: Literal["Fail", "Ignore"] = "Ignore",
    timeout_s: int = 5,
    excluded_namespaces: Sequence[str] = DEFAULT_EXCLUDED_NAMESPACES,
) -> dict[str, Any]:
    """The MutatingWebhookConfiguration, reaching the allocator by ``service`` or ``url``.

    ``ca_bundle`` is the PEM of the CA that signed the serving certificate.
    """
    client = client_config(ca_bundle=ca_bundle, service=service, url=url)
    if not 1 <= timeout_s <= 30:
        raise ValueError(f"timeoutSeconds must be between 1 and 30, not {timeout_s}")
    webhook: dict[str, Any] = {
        "name": WEBHOOK_NAME,
        "admissionReviewVersions": ["v1"],
        "clientConfig": client,
        "rules": [POD_CREATE_RULE],
        "matchPolicy": "Equivalent",
        "matchConditions": [{"name": "has-template-claims", "expression": MATCH_TEMPLATE_CLAIMS}],
        "failurePolicy": failure_policy,
        "sideEffects": "None",
        "timeoutSeconds": timeout_s,
        "reinvocationPolicy": "Never",
    }
    if excluded_namespaces:
        webhook["namespaceSelector"] = {
            "matchExpressions": [
                {
                    "key": NAMESPACE_NAME_LABEL,
                    "operator": "NotIn",
                    "values": sorted(excluded_namespaces),
                }
            ]
        }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/name": "cdo-clique-allocator"},
        },
        "webhooks": [webhook],
    }


def client_config(
    *, ca_bundle: bytes, service: ServiceReference | None, url: str | None
) -> dict[str, Any]:
    """How the API server reaches the webhook: exactly one of the Service and a URL."""
    if (service is None) == (url is None):
        raise ValueError("give exactly one of service and url")
    client: dict[str, Any] = {"caBundle": base64.b64encode(ca_bundle).decode()}
    if service is not None:
        client["service"] = {
            "namespace": service.namespace,
            "name": service.name,
            "port": service.port,
            "path": WEBHOOK_PATH,
        }
    else:
        client["url"] = f"{str(url).rstrip('/')}{WEBHOOK_PATH}"
    return client
