"""The webhook's decisions and its registration, as pure functions."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
import pytest

from services.clique_allocator.webhook.admission import (
    ReviewError,
    decode_pod,
    decode_review,
    gate_patch,
    review_response,
)
from services.clique_allocator.webhook.configuration import (
    MATCH_TEMPLATE_CLAIMS,
    ServiceReference,
    webhook_configuration,
)
from shared.kube.models import Pod
from sim.kubeapi.validation import cel

from .builders import pod

GATE = {"name": "cdo.dev/placement"}


def pod_with(**spec: Any) -> Pod:
    return msgspec.convert({"metadata": {"name": "p"}, "spec": spec}, type=Pod)


CLAIM = {"name": "c", "resourceClaimTemplateName": "train-rct"}


@pytest.mark.parametrize(
    ("spec", "templates", "expected"),
    [
        pytest.param({"resourceClaims": [CLAIM]}, {"train-rct"},
                     [{"op": "add", "path": "/spec/schedulingGates", "value": [GATE]}],
                     id="a domain's pod is gated"),
        pytest.param({"resourceClaims": [CLAIM], "schedulingGates": [{"name": "x.io/q"}]},
                     {"train-rct"},
                     [{"op": "add", "path": "/spec/schedulingGates/-", "value": GATE}],
                     id="appended after other gates"),
        pytest.param({"resourceClaims": [CLAIM], "schedulingGates": [GATE]}, {"train-rct"},
                     None, id="already gated"),
        pytest.param({"resourceClaims": [CLAIM]}, set(), None, id="a template of no domain"),
        pytest.param({"resourceClaims": [{"name": "c", "resourceClaimName": "train-rct"}]},
                     {"train-rct"}, None, id="a claim by name is not from a template"),
        pytest.param({}, {"train-rct"}, None, id="no claims"),
        pytest.param({"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "gpu"},
                                         CLAIM]},
                     {"train-rct"},
                     [{"op": "add", "path": "/spec/schedulingGates", "value": [GATE]}],
                     id="one domain claim among others is enough"),
    ],
)  # fmt: skip
def test_gate_patch(
    spec: dict[str, Any], templates: set[str], expected: list[dict[str, Any]] | None
) -> None:
    assert gate_patch(pod_with(**spec), domain_templates=templates) == expected


def review(**request: Any) -> bytes:
    body = {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "Pod"}, **request}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": body}).encode()  # fmt: skip


def test_reviews_decode_with_and_without_an_object() -> None:
    request = decode_review(review(operation="CREATE", namespace="ml", object={"spec": {}}))
    assert (request.uid, request.operation, request.namespace) == ("u-1", "CREATE", "ml")
    assert decode_pod(request) is not None
    assert decode_pod(decode_review(review(operation="DELETE"))) is None
    with pytest.raises(ReviewError):
        decode_review(b'{"kind": "AdmissionReview"}')
    with pytest.raises(ReviewError):
        decode_review(b"not json")


def test_responses_carry_the_uid_and_a_base64_json_patch() -> None:
    patch = [{"op": "add", "path": "/spec/schedulingGates", "value": [GATE]}]
    answer = json.loads(review_response("u-1", patch=patch))
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    response = answer["response"]
    assert (response["uid"], response["allowed"], response["patchType"]) == (
        "u-1", True, "JSONPatch",
    )  # fmt: skip
    assert json.loads(base64.b64decode(response["patch"])) == patch
    assert json.loads(review_response("u-2"))["response"] == {"uid": "u-2", "allowed": True}
    # Undecided: let through, never refused, and the creator is told.
    undecided = json.loads(review_response("u-3", warning="not synced: not gated"))
    assert undecided["response"] == {
        "uid": "u-3", "allowed": True, "warnings": ["not synced: not gated"],
    }  # fmt: skip


def test_configuration_by_service() -> None:
    config = webhook_configuration(
        ca_bundle=b"PEM", service=ServiceReference(namespace="cdo-system", name="alloc")
    )
    assert config["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert config["kind"] == "MutatingWebhookConfiguration"
    (hook,) = config["webhooks"]
    assert hook["clientConfig"] == {
        "caBundle": base64.b64encode(b"PEM").decode(),
        "service": {"namespace": "cdo-system", "name": "alloc", "port": 443,
                    "path": "/mutate-pods"},
    }  # fmt: skip
    assert hook["failurePolicy"] == "Ignore"  # a domain's pod without its gate: the policy's
    assert hook["sideEffects"] == "None"
    assert hook["timeoutSeconds"] == 5
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["rules"] == [
        {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
         "resources": ["pods"], "scope": "Namespaced"}
    ]  # fmt: skip
    assert hook["matchConditions"] == [
        {"name": "has-template-claims", "expression": MATCH_TEMPLATE_CLAIMS}
    ]
    assert hook["namespaceSelector"] == {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
             "values": ["cdo-system", "kube-system"]}
        ]
    }  # fmt: skip


def test_configuration_by_url_and_its_limits() -> None:
    config = webhook_configuration(ca_bundle=b"x", url="https://127.0.0.1:9443/", timeout_s=10)
    (hook,) = config["webhooks"]
    assert hook["clientConfig"]["url"] == "https://127.0.0.1:9443/mutate-pods"
    assert hook["timeoutSeconds"] == 10
    with pytest.raises(ValueError, match="exactly one"):
        webhook_configuration(ca_bundle=b"x")
    with pytest.raises(ValueError, match="timeoutSeconds"):
        webhook_configuration(ca_bundle=b"x", url="https://h", timeout_s=31)
    open_for_all = webhook_configuration(ca_bundle=b"x", url="https://h", excluded_namespaces=())
    assert "namespaceSelector" not in open_for_all["webhooks"][0]


@pytest.mark.parametrize(
    ("claims", "sent"),
    [
        ([CLAIM], True),
        ([{"name": "c", "resourceClaimName": "x"}], False),
        ([], False),
        (None, False),
    ],
)
def test_the_match_condition_sends_only_pods_with_template_claims(
    claims: list[dict[str, str]] | None, sent: bool
) -> None:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if claims is not None:
        spec["resourceClaims"] = claims
    program = cel.compile_rule(MATCH_TEMPLATE_CLAIMS)
    assert bool(cel.evaluate(program, {"object": {"spec": spec}})) is sent


def test_builder_pods_are_gated_by_default() -> None:
    assert gate_patch(pod("x", gated=False), domain_templates={"train-rct"}) is not None
