"""The channel allocation webhook's decision (pure): who may hold a cdo attachment device."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from services.clique_allocator.webhook.allocation import gives_a_device, judge
from services.clique_allocator.webhook.configuration import (
    MATCH_CDO_DEVICE,
    allocation_webhook_configuration,
)
from shared.crds.computedomain import ComputeDomain
from shared.crds.names import DRIVER_NAME
from shared.crds.placement import Placement
from shared.kube.models import Pod, ResourceClaim
from sim.kubeapi.validation import cel

NS = "team-a"
POD_UID = "uid-p"


def pod(*, name: str = "p", uid: str = POD_UID, claims: list[dict[str, str]] | None = None) -> Pod:
    entries = claims or [{"name": "imex", "resourceClaimTemplateName": "train-rct"}]
    statuses = [
        {"name": entry["name"], "resourceClaimName": f"{name}-{entry['name']}"}
        for entry in entries
        if "resourceClaimTemplateName" in entry
    ]
    return msgspec.convert(
        {
            "metadata": {"name": name, "namespace": NS, "uid": uid},
            "spec": {"resourceClaims": entries},
            "status": {"resourceClaimStatuses": statuses},
        },
        type=Pod,
    )


def claim(
    name: str = "p-imex",
    *,
    node: str | None = "n1",
    driver: str = DRIVER_NAME,
    consumers: tuple[tuple[str, str], ...] = (("p", POD_UID),),
    owner: str | None = POD_UID,
) -> ResourceClaim:
    status: dict[str, Any] = {
        "reservedFor": [{"resource": "pods", "name": n, "uid": u} for n, u in consumers]
    }
    if node is not None:
        result = {"request": "r", "driver": driver, "pool": node, "device": "attach-0"}
        status["allocation"] = {"devices": {"results": [result]}}
    owners = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner, "controller": True}]
    return msgspec.convert(
        {
            "metadata": {
                "name": name,
                "namespace": NS,
                "ownerReferences": owners if owner else [],
            },
            "status": status,
        },
        type=ResourceClaim,
    )


def domain(name: str = "train") -> ComputeDomain:
    return msgspec.convert(
        {
            "apiVersion": "resource.nvidia.com/v1beta2",
            "kind": "ComputeDomain",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
            "spec": {"channel": {"resourceClaimTemplate": {"name": f"{name}-rct"}}},
        },
        type=ComputeDomain,
    )


def placement(
    *, node: str = "n1", uid: str = POD_UID, channel_only: bool = False, nvlink: bool = True
) -> Placement:
    member: dict[str, Any] = {"node": node, "slot": 0, "gpus": 0 if channel_only else 1}
    if channel_only:
        member["channelOnlyPods"] = [{"name": "p", "uid": uid}]
    else:
        member["pods"] = [{"name": "p", "rank": 0, "uid": uid}]
    spec: dict[str, Any] = {"gpusPerPod": 1, "size": 1, "multiNodeNvlink": nvlink}
    if nvlink:
        spec["slices"] = [
            {"index": 0, "clique": "c.0", "channel": 3, "size": 1, "members": [member]}
        ]
    return msgspec.convert(
        {"metadata": {"name": "train", "namespace": NS}, "spec": spec}, type=Placement
    )


def verdict(
    new: ResourceClaim,
    *,
    old: ResourceClaim | None = None,
    pods: list[Pod] | None = None,
    domains: list[ComputeDomain] | None = None,
    placements: list[Placement] | None = None,
) -> tuple[bool, str, str]:
    found_pods = {p.metadata.name: p for p in (pods if pods is not None else [pod()])}
    found_domains = domains if domains is not None else [domain()]
    found = {p.metadata.name: p for p in (placements if placements is not None else [placement()])}
    answer = judge(
        claim=new,
        old=old,
        pod_named=found_pods.get,
        domains_using=lambda t: [d for d in found_domains if d.template_name == t],
        placement_of=found.get,
    )
    return answer.allowed, answer.reason, answer.message


def test_a_member_pinned_on_the_node_gets_its_device() -> None:
    assert verdict(claim())[0]


def test_a_channel_only_member_gets_its_device() -> None:
    assert verdict(claim(), placements=[placement(channel_only=True)])[0]


def test_a_domain_without_nvlink_seats_nobody_and_its_template_claims_pass() -> None:
    assert verdict(claim(), placements=[placement(nvlink=False)])[0]


@pytest.mark.parametrize(
    ("new", "old"),
    [
        pytest.param(claim(node=None), None, id="no allocation"),
        pytest.param(claim(driver="gpu.nvidia.com"), None, id="another driver's device"),
        pytest.param(claim(consumers=()), claim(), id="a release"),
        pytest.param(claim(), claim(), id="nothing new"),
    ],
)
def test_a_write_that_gives_nothing_is_allowed_without_looking(
    new: ResourceClaim, old: ResourceClaim | None
) -> None:
    assert not gives_a_device(new, old)
    allowed, _, _ = verdict(new, old=old, pods=[], domains=[], placements=[])
    assert allowed


@pytest.mark.parametrize(
    ("new", "world", "reason", "words"),
    [
        pytest.param(claim(consumers=()), {}, "Consumers", "reserved for 0 consumers",
                     id="allocated for nobody"),
        pytest.param(claim(consumers=(("p", POD_UID), ("q", "uid-q"))), {}, "Consumers",
                     "serves exactly one pod", id="two pods"),
        pytest.param(claim(), {"pods": []}, "UnknownPod", "not in the clique allocator's view",
                     id="a pod not seen yet"),
        pytest.param(claim(), {"pods": [pod(uid="other")]}, "UnknownPod", "retriable",
                     id="a pod recreated under the name"),
        pytest.param(claim("forged"), {}, "NotFromTemplate",
                     "ResourceClaim team-a/forged was not made from a ResourceClaimTemplate",
                     id="a claim made by hand"),
        pytest.param(claim(owner="uid-someone-else"), {}, "NotFromTemplate",
                     "goes only to the claim a ComputeDomain's template made",
                     id="a claim another pod controls"),
        pytest.param(claim(), {"domains": []}, "NotADomain",
                     "ResourceClaimTemplate train-rct, which is no ComputeDomain's",
                     id="a template of no domain"),
        pytest.param(claim(), {"pods": [pod(claims=[
            {"name": "imex", "resourceClaimTemplateName": "train-rct"},
            {"name": "more", "resourceClaimTemplateName": "train-rct"}])]},
                     "SeveralClaims", "takes 2 claims of ResourceClaimTemplate train-rct",
                     id="one pod, two devices"),
        pytest.param(claim(), {"placements": []}, "NotPlaced", "has no Placement yet",
                     id="not placed"),
        pytest.param(claim(), {"placements": [placement(uid="other")]}, "NotPinned",
                     "is not a member the clique allocator pinned for ComputeDomain team-a/train",
                     id="seat of another pod of that name"),
        pytest.param(claim(node="n2"), {}, "NotPinned",
                     "pinned to node n1 for ComputeDomain team-a/train",
                     id="a device on another node"),
    ],
)  # fmt: skip
def test_every_other_claim_is_refused_and_the_message_says_why(
    new: ResourceClaim, world: dict[str, Any], reason: str, words: str
) -> None:
    allowed, found_reason, message = verdict(new, **world)
    assert not allowed
    assert found_reason == reason
    assert words in message


def test_the_configuration_sends_only_writes_holding_a_cdo_device() -> None:
    config = allocation_webhook_configuration(
        ca_bundle=b"x", driver=DRIVER_NAME, url="https://127.0.0.1:9443"
    )
    (hook,) = config["webhooks"]
    assert config["kind"] == "ValidatingWebhookConfiguration"
    assert hook["clientConfig"]["url"] == "https://127.0.0.1:9443/validate-channel-allocations"
    assert hook["failurePolicy"] == "Fail"
    assert hook["rules"][0]["resources"] == ["resourceclaims/status"]
    program = cel.compile_rule(MATCH_CDO_DEVICE.format(driver=DRIVER_NAME))
    for new, sent in ((claim(), True), (claim(driver="gpu.nvidia.com"), False),
                      (claim(node=None), False)):  # fmt: skip
        body = msgspec.to_builtins(new)
        assert bool(cel.evaluate(program, {"object": body})) is sent
