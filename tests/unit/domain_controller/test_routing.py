"""Which domains each change concerns (services/domain_controller/routing.py)."""

from __future__ import annotations

from typing import Any

import msgspec

from services.domain_controller.objects import DomainNode, DomainPod
from services.domain_controller.routing import (
    DEVICE_CLASS_KEY,
    device_class_changed,
    node_changed,
    pod_changed,
    same_name,
    template_changed,
)
from shared.crds.computedomain import ComputeDomain
from shared.kube.keys import ObjectKey
from shared.kube.models import DeviceClass, ResourceClaimTemplate

TRAIN = ObjectKey(namespace="ns", name="train")
SERVE = ObjectKey(namespace="ns", name="serve")


def domain(name: str) -> ComputeDomain:
    body = {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"channel": {"resourceClaimTemplate": {"name": f"{name}-channel"}}},
    }
    return msgspec.convert(body, ComputeDomain)


def pod(*templates: str, phase: str = "Pending", node: str = "") -> DomainPod:
    claims = [{"name": t, "resourceClaimTemplateName": t} for t in templates]
    body = {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"nodeName": node, "resourceClaims": claims},
        "status": {"phase": phase},
    }
    return msgspec.convert(body, DomainPod)


def node(**status: Any) -> DomainNode:
    return msgspec.convert({"metadata": {"name": "n1"}, "status": status}, DomainNode)


INDEX = {"ns/train-channel": [TRAIN], "ns/serve-channel": [SERVE]}


def naming(template: str) -> list[ObjectKey]:
    return INDEX.get(template, [])


def test_a_domain_or_its_placement_routes_to_itself() -> None:
    assert same_name(None, domain("train")) == [TRAIN]
    assert same_name(domain("train"), None) == [TRAIN]
    assert same_name(domain("train"), domain("train")) == [TRAIN]


def test_a_template_routes_to_the_domains_naming_it_and_its_owner() -> None:
    owned = {
        "metadata": {
            "name": "train-channel",
            "namespace": "ns",
            "ownerReferences": [
                {
                    "apiVersion": "resource.nvidia.com/v1beta1",
                    "kind": "ComputeDomain",
                    "name": "old-owner",
                    "uid": "u",
                }
            ],
        }
    }
    template = msgspec.convert(owned, ResourceClaimTemplate)
    assert template_changed(None, template, naming=naming) == [
        TRAIN,
        ObjectKey(namespace="ns", name="old-owner"),
    ]


def test_a_pod_routes_only_when_what_status_reads_changed() -> None:
    before = pod("train-channel")
    assert pod_changed(None, before, naming=naming) == [TRAIN]
    assert pod_changed(before, pod("train-channel"), naming=naming) == []
    assert pod_changed(before, pod("train-channel", phase="Running"), naming=naming) == [TRAIN]
    # A claim moving to another template concerns both domains.
    assert sorted(pod_changed(before, pod("serve-channel"), naming=naming)) == [SERVE, TRAIN]
    assert pod_changed(before, None, naming=naming) == [TRAIN]


def test_a_node_routes_to_the_domains_placed_on_it_but_not_on_heartbeats() -> None:
    def placed_on(name: str) -> list[ObjectKey]:
        return [TRAIN] if name == "n1" else []

    ready = node(conditions=[{"type": "cdo.dev/ImexReady", "status": "True"}])
    beat = node(
        conditions=[{"type": "cdo.dev/ImexReady", "status": "True", "lastHeartbeatTime": "x"}]
    )
    assert node_changed(None, ready, placed_on=placed_on) == [TRAIN]
    assert node_changed(ready, beat, placed_on=placed_on) == []
    lost = node(conditions=[{"type": "cdo.dev/ImexReady", "status": "False"}])
    assert node_changed(ready, lost, placed_on=placed_on) == [TRAIN]
    assert node_changed(ready, None, placed_on=placed_on) == [TRAIN]


def test_the_device_class_routes_to_its_loop() -> None:
    assert device_class_changed(None, msgspec.convert({}, DeviceClass)) == [DEVICE_CLASS_KEY]
