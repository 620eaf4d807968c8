"""The domain's claim template: its shape, whose a found template is, and what needs repair."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from services.domain_controller.template import (
    contains,
    desired_device_class,
    desired_template,
    device_class_drifted,
    metadata_repair,
    ownership,
    spec_drifted,
)
from shared.crds.computedomain import ComputeDomain
from shared.crds.definitions import compute_domain_crd
from shared.crds.names import CHANNEL_DEVICE_CLASS, DOMAIN_LABEL, DOMAIN_UID_LABEL
from shared.kube.models import DeviceClass, ResourceClaimTemplate

DOMAIN = msgspec.convert(
    {
        "metadata": {"name": "train", "namespace": "ml", "uid": "uid-1"},
        "spec": {"channel": {"resourceClaimTemplate": {"name": "train-rct"}}},
    },
    ComputeDomain,
)


def as_template(body: dict[str, Any], **meta: Any) -> ResourceClaimTemplate:
    body = {**body, "metadata": {**body["metadata"], "uid": "tpl-uid", **meta}}
    return msgspec.convert(body, ResourceClaimTemplate)


def owner(uid: str, name: str = "train", version: str = "v1beta2") -> dict[str, Any]:
    return {
        "apiVersion": f"resource.nvidia.com/{version}",
        "kind": "ComputeDomain",
        "name": name,
        "uid": uid,
        "controller": True,
    }


def alive(*domains: tuple[str, str]) -> Any:
    return lambda name, uid: (name, uid) in domains


def test_desired_template_requests_one_channel_attachment_and_labels_claims() -> None:
    body = desired_template(DOMAIN)
    labels = {DOMAIN_LABEL: "train", DOMAIN_UID_LABEL: "uid-1"}
    assert body["apiVersion"] == "resource.k8s.io/v1"
    assert (body["metadata"]["name"], body["metadata"]["namespace"]) == ("train-rct", "ml")
    assert labels.items() <= body["metadata"]["labels"].items()
    assert body["metadata"]["ownerReferences"] == [{**owner("uid-1"), "blockOwnerDeletion": True}]
    assert body["spec"]["metadata"] == {"labels": labels}
    assert body["spec"]["spec"]["devices"]["requests"] == [
        {
            "name": "channel",
            "exactly": {
                "deviceClassName": CHANNEL_DEVICE_CLASS,
                "allocationMode": "ExactCount",
                "count": 1,
            },
        }
    ]


@pytest.mark.parametrize(
    ("meta", "live", "kind"),
    [
        pytest.param({"ownerReferences": [owner("uid-1")]}, alive(), "ours", id="ours"),
        pytest.param(
            {"ownerReferences": [owner("uid-1")], "deletionTimestamp": "2026-01-01T00:00:00Z"},
            alive(),
            "terminating",
            id="ours, being deleted",
        ),
        pytest.param(
            {"ownerReferences": [owner("uid-0")]}, alive(), "stale", id="an earlier incarnation's"
        ),
        pytest.param(
            {"ownerReferences": [owner("uid-9", "other")]},
            alive(("other", "uid-9")),
            "conflict",
            id="another live domain's",
        ),
        pytest.param({"ownerReferences": []}, alive(), "conflict", id="a user's"),
        pytest.param(
            {"ownerReferences": [{**owner("uid-1"), "controller": False}]},
            alive(),
            "conflict",
            id="only a non-controller reference",
        ),
    ],
)
def test_ownership(meta: dict[str, Any], live: Any, kind: str) -> None:
    template = as_template(desired_template(DOMAIN), **meta)
    assert ownership(template, DOMAIN, owner_alive=live).kind == kind


def test_conflict_messages_say_whose_it_is() -> None:
    theirs = as_template(desired_template(DOMAIN), ownerReferences=[owner("uid-9", "other")])
    found = ownership(theirs, DOMAIN, owner_alive=alive(("other", "uid-9")))
    assert "belongs to ComputeDomain other" in found.message
    users = as_template(desired_template(DOMAIN), ownerReferences=[])
    assert (
        "was not created for this domain" in ownership(users, DOMAIN, owner_alive=alive()).message
    )
    assert ownership(None, DOMAIN, owner_alive=alive()).kind == "missing"


def test_defaulted_fields_are_not_drift_but_a_changed_request_is() -> None:
    body = desired_template(DOMAIN)
    defaulted = as_template(body)
    defaulted.spec["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = False
    assert not spec_drifted(defaulted, DOMAIN)
    changed = as_template(body)
    changed.spec["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    assert spec_drifted(changed, DOMAIN)


def test_metadata_repair_restores_labels_and_owner_and_keeps_other_owners() -> None:
    body = desired_template(DOMAIN)
    assert metadata_repair(as_template(body), DOMAIN) == {}
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "cm"}
    broken = as_template(body, labels={DOMAIN_LABEL: "wrong"}, ownerReferences=[other])
    patch = metadata_repair(broken, DOMAIN)["metadata"]
    assert patch["labels"] == {DOMAIN_LABEL: "train", DOMAIN_UID_LABEL: "uid-1"}
    assert patch["ownerReferences"][0]["uid"] == "cm"
    assert patch["ownerReferences"][1]["uid"] == "uid-1"


def test_contains_compares_lists_by_position_and_length() -> None:
    assert contains({"a": [1, {"b": 2, "c": 3}]}, {"a": [1, {"b": 2}]})
    assert not contains({"a": [1]}, {"a": [1, 2]})
    assert not contains({"a": 1}, {"a": 1, "b": None})


def test_device_class_selects_the_cdo_driver() -> None:
    body = desired_device_class()
    assert body["metadata"]["name"] == CHANNEL_DEVICE_CLASS
    current = msgspec.convert(body, DeviceClass)
    assert not device_class_drifted(current)
    edited = msgspec.convert({**body, "spec": {"selectors": []}}, DeviceClass)
    assert device_class_drifted(edited)
    expression = body["spec"]["selectors"][0]["cel"]["expression"]
    assert expression == 'device.driver == "compute-domain.cdo.dev"'


def test_allocation_mode_all_is_treated_as_single() -> None:
    """The CRD accepts NVIDIA's ``allocationMode: All`` and says it is treated as Single: the
    template still asks for one channel device, so each pod gets its domain's channel only."""
    every_channel = msgspec.structs.replace(
        DOMAIN,
        spec=msgspec.structs.replace(
            DOMAIN.spec,
            channel=msgspec.structs.replace(DOMAIN.spec.channel, allocation_mode="All"),
        ),
    )
    assert desired_template(every_channel) == desired_template(DOMAIN)
    (request,) = desired_template(DOMAIN)["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["allocationMode"] == "ExactCount"
    assert request["exactly"]["count"] == 1
    (served,) = [v for v in compute_domain_crd()["spec"]["versions"] if v["name"] == "v1beta1"]
    schema = served["schema"]["openAPIV3Schema"]
    mode = schema["properties"]["spec"]["properties"]["channel"]["properties"]["allocationMode"]
    assert "treated as Single" in mode["description"]


def test_a_template_owned_through_the_older_version_is_ours_and_its_reference_renewed() -> None:
    """Templates written when the domain was read as v1beta1 (an older cdo) keep their owner."""
    body = desired_template(DOMAIN)
    older = {**owner("uid-1", version="v1beta1"), "blockOwnerDeletion": True}
    template = as_template({**body, "metadata": {**body["metadata"], "ownerReferences": [older]}})
    assert ownership(template, DOMAIN, owner_alive=alive()).kind == "ours"
    repair = metadata_repair(template, DOMAIN)
    assert repair == {
        "metadata": {"ownerReferences": [{**owner("uid-1"), "blockOwnerDeletion": True}]}
    }
