"""ComputeDomain v1beta1 <-> v1beta2: the conversion and the ConversionReview around it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.clique_allocator.webhook.conversion import (
    ConversionReviewError,
    answer,
    decode_conversion_review,
)
from shared.crds.conversion import V1BETA1, V1BETA2, ConversionError, convert
from shared.crds.names import NUM_NODES_ANNOTATION

CDO_FIELDS = {
    "failover": {"policy": "Wait", "graceSeconds": 42},
    "gang": {"size": 36, "sliceSize": 18, "nodes": 9, "unitLabel": "team"},
}
STATUS = {
    "status": "Ready",
    "nodes": [
        {"name": "n1", "ipAddress": "10.0.0.1", "cliqueID": "u.1", "index": 3, "status": "Ready"}
    ],
    "conditions": [{"type": "Ready", "status": "True", "reason": "AllReady", "message": ""}],
    "clique": "u.1",
    "channel": 7,
}


def domain(
    version: str, *, spec: dict[str, Any], annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": "train",
        "namespace": "ml",
        "uid": "uid-1",
        "labels": {"a": "b"},
    }
    if annotations is not None:
        metadata["annotations"] = annotations
    return {
        "apiVersion": version,
        "kind": "ComputeDomain",
        "metadata": metadata,
        "spec": {"channel": {"resourceClaimTemplate": {"name": "train-rct"}}, **spec},
        "status": STATUS,
    }


def test_num_nodes_moves_into_the_annotation_and_back() -> None:
    old = domain(V1BETA1, spec={"numNodes": 18, **CDO_FIELDS}, annotations={"keep": "me"})
    new = convert(old, V1BETA2)
    assert new["apiVersion"] == V1BETA2
    assert "numNodes" not in new["spec"]
    assert new["metadata"]["annotations"] == {"keep": "me", NUM_NODES_ANNOTATION: "18"}
    assert new["spec"]["failover"] == CDO_FIELDS["failover"]
    assert new["spec"]["gang"] == CDO_FIELDS["gang"]
    assert new["status"] == STATUS
    assert convert(new, V1BETA1) == old


def test_zero_and_absent_stay_apart() -> None:
    zero = domain(V1BETA1, spec={"numNodes": 0})
    assert convert(zero, V1BETA2)["metadata"]["annotations"] == {NUM_NODES_ANNOTATION: "0"}
    assert convert(convert(zero, V1BETA2), V1BETA1) == zero
    absent = domain(V1BETA1, spec={})
    assert "annotations" not in convert(absent, V1BETA2)["metadata"]
    assert convert(convert(absent, V1BETA2), V1BETA1) == absent


def test_the_v1beta1_form_decides_over_an_annotation_written_beside_it() -> None:
    old = domain(V1BETA1, spec={}, annotations={NUM_NODES_ANNOTATION: "5"})
    assert "annotations" not in convert(old, V1BETA2)["metadata"]


def test_nvidias_stored_objects_read_as_v1beta1() -> None:
    """As NVIDIA's converter writes them: the annotation for numNodes > 0, none for 0."""
    nvidia = domain(
        V1BETA2,
        spec={"channel": {"resourceClaimTemplate": {"name": "x"}, "allocationMode": "All"}},
        annotations={NUM_NODES_ANNOTATION: "4"},
    )
    old = convert(nvidia, V1BETA1)
    assert old["spec"]["numNodes"] == 4
    assert old["spec"]["channel"]["allocationMode"] == "All"
    assert "annotations" not in old["metadata"]


@pytest.mark.parametrize("text", ["abc", "-1", "1.5", " 3", "03", "100001", ""])
def test_an_annotation_that_is_no_num_nodes_cannot_convert(text: str) -> None:
    bad = domain(V1BETA2, spec={}, annotations={NUM_NODES_ANNOTATION: text})
    with pytest.raises(ConversionError) as raised:
        convert(bad, V1BETA1)
    assert str(raised.value) == (
        f"metadata.annotations[{NUM_NODES_ANNOTATION}]: Invalid value: {json.dumps(text)}: must "
        "be a whole number from 0 to 100000: it is spec.numNodes of resource.nvidia.com/v1beta1"
    )


def test_an_unknown_version_cannot_convert() -> None:
    with pytest.raises(ConversionError, match="apiVersion: Invalid value"):
        convert(domain("resource.nvidia.com/v1alpha1", spec={}), V1BETA2)


@given(
    num_nodes=st.none() | st.integers(min_value=0, max_value=100_000),
    annotations=st.dictionaries(st.sampled_from(["x", "y/z"]), st.text(max_size=3), max_size=2),
    failover=st.none()
    | st.fixed_dictionaries(
        {"policy": st.sampled_from(["Move", "Wait"]), "graceSeconds": st.integers(0, 86_400)}
    ),
    gang=st.none()
    | st.fixed_dictionaries(
        {},
        optional={
            "size": st.integers(1, 100),
            "sliceSize": st.integers(1, 100),
            "nodes": st.integers(1, 100),
            "unitLabel": st.text(min_size=1, max_size=5),
        },
    ),
)
def test_every_v1beta1_object_round_trips(
    num_nodes: int | None,
    annotations: dict[str, str],
    failover: dict[str, Any] | None,
    gang: dict[str, Any] | None,
) -> None:
    spec: dict[str, Any] = {}
    for key, value in (("numNodes", num_nodes), ("failover", failover), ("gang", gang)):
        if value is not None:
            spec[key] = value
    old = domain(V1BETA1, spec=spec, annotations=annotations or None)
    new = convert(old, V1BETA2)
    assert convert(new, V1BETA1) == old
    assert convert(convert(new, V1BETA1), V1BETA2) == new


# -- the ConversionReview ----------------------------------------------------------------------


def review(objects: list[dict[str, Any]], desired: str) -> bytes:
    return json.dumps(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": "u-1", "desiredAPIVersion": desired, "objects": objects},
        }
    ).encode()


def test_a_review_is_answered_with_the_uid_and_the_objects_in_order() -> None:
    objects = [domain(V1BETA1, spec={"numNodes": n}) for n in (1, 2)]
    body, result = answer(decode_conversion_review(review(objects, V1BETA2)))
    reply = json.loads(body)
    assert result == "converted"
    assert reply["apiVersion"] == "apiextensions.k8s.io/v1"
    assert reply["kind"] == "ConversionReview"
    response = reply["response"]
    assert response["uid"] == "u-1"
    assert response["result"] == {"status": "Success"}
    assert [
        o["metadata"]["annotations"][NUM_NODES_ANNOTATION] for o in response["convertedObjects"]
    ] == ["1", "2"]


def test_an_object_that_cannot_convert_fails_the_review_naming_the_field() -> None:
    bad = domain(V1BETA2, spec={}, annotations={NUM_NODES_ANNOTATION: "lots"})
    body, result = answer(decode_conversion_review(review([bad], V1BETA1)))
    response = json.loads(body)["response"]
    assert result == "refused"
    assert response["uid"] == "u-1"
    assert response["convertedObjects"] == []
    assert response["result"]["status"] == "Failure"
    assert response["result"]["message"].startswith(
        f'metadata.annotations[{NUM_NODES_ANNOTATION}]: Invalid value: "lots"'
    )


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b'{"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"}',
        b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", '
        b'"request": {"uid": "u"}}',
    ],
)
def test_a_body_that_is_no_conversion_review_is_refused(body: bytes) -> None:
    with pytest.raises(ConversionReviewError):
        decode_conversion_review(body)
