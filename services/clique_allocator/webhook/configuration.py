"""The webhook configurations that send requests to the allocator (pure rendering).

The MutatingWebhookConfiguration of the pod webhook (:func:`webhook_configuration`) and the
ValidatingWebhookConfiguration of the channel allocation webhook
(:func:`allocation_webhook_configuration`, its choices in its docstring). The pod webhook's
choices, and why:

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
ALLOCATION_PATH = "/validate-channel-allocations"
"""Path the allocator serves the channel allocation webhook on."""
DEFAULT_NAME = "cdo-clique-allocator"
WEBHOOK_NAME = "pod-gate.clique-allocator.cdo.dev"
ALLOCATION_WEBHOOK_NAME = "channel-allocation.clique-allocator.cdo.dev"
MATCH_CDO_DEVICE = (
    "has(object.status) && has(object.status.allocation) && "
    "has(object.status.allocation.devices) && has(object.status.allocation.devices.results) && "
    "object.status.allocation.devices.results.exists(r, r.driver == '{driver}')"
)
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
    _check_timeout(timeout_s)
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


def _check_timeout(timeout_s: int) -> None:
    if not 1 <= timeout_s <= 30:
        raise ValueError(f"timeoutSeconds must be between 1 and 30, not {timeout_s}")


CLAIM_STATUS_RULE: dict[str, Any] = {
    "operations": ["UPDATE"],
    "apiGroups": ["resource.k8s.io"],
    "apiVersions": ["*"],
    "resources": ["resourceclaims/status"],
    "scope": "Namespaced",
}


def allocation_webhook_configuration(
    *,
    ca_bundle: bytes,
    driver: str,
    service: ServiceReference | None = None,
    url: str | None = None,
    name: str = DEFAULT_NAME,
    timeout_s: int = 5,
) -> dict[str, Any]:
    """The ValidatingWebhookConfiguration of the channel allocation webhook, reaching the
    allocator by ``service`` or ``url`` (why the allocation is judged there:
    ``services/clique_allocator/webhook/allocation.py``).

    - **only writes that hold one of ``driver``'s devices are sent**: the rule is updates of
      ``resourceclaims/status`` (where the scheduler writes an allocation and its pod), and a
      ``matchCondition`` keeps every claim without a device of cdo's driver away from the
      allocator, so no other claim ever waits for it;
    - **failurePolicy Fail**: a device nobody judged is not handed out. While no replica
      answers, the scheduler's write fails and it tries the pod again later; the pods that wait
      are the ones the allocator pinned just before (new pods are not pinned without it);
    - every namespace; ``sideEffects: None``; a short ``timeoutSeconds``.
    """
    client = client_config(ca_bundle=ca_bundle, service=service, url=url, path=ALLOCATION_PATH)
    _check_timeout(timeout_s)
    webhook: dict[str, Any] = {
        "name": ALLOCATION_WEBHOOK_NAME,
        "admissionReviewVersions": ["v1"],
        "clientConfig": client,
        "rules": [CLAIM_STATUS_RULE],
        "matchPolicy": "Equivalent",
        "matchConditions": [
            {"name": "holds-cdo-device", "expression": MATCH_CDO_DEVICE.format(driver=driver)}
        ],
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "timeoutSeconds": timeout_s,
    }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/name": "cdo-clique-allocator"},
        },
        "webhooks": [webhook],
    }


def client_config(
    *,
    ca_bundle: bytes,
    service: ServiceReference | None,
    url: str | None,
    path: str = WEBHOOK_PATH,
) -> dict[str, Any]:
    """How the API server reaches the webhook at ``path``: exactly one of the Service and a
    URL."""
    if (service is None) == (url is None):
        raise ValueError("give exactly one of service and url")
    client: dict[str, Any] = {"caBundle": base64.b64encode(ca_bundle).decode()}
    if service is not None:
        client["service"] = {
            "namespace": service.namespace,
            "name": service.name,
            "port": service.port,
            "path": path,
        }
    else:
        client["url"] = f"{str(url).rstrip('/')}{path}"
    return client
