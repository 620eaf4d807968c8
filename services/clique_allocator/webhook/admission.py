"""AdmissionReview v1, and the decision to gate a pod (pure).

A pod is gated when it is being created and one of its ``spec.resourceClaims`` comes from a
ResourceClaimTemplate that belongs to a ComputeDomain in the pod's namespace. The answer is
always "allowed" (a pod the webhook cannot judge is let through, with a warning: the
``cdo-pod-gate`` admission policy refuses it if it is a domain's); a pod to gate gets a
JSONPatch adding ``cdo.dev/placement`` to ``spec.schedulingGates`` (creating the list, or
appending to one that exists); any other pod gets no patch at all. A pod that already
carries the gate is left as it is.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Collection
from typing import Any

import msgspec

from services.clique_allocator.objects import template_names
from shared.crds.names import PLACEMENT_GATE
from shared.kube.models import Pod

REVIEW_API_VERSION = "admission.k8s.io/v1"


class GroupVersionKind(msgspec.Struct, frozen=True, kw_only=True):
    group: str = ""
    version: str = ""
    kind: str = ""


class UserInfo(msgspec.Struct, frozen=True, kw_only=True):
    username: str = ""


class AdmissionRequest(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    uid: str
    kind: GroupVersionKind = msgspec.field(default_factory=GroupVersionKind)
    operation: str = ""
    namespace: str = ""
    name: str = ""
    sub_resource: str = ""
    object: msgspec.Raw = msgspec.Raw(b"null")
    old_object: msgspec.Raw = msgspec.Raw(b"null")
    user_info: UserInfo = msgspec.field(default_factory=UserInfo)
    dry_run: bool = False


class AdmissionReview(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    api_version: str = REVIEW_API_VERSION
    kind: str = "AdmissionReview"
    request: AdmissionRequest | None = None


_review_decoder = msgspec.json.Decoder(AdmissionReview)
_pod_decoder = msgspec.json.Decoder(Pod)


class ReviewError(ValueError):
    """The body is not an AdmissionReview with a request."""


def decode_review(body: bytes) -> AdmissionRequest:
    try:
        review = _review_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ReviewError(f"not an AdmissionReview: {exc}") from None
    if review.request is None:
        raise ReviewError("the AdmissionReview has no request")
    return review.request


def decode_pod(request: AdmissionRequest) -> Pod | None:
    """The pod being admitted, or None when the request carries no pod."""
    if request.object == b"null" or request.kind.kind not in ("", "Pod"):
        return None
    try:
        return _pod_decoder.decode(request.object)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def claim_templates(pod: Pod) -> list[str]:
    """Distinct template names of the pod's claims, in order."""
    return list(dict.fromkeys(template_names(pod)))


def gate_patch(pod: Pod, *, domain_templates: Collection[str]) -> list[dict[str, Any]] | None:
    """The JSONPatch that gates ``pod``, or None when it is not to be gated.

    ``domain_templates`` are the names (in the pod's namespace) of its claim templates that
    belong to a ComputeDomain.
    """
    if not any(name in domain_templates for name in claim_templates(pod)):
        return None
    gates = pod.spec.scheduling_gates
    if any(gate.name == PLACEMENT_GATE for gate in gates):
        return None
    if not gates:
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": PLACEMENT_GATE}]}]
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": PLACEMENT_GATE}}]


def refusal_response(uid: str, message: str) -> bytes:
    """The AdmissionReview answer that refuses request ``uid`` (403 Forbidden, ``message``:
    the API server prefixes it with the webhook's name)."""
    status = {"code": 403, "reason": "Forbidden", "message": message}
    response = {"uid": uid, "allowed": False, "status": status}
    return json.dumps(
        {"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "response": response}
    ).encode()


def review_response(
    uid: str,
    *,
    patch: list[dict[str, Any]] | None = None,
    warning: str = "",
) -> bytes:
    """The AdmissionReview answer for ``uid``: always allowed, with the patch if any, and a
    warning the API server hands to the pod's creator."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    if warning:
        response["warnings"] = [warning]
    return json.dumps(
        {"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "response": response}
    ).encode()
