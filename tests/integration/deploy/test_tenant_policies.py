"""cdo's admission policies against tenants and nodes, installed in cdo-system and in another
namespace, enforced by the API emulator with RBAC on.

What deploy/ renders is installed as ``cdo sim up`` installs it (ServiceAccounts, roles and
bindings, admission policies, the CRDs): once as the base (namespace ``cdo-system``) and once
through an overlay that moves cdo to ``gpu-ops`` (the overlay docs/install.md shows). Either
way, the policies find cdo's identities through cdo's own ClusterRoleBindings (or, for the
health monitor's evictions, its account name), so:

- only the clique allocator creates or changes a Placement, and only with its own user in
  ``cdo.dev/written-by``; a tenant's ServiceAccount with write access to Placements is refused;
- a node's health monitor evicts only pods bound to its node;
- a node's IMEX agent changes or deletes no ResourceSlice of another driver (NVIDIA's GPU
  slice of its own node) and writes no other node's objects.

Each refusal names its policy, as kube-apiserver words it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from shared.crds import install_crds
from shared.crds.names import WRITTEN_BY_ANNOTATION, service_account_user
from shared.kube.client import KubeClient
from sim import identities
from sim.kubeapi import KubeServer, ServerConfig
from tests.integration.deploy.conftest import KUSTOMIZE, Manifest, render
from tests.integration.kubeapi.auth_helpers import ENFORCED, admin, bearer, ok, token
from tests.integration.kubeapi.conftest import Http

TENANT = "team-a"
PLACEMENTS = f"/apis/cdo.dev/v1alpha1/namespaces/{TENANT}/placements"
PODS = f"/api/v1/namespaces/{TENANT}/pods"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
NODES = "/api/v1/nodes"
MERGE = {"Content-Type": "application/merge-patch+json"}

OTHER_NAMESPACE_OVERLAY = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: {namespace}
resources:
- {base}
transformers:
# The subjects of cdo's RoleBindings and ClusterRoleBindings move too: the admission policies
# find cdo's identities through them.
- |-
  apiVersion: builtin
  kind: NamespaceTransformer
  metadata:
    name: service-account-subjects
    namespace: {namespace}
  setRoleBindingSubjects: allServiceAccounts
  fieldSpecs: []
"""


def rendered(namespace: str, tmp: Path) -> list[Manifest]:
    base = KUSTOMIZE / "base"
    if namespace == identities.NAMESPACE:
        return render(base)
    overlay = tmp / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        OTHER_NAMESPACE_OVERLAY.format(namespace=namespace, base=os.path.relpath(base, overlay))
    )
    return render(overlay)


@pytest.fixture
def emulator_config() -> ServerConfig:
    return ENFORCED


@dataclass
class Install:
    namespace: str
    allocator: str
    """Token of the clique allocator (bound to nothing)."""
    monitor_a: str
    agent_a: str
    """Tokens of node-a's health monitor and IMEX agent."""
    tenant: str
    """Token of the tenant's CI ServiceAccount, which may write Placements by RBAC."""

    @property
    def allocator_user(self) -> str:
        return service_account_user(self.namespace, "cdo-clique-allocator")


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}


def pod(name: str, node_name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "x.example/c"}]},
    }


async def node_token(http: Http, account: str, namespace: str, node_obj: dict[str, Any]) -> str:
    ref = {"kind": "Node", "apiVersion": "v1", "name": node_obj["metadata"]["name"]}
    ref["uid"] = node_obj["metadata"]["uid"]
    return await token(http, account, namespace=namespace, spec={"boundObjectRef": ref})


TENANT_CI_ROLE = {
    "metadata": {"name": "ci"},
    "rules": [
        {
            "apiGroups": ["cdo.dev"],
            "resources": ["placements"],
            "verbs": ["get", "list", "create", "update", "patch"],
        }
    ],
}


@pytest.fixture(params=[identities.NAMESPACE, "gpu-ops"])
async def install(
    request: pytest.FixtureRequest, emulator: KubeServer, tmp_path: Path
) -> AsyncIterator[Install]:
    """cdo's identities and policies installed in the namespace of the parameter; nodes
    node-a and node-b, and in the tenant's namespace a pod on each and a CI account that RBAC
    lets write Placements."""
    namespace: str = request.param
    objs = identities.identity_objects(rendered(namespace, tmp_path))
    client = await KubeClient.connect(kubeconfig=emulator.kubeconfig)
    try:
        await identities.install(client, objs)
        await install_crds(client)
    finally:
        await client.close()
    async with admin(emulator) as http:
        await ok(http, "POST", "/api/v1/namespaces", {"metadata": {"name": TENANT}})
        a = await ok(http, "POST", NODES, node("node-a"))
        await ok(http, "POST", NODES, node("node-b"))
        await ok(http, "POST", PODS, pod("on-a", "node-a"))
        await ok(http, "POST", PODS, pod("on-b", "node-b"))
        accounts = f"/api/v1/namespaces/{TENANT}/serviceaccounts"
        await ok(http, "POST", accounts, {"metadata": {"name": "ci"}})
        rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{TENANT}"
        await ok(http, "POST", f"{rbac}/roles", TENANT_CI_ROLE)
        binding = {
            "metadata": {"name": "ci"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ci"},
            "subjects": [{"kind": "ServiceAccount", "name": "ci", "namespace": TENANT}],
        }
        await ok(http, "POST", f"{rbac}/rolebindings", binding)
        yield Install(
            namespace=namespace,
            allocator=await token(http, "cdo-clique-allocator", namespace=namespace),
            monitor_a=await node_token(http, "cdo-health-monitor", namespace, a),
            agent_a=await node_token(http, "cdo-imex-agent", namespace, a),
            tenant=await token(http, "ci", namespace=TENANT),
        )


def placement(written_by: str) -> dict[str, Any]:
    return {
        "apiVersion": "cdo.dev/v1alpha1",
        "kind": "Placement",
        "metadata": {"name": "train", "annotations": {WRITTEN_BY_ANNOTATION: written_by}},
        "spec": {"gpusPerPod": 1, "size": 0},
    }


def refusal(body: Any, policy: str) -> str:
    """The part of a 403's message after the policy's name."""
    assert body["reason"] == "Forbidden", body
    prefix = f"ValidatingAdmissionPolicy '{policy}' with binding '{policy}' denied request: "
    message: str = body["message"]
    assert prefix in message, message
    return message.split(prefix, 1)[1]


async def test_only_the_allocator_writes_placements_and_signs_them(
    emulator: KubeServer, install: Install
) -> None:
    ci = service_account_user(TENANT, "ci")
    async with bearer(emulator, install.tenant) as http:
        status, body, _ = await http.request("POST", PLACEMENTS, json=placement(ci))
        assert status == 403
        assert refusal(body, "cdo-placement-writer") == (
            f"only the clique allocator ({install.allocator_user}) writes Placements, not {ci}"
        )
    async with bearer(emulator, install.allocator) as http:
        status, body, _ = await http.request("POST", PLACEMENTS, json=placement(ci))
        assert status == 403
        assert refusal(body, "cdo-placement-writer") == (
            "the annotation cdo.dev/written-by must name the user who writes the Placement "
            f"({install.allocator_user}), not {ci}"
        )
        await ok(http, "POST", PLACEMENTS, placement(install.allocator_user))
    # The tenant may not change it either, not even only the annotation back to itself.
    async with bearer(emulator, install.tenant) as http:
        patch = {"spec": {"size": 0, "slices": []}}
        status, body, _ = await http.request(
            "PATCH", f"{PLACEMENTS}/train", json=patch, headers=MERGE
        )
        assert status == 403, body["message"]
        # RBAC lets it read, and it reads the allocator's signature.
        found = await ok(http, "GET", f"{PLACEMENTS}/train")
    assert found["metadata"]["annotations"][WRITTEN_BY_ANNOTATION] == install.allocator_user


async def test_the_health_monitor_evicts_only_pods_bound_to_its_node(
    emulator: KubeServer, install: Install
) -> None:
    async with bearer(emulator, install.monitor_a) as http:
        eviction: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": "on-b"},
        }
        status, body, _ = await http.request("POST", f"{PODS}/on-b/eviction", json=eviction)
        assert status == 403, body["message"]
        assert refusal(body, "cdo-node-evictions") == (
            f"node node-a may evict only pods bound to it, not {TENANT}/on-b (on node node-b)"
        )
        eviction["metadata"]["name"] = "on-a"
        status, body, _ = await http.request("POST", f"{PODS}/on-a/eviction", json=eviction)
        assert status == 201, body
    async with admin(emulator) as http:
        names = [p["metadata"]["name"] for p in (await ok(http, "GET", PODS))["items"]]
    assert names == ["on-b"]


async def test_a_node_changes_no_slice_of_another_driver_and_no_other_node(
    emulator: KubeServer, install: Install
) -> None:
    gpu_slice = {
        "metadata": {"name": "node-a-gpu.nvidia.com"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "node-a",
            "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}],
        },
    }
    async with admin(emulator) as http:
        created = await ok(http, "POST", SLICES, gpu_slice)  # NVIDIA's driver publishes it
    message = (
        "may create, change or delete only ResourceSlices of the driver "
        "compute-domain.cdo.dev, not of gpu.nvidia.com"
    )
    async with bearer(emulator, install.agent_a) as http:
        created["spec"]["devices"] = []
        status, body, _ = await http.request("PUT", f"{SLICES}/node-a-gpu.nvidia.com", json=created)
        assert status == 403
        assert refusal(body, "cdo-node-restriction") == message
        status, body, _ = await http.request("DELETE", f"{SLICES}/node-a-gpu.nvidia.com")
        assert status == 403
        assert refusal(body, "cdo-node-restriction") == message
        patch = {"metadata": {"annotations": {"cdo.dev/imex-address": "10.0.0.9"}}}
        status, body, _ = await http.request("PATCH", f"{NODES}/node-b", json=patch, headers=MERGE)
        assert status == 403, body["message"]
        assert refusal(body, "cdo-node-restriction") == (
            "node node-a may write only its own Node, not node-b"
        )
        status, _, _ = await http.request("PATCH", f"{NODES}/node-a", json=patch, headers=MERGE)
        assert status == 200
