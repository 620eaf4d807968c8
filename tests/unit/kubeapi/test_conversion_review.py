"""The checks kube-apiserver makes on a ConversionReview answer, one at a time."""

from __future__ import annotations

from typing import Any

import pytest

from sim.kubeapi.conversion.review import ConversionFailedError, converted, request, review_version

ORIGINAL: dict[str, Any] = {
    "apiVersion": "example.com/v1",
    "kind": "Gizmo",
    "metadata": {
        "name": "g",
        "namespace": "ns",
        "uid": "u-1",
        "resourceVersion": "7",
        "labels": {"a": "b"},
        "annotations": {"x": "y"},
    },
    "spec": {"count": 1},
}
DESIRED = "example.com/v2"
GVK = "conversion webhook for example.com/v1, Kind=Gizmo"


def answer(*objects: Any, version: str = "v1", uid: str = "r-1", **result: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"apiextensions.k8s.io/{version}",
        "kind": "ConversionReview",
        "response": {
            "uid": uid,
            "convertedObjects": list(objects),
            "result": result or {"status": "Success"},
        },
    }


def out(**metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": DESIRED,
        "kind": "Gizmo",
        "metadata": {**ORIGINAL["metadata"], **metadata},
        "spec": {"amount": 1},
    }


def check(body: Any, *, version: str = "v1") -> dict[str, Any]:
    return converted(body, version=version, uid="r-1", original=ORIGINAL, desired=DESIRED)


def test_the_request_names_the_desired_version_and_carries_the_object() -> None:
    body = request("v1", "r-1", DESIRED, ORIGINAL)
    assert body == {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "r-1", "desiredAPIVersion": DESIRED, "objects": [ORIGINAL]},
    }
    assert review_version(("v2", "v1beta1", "v1")) == "v1beta1"
    assert review_version(("v2",)) is None


def test_only_labels_and_annotations_come_from_the_answer() -> None:
    result = check(answer(out(resourceVersion="99", labels={"c": "d"}, generation=5)))
    assert result["metadata"]["labels"] == {"c": "d"}
    assert result["metadata"]["resourceVersion"] == "7"
    assert "generation" not in result["metadata"]
    assert result["spec"] == {"amount": 1}
    # Annotations the answer leaves out are gone, as upstream restores them.
    body = out()
    del body["metadata"]["annotations"]
    assert "annotations" not in check(answer(body))["metadata"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"kind": "ConversionReview"}, f"{GVK} failed: expected webhook response of "),
        ({**answer(), "response": None}, f"{GVK} failed: no response provided"),
        (answer(out(), uid="other"), f'{GVK} failed: expected response.uid="r-1", got "other"'),
        (answer(status="Failure"), f"{GVK} failed: response.result.status was 'Failure'"),
        (answer(status="Failure", message="no"), f"{GVK} failed: no"),
        (answer(), f"{GVK} returned 0 objects, expected 1"),
        (answer(out(uid="u-2")), f"{GVK} returned invalid object: must have the same UID"),
        (
            answer(out(namespace="x")),
            f"{GVK} returned invalid object: must have the same namespace",
        ),
        # Without its metadata the object has lost its name first, as upstream checks it.
        (
            answer({**out(), "metadata": None}),
            f"{GVK} returned invalid object: must have the same name: g != ",
        ),
        (
            answer(out(annotations={"bad key": "v"})),
            f"{GVK} returned invalid metadata: metadata.annotation: Invalid value",
        ),
        (answer(out(labels={"a": 1})), "metadata.labels[a] must be a string"),
        (answer({**out(), "kind": "Other"}), "invalid kind (expected Gizmo, received Other)"),
    ],
)
def test_wrong_answers_fail_with_kube_apiservers_message(body: Any, message: str) -> None:
    with pytest.raises(ConversionFailedError) as raised:
        check(body)
    assert str(raised.value).startswith(message) or message in str(raised.value)


def test_a_v1beta1_review_skips_the_kind_and_uid_checks() -> None:
    body = answer(out(), version="v1beta1", uid="anything")
    body["apiVersion"] = "apiextensions.k8s.io/v1beta1"
    assert check(body, version="v1beta1")["apiVersion"] == DESIRED
