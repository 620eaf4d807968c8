"""The claim template: never taken from its owner, repaired when it is the domain's."""

from __future__ import annotations

from shared.crds.names import DOMAIN_LABEL
from shared.kube.models import ResourceClaimTemplate
from shared.kube.resources import RESOURCE_CLAIM_TEMPLATES
from tests.support.kubeevents import CoreEvent
from tests.support.wait import wait_for

from .cluster import NAMESPACE, Cluster, MembershipLog
from .conftest import Controller

USER_TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "shared-rct", "namespace": NAMESPACE, "labels": {"owner": "me"}},
    "spec": {
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]
            }
        }
    },
}


async def conflict_of(cluster: Cluster, name: str) -> str | None:
    ready = await cluster.condition(name, "Ready")
    if ready is None or ready.reason != "TemplateNameConflict":
        return None
    return ready.message


async def test_a_users_template_is_reported_never_overwritten(
    cluster: Cluster, controller: Controller, membership: MembershipLog
) -> None:
    await cluster.client.create(RESOURCE_CLAIM_TEMPLATES, USER_TEMPLATE, namespace=NAMESPACE)
    before = await cluster.template("shared-rct")
    assert before is not None
    await cluster.create_domain("clash", "shared-rct")

    message = await wait_for(lambda: conflict_of(cluster, "clash"), what="conflict condition")
    assert "shared-rct already exists and was not created for this domain" in message
    warnings = await wait_for(
        lambda: _events(cluster, "clash", "TemplateNameConflict"), what="Warning event"
    )
    assert warnings[0].type == "Warning"
    await controller.wait_idle()
    after = await cluster.template("shared-rct")
    assert after is not None
    assert after.metadata.resource_version == before.metadata.resource_version
    assert DOMAIN_LABEL not in after.metadata.labels and not after.metadata.owner_references
    (event,) = membership.of("clash")
    assert (event.phase, event.reason) == ("NotReady", "TemplateNameConflict")

    # Once the user's template is gone, the domain gets its own, without being touched itself.
    await cluster.client.delete(RESOURCE_CLAIM_TEMPLATES, "shared-rct", namespace=NAMESPACE)
    ours = await wait_for(
        lambda: _owned_template(cluster, "shared-rct"), what="the domain's own template"
    )
    assert ours.metadata.labels[DOMAIN_LABEL] == "clash"
    await wait_for(
        lambda: _reason_is(cluster, "clash", "WaitingForPlacement"), what="conflict cleared"
    )


async def test_another_domains_template_is_not_taken(
    cluster: Cluster, controller: Controller
) -> None:
    await cluster.create_domain("first", "first-rct")
    owned = await wait_for(lambda: _owned_template(cluster, "first-rct"), what="first template")
    await cluster.create_domain("second", "first-rct")
    message = await wait_for(lambda: conflict_of(cluster, "second"), what="conflict condition")
    assert "belongs to ComputeDomain first" in message
    await controller.wait_idle()
    still = await cluster.template("first-rct")
    assert still is not None and still.metadata.uid == owned.metadata.uid
    assert still.metadata.labels[DOMAIN_LABEL] == "first"


async def test_a_damaged_template_is_repaired(cluster: Cluster, controller: Controller) -> None:
    await cluster.create_domain("fix", "fix-rct")
    template = await wait_for(lambda: _owned_template(cluster, "fix-rct"), what="template")
    await cluster.client.patch(
        RESOURCE_CLAIM_TEMPLATES,
        "fix-rct",
        {"metadata": {"labels": {DOMAIN_LABEL: "someone-else"}}},
        namespace=NAMESPACE,
    )
    await wait_for(lambda: _label_is(cluster, "fix-rct", "fix"), what="label restored")
    await cluster.client.delete(RESOURCE_CLAIM_TEMPLATES, "fix-rct", namespace=NAMESPACE)
    recreated = await wait_for(lambda: _owned_template(cluster, "fix-rct"), what="recreated")
    assert recreated.metadata.uid != template.metadata.uid


async def _owned_template(cluster: Cluster, name: str) -> ResourceClaimTemplate | None:
    template = await cluster.template(name)
    if template is None or not template.metadata.owner_references:
        return None
    return template


async def _events(cluster: Cluster, name: str, reason: str) -> list[CoreEvent]:
    return [e for e in await cluster.events(name) if e.reason == reason]


async def _label_is(cluster: Cluster, name: str, value: str) -> bool:
    template = await cluster.template(name)
    return template is not None and template.metadata.labels.get(DOMAIN_LABEL) == value


async def _reason_is(cluster: Cluster, name: str, reason: str) -> bool:
    ready = await cluster.condition(name, "Ready")
    return ready is not None and ready.reason == reason
