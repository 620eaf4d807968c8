"""The roles rendered from deploy/ decide what cdo's services may do on an enforcing emulator:
with them a service's call succeeds; without one rule of them the same call gets the real
server's 403, and the emulator's access record shows both."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.leader import LeaderElector
from shared.kube.resources import NODES, Resource
from sim import identities
from sim.kubeapi import KubeServer, ServerConfig, serve

LEADER_ROLE = "cdo-domain-controller-leader"
DC_USER = "system:serviceaccount:cdo-system:cdo-domain-controller"
SELF_SUBJECT_REVIEWS = Resource(
    group="authentication.k8s.io",
    version="v1",
    plural="selfsubjectreviews",
    kind="SelfSubjectReview",
    namespaced=False,
)


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    return identities.identity_objects(identities.render_base())


@pytest.fixture
async def enforcing(tmp_path: Path) -> AsyncIterator[KubeServer]:
    async with serve(
        config=ServerConfig(enforce_auth=True), kubeconfig=tmp_path / "kubeconfig"
    ) as server:
        yield server


def without_rule(objs: list[dict[str, Any]], role: str, verb: str) -> list[dict[str, Any]]:
    """``objs`` with the rule of Role ``role`` that grants ``verb`` removed."""
    changed = copy.deepcopy(objs)
    target = next(o for o in changed if o["kind"] == "Role" and o["metadata"]["name"] == role)
    before = len(target["rules"])
    target["rules"] = [rule for rule in target["rules"] if verb not in rule["verbs"]]
    assert len(target["rules"]) == before - 1
    return changed


async def domain_controller(
    kube: KubeServer, objs: list[dict[str, Any]], tmp_path: Path
) -> KubeClient:
    """Install ``objs`` as the admin; a client acting as the domain controller's account."""
    admin = await KubeClient.connect(kubeconfig=kube.kubeconfig)
    try:
        await identities.install(admin, objs)
        path = await identities.issue_kubeconfig(
            admin,
            admin_kubeconfig=kube.kubeconfig,
            account=identities.DOMAIN_CONTROLLER_SA,
            path=tmp_path / "dc.kubeconfig",
        )
    finally:
        await admin.close()
    return await KubeClient.connect(kubeconfig=path)


def elector(client: KubeClient) -> LeaderElector:
    return LeaderElector(
        client, namespace=identities.NAMESPACE, name="cdo-domain-controller", identity="dc-0"
    )


def recorded(kube: KubeServer, user: str) -> dict[str, Any]:
    users: dict[str, Any] = kube.api.access.usage.snapshot()["users"]
    return users.get(user, {"allowed": [], "denied": []})  # type: ignore[no-any-return]


async def test_with_the_rendered_roles_the_controller_takes_its_lease(
    enforcing: KubeServer, rendered: list[dict[str, Any]], tmp_path: Path
) -> None:
    client = await domain_controller(enforcing, rendered, tmp_path)
    try:
        assert await elector(client).try_acquire_or_renew()
    finally:
        await client.close()
    allowed = {(e["verb"], e["resource"]) for e in recorded(enforcing, DC_USER)["allowed"]}
    assert {("get", "leases"), ("create", "leases")} <= allowed
    assert recorded(enforcing, DC_USER)["denied"] == []


async def test_without_one_rule_the_same_call_is_forbidden(
    enforcing: KubeServer, rendered: list[dict[str, Any]], tmp_path: Path
) -> None:
    client = await domain_controller(
        enforcing, without_rule(rendered, LEADER_ROLE, "create"), tmp_path
    )
    try:
        with pytest.raises(KubeApiError) as caught:
            await elector(client).try_acquire_or_renew()
    finally:
        await client.close()
    assert caught.value.code == 403
    message = (
        f'leases.coordination.k8s.io is forbidden: User "{DC_USER}" cannot create resource '
        '"leases" in API group "coordination.k8s.io" in the namespace "cdo-system"'
    )
    assert caught.value.reason == "Forbidden"
    assert caught.value.message.endswith(f": {message}")
    [denied] = recorded(enforcing, DC_USER)["denied"]
    assert (denied["verb"], denied["resource"], denied["message"]) == ("create", "leases", message)


async def test_a_node_bound_token_names_its_node(
    enforcing: KubeServer, rendered: list[dict[str, Any]], tmp_path: Path
) -> None:
    admin = await KubeClient.connect(kubeconfig=enforcing.kubeconfig)
    try:
        await identities.install(admin, rendered)
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "tray-0"}}
        await admin.create(NODES, node)
        hosted = identities.NodeIdentities(
            admin, admin_kubeconfig=enforcing.kubeconfig, directory=tmp_path / "ids"
        )
        client = await hosted.client(identities.HEALTH_MONITOR_SA, "tray-0")
        try:
            review = msgspec.json.decode(
                await client.create(
                    SELF_SUBJECT_REVIEWS,
                    {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                )
            )
            # What the monitor's role, and the node-restriction policy, allow it to do with its
            # own Node: a label of cdo's.
            await client.patch(NODES, "tray-0", {"metadata": {"labels": {"cdo.dev/probe": "b"}}})
        finally:
            await client.close()
    finally:
        await admin.close()
    user = review["status"]["userInfo"]
    assert user["username"] == "system:serviceaccount:cdo-system:cdo-health-monitor"
    assert user["extra"]["authentication.kubernetes.io/node-name"] == ["tray-0"]
    assert hosted.kubeconfig(identities.HEALTH_MONITOR_SA, "tray-0").stat().st_mode & 0o077 == 0
