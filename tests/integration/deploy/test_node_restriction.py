"""The node-restriction policy cdo ships, enforced by the API emulator with RBAC on.

The policy, the ServiceAccounts and their RBAC are what ``deploy/kustomize/base`` renders;
the tokens come from the TokenRequest API, bound to a Node (or to a pod on one), so they
carry the node-name claim the policy keys on. Besides raw requests, the health monitor's
Node writer and the IMEX agent's ResourceSlice publisher run as their node's identity: what
the services really write passes, another node's objects do not.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from services.health_monitor.faults import Reaction
from services.health_monitor.metrics import HealthMetrics
from services.health_monitor.state import ConditionState, NodeHealth
from services.health_monitor.writer import NodeWriter
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.nodeslice import NodeSlicePublisher
from shared.metrics import Metrics
from sim.kubeapi import KubeServer, ServerConfig
from tests.integration.deploy.conftest import KUSTOMIZE, NAMESPACE, Manifest, find, render
from tests.integration.kubeapi.auth_helpers import ENFORCED, admin, bearer, ok, token
from tests.integration.kubeapi.conftest import Http, Kubectl

POLICY = "cdo-node-restriction"
AGENT, MONITOR = "cdo-imex-agent", "cdo-health-monitor"
NODES = "/api/v1/nodes"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
RULES = "/apis/resource.k8s.io/v1/devicetaintrules"
LABELS_OWNED = "may change only the labels cdo owns (cdo.dev/*, nvidia.com/gpu.clique)"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
MERGE = {"Content-Type": "application/merge-patch+json"}
STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}
PATHS = {
    "ServiceAccount": f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "ValidatingAdmissionPolicy": f"{ADMISSION}/validatingadmissionpolicies",
    "ValidatingAdmissionPolicyBinding": f"{ADMISSION}/validatingadmissionpolicybindings",
}


@pytest.fixture
def emulator_config() -> ServerConfig:
    return ENFORCED


@pytest.fixture(scope="module")
def base() -> list[Manifest]:
    return render(KUSTOMIZE / "base")


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {
            "taints": [{"key": "example.com/dedicated", "value": "gpu", "effect": "NoSchedule"}]
        },
        "status": {
            "capacity": {"cpu": "72", "nvidia.com/gpu": "4"},
            "allocatable": {"cpu": "72", "nvidia.com/gpu": "4"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def resource_slice(node_name: str, driver: str = "compute-domain.cdo.dev") -> dict[str, Any]:
    return {
        "metadata": {"name": f"{node_name}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "attachment-0"}],
        },
    }


def taint_rule(name: str, pool: str, label: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"cdo.dev/gpu-fault-node": label}},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": pool, "device": "gpu-0"},
            "taint": {"key": "cdo.dev/gpu-fault", "value": "fatal", "effect": "NoExecute"},
        },
    }


@dataclass
class Tokens:
    """Tokens of the two ServiceAccounts, bound to node-a or node-b, and one bound to nothing."""

    agent_a: str
    agent_b: str
    monitor_a: str
    monitor_b: str
    agent_unbound: str


async def node_token(http: Http, sa: str, node_obj: dict[str, Any]) -> str:
    ref = {"kind": "Node", "apiVersion": "v1", "name": node_obj["metadata"]["name"]}
    ref["uid"] = node_obj["metadata"]["uid"]
    return await token(http, sa, namespace=NAMESPACE, spec={"boundObjectRef": ref})


@pytest.fixture
async def tokens(emulator: KubeServer, base: list[Manifest]) -> Tokens:
    """The rendered ServiceAccounts, RBAC and policy applied; nodes node-a and node-b."""
    async with admin(emulator) as http:
        await ok(http, "POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        for kind, name in [
            ("ServiceAccount", AGENT),
            ("ServiceAccount", MONITOR),
            ("ClusterRole", AGENT),
            ("ClusterRole", MONITOR),
            ("ClusterRoleBinding", AGENT),
            ("ClusterRoleBinding", MONITOR),
            ("ValidatingAdmissionPolicy", POLICY),
            ("ValidatingAdmissionPolicyBinding", POLICY),
        ]:
            await ok(http, "POST", PATHS[kind], find(base, kind, name))
        a = await ok(http, "POST", NODES, node("node-a"))
        b = await ok(http, "POST", NODES, node("node-b"))
        return Tokens(
            agent_a=await node_token(http, AGENT, a),
            agent_b=await node_token(http, AGENT, b),
            monitor_a=await node_token(http, MONITOR, a),
            monitor_b=await node_token(http, MONITOR, b),
            agent_unbound=await token(http, AGENT, namespace=NAMESPACE),
        )


@pytest.fixture
async def as_agent_a(emulator: KubeServer, tokens: Tokens) -> AsyncIterator[Http]:
    async with bearer(emulator, tokens.agent_a) as http:
        yield http


@pytest.fixture
async def as_monitor_a(emulator: KubeServer, tokens: Tokens) -> AsyncIterator[Http]:
    async with bearer(emulator, tokens.monitor_a) as http:
        yield http


def denied(resource: str, group: str, name: str, message: str) -> dict[str, Any]:
    """The Status the real server answers for a request this policy denies."""
    full = f"ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: {message}"
    target = f"{resource}.{group}" if group else resource
    details: dict[str, Any] = {"name": name, "group": group, "kind": resource}
    if not group:
        del details["group"]  # omitted when empty, as Go's omitempty does
    details["causes"] = [{"message": full}]
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'{target} "{name}" is forbidden: {full}',
        "reason": "Forbidden",
        "details": details,
        "code": 403,
    }


async def test_agent_writes_its_own_node_and_resource_slice(as_agent_a: Http) -> None:
    http = as_agent_a
    patch: dict[str, Any] = {"metadata": {"annotations": {"cdo.dev/imex-address": "10.0.0.1"}}}
    status, body, _ = await http.request("PATCH", f"{NODES}/node-a", json=patch, headers=MERGE)
    assert status == 200, str(body)
    assert body["metadata"]["annotations"]["cdo.dev/imex-address"] == "10.0.0.1"
    condition = {"type": "cdo.dev/ImexReady", "status": "True", "reason": "Ready"}
    patch = {"status": {"conditions": [condition]}}
    status, body, _ = await http.request(
        "PATCH", f"{NODES}/node-a/status", json=patch, headers=STRATEGIC
    )
    assert status == 200, str(body)
    assert {c["type"] for c in body["status"]["conditions"]} == {"Ready", "cdo.dev/ImexReady"}
    created = await ok(http, "POST", SLICES, resource_slice("node-a"))
    created["spec"]["devices"].append({"name": "attachment-1"})
    name = created["metadata"]["name"]
    updated = await ok(http, "PUT", f"{SLICES}/{name}", created)
    assert [d["name"] for d in updated["spec"]["devices"]] == ["attachment-0", "attachment-1"]
    await ok(http, "DELETE", f"{SLICES}/{name}")


async def test_agent_cannot_write_another_nodes_objects(
    emulator: KubeServer, as_agent_a: Http, tokens: Tokens
) -> None:
    http = as_agent_a
    patch: dict[str, Any] = {"metadata": {"annotations": {"cdo.dev/imex-address": "10.0.0.1"}}}
    status, body, _ = await http.request("PATCH", f"{NODES}/node-b", json=patch, headers=MERGE)
    assert (status, body) == (
        403,
        denied("nodes", "", "node-b", "node node-a may write only its own Node, not node-b"),
    )
    # A patch that would change nothing is refused all the same, as on the real server.
    same = {"metadata": {"labels": {"kubernetes.io/hostname": "node-b"}}}
    status, body, _ = await http.request("PATCH", f"{NODES}/node-b", json=same, headers=MERGE)
    assert status == 403, body
    patch = {"status": {"conditions": [{"type": "cdo.dev/ImexReady", "status": "False"}]}}
    status, body, _ = await http.request(
        "PATCH", f"{NODES}/node-b/status", json=patch, headers=STRATEGIC
    )
    assert status == 403 and body["details"]["name"] == "node-b", body
    status, body, _ = await http.request("POST", SLICES, json=resource_slice("node-b"))
    message = "node node-a may write only ResourceSlices whose spec.nodeName is node-a"
    name = "node-b-compute-domain.cdo.dev"
    assert (status, body) == (403, denied("resourceslices", "resource.k8s.io", name, message))
    # Node B's own slice: node A may neither change nor delete it (a DELETE has no new object
    # to name, so the real server says "Unknown").
    async with bearer(emulator, tokens.agent_b) as as_b:
        theirs = await ok(as_b, "POST", SLICES, resource_slice("node-b"))
    theirs["spec"]["devices"] = []
    status, body, _ = await http.request("PUT", f"{SLICES}/{name}", json=theirs)
    assert (status, body) == (403, denied("resourceslices", "resource.k8s.io", name, message))
    status, body, _ = await http.request("DELETE", f"{SLICES}/{name}")
    assert (status, body) == (403, denied("resourceslices", "resource.k8s.io", "Unknown", message))
    # A slice of another driver, even for its own node, is not the agent's.
    status, body, _ = await http.request(
        "POST", SLICES, json=resource_slice("node-a", "gpu.nvidia.com")
    )
    assert status == 403, body
    assert body["message"].endswith(
        "may create, change or delete only ResourceSlices of the driver "
        "compute-domain.cdo.dev, not of gpu.nvidia.com"
    )


async def test_only_the_keys_cdo_owns_change(as_agent_a: Http, as_monitor_a: Http) -> None:
    path = f"{NODES}/node-a"
    cases = [
        (
            {"metadata": {"labels": {"team": "x"}}},
            f"{LABELS_OWNED}, not team",
        ),
        (
            {"metadata": {"labels": {"kubernetes.io/hostname": None}}},
            f"{LABELS_OWNED}, not kubernetes.io/hostname",
        ),
        (
            {"metadata": {"annotations": {"example.com/note": "x"}}},
            "may change only the annotations cdo owns (cdo.dev/*), not example.com/note",
        ),
        (
            {"spec": {"taints": []}},
            "may add, change or remove only the taints cdo owns (cdo.dev/*)",
        ),
        ({"spec": {"unschedulable": True}}, "may not cordon or uncordon its Node"),
    ]
    for patch, message in cases:
        status, body, _ = await as_monitor_a.request("PATCH", path, json=patch, headers=MERGE)
        assert (status, body) == (403, denied("nodes", "", "node-a", message)), patch
    # What the health monitor writes: the clique labels, its taint (others kept), annotations.
    fault = {"key": "cdo.dev/gpu-fault", "value": "fatal", "effect": "NoExecute"}
    kept = {"key": "example.com/dedicated", "value": "gpu", "effect": "NoSchedule"}
    patch = {
        "metadata": {
            "labels": {"nvidia.com/gpu.clique": "c.1", "cdo.dev/nvlink-domain": "c"},
            "annotations": {"cdo.dev/gpu-fault-breaker": "{}"},
        },
        "spec": {"taints": [kept, fault]},
    }
    status, body, _ = await as_monitor_a.request("PATCH", path, json=patch, headers=MERGE)
    assert status == 200, str(body)
    assert [t["key"] for t in body["spec"]["taints"]] == [kept["key"], fault["key"]]
    status, body, _ = await as_monitor_a.request(
        "PATCH", path, json={"spec": {"taints": [kept]}}, headers=MERGE
    )
    assert status == 200, str(body)
    # The status: only cdo's conditions, never what the scheduler counts.
    ready = {"type": "Ready", "status": "False", "reason": "KubeletNotReady"}
    for patch, message in [
        (
            {"status": {"conditions": [ready]}},
            "may change only the node conditions cdo owns (cdo.dev/*)",
        ),
        (
            {"status": {"allocatable": {"nvidia.com/gpu": "8"}}},
            "may not change its Node's capacity or allocatable",
        ),
    ]:
        status, body, _ = await as_agent_a.request(
            "PATCH", f"{path}/status", json=patch, headers=STRATEGIC
        )
        assert (status, body) == (403, denied("nodes", "", "node-a", message)), patch


async def test_a_token_without_the_node_claim_is_refused(
    emulator: KubeServer, tokens: Tokens
) -> None:
    message = (
        "a node's cdo services must use a token bound to their node (no "
        "authentication.kubernetes.io/node-name in the user's extra)"
    )
    patch = {"metadata": {"annotations": {"cdo.dev/imex-address": "10.0.0.1"}}}
    async with bearer(emulator, tokens.agent_unbound) as http:
        status, body, _ = await http.request("PATCH", f"{NODES}/node-a", json=patch, headers=MERGE)
        assert (status, body) == (403, denied("nodes", "", "node-a", message))
        # RBAC alone lets it read; the policy is about writes.
        assert (await http.request("GET", f"{NODES}/node-a"))[0] == 200
    # The administrator is not one of the node's services: the policy does not apply.
    async with admin(emulator) as http:
        patch = {"metadata": {"labels": {"team": "x"}, "annotations": {"a.example.com/b": "c"}}}
        status, body, _ = await http.request("PATCH", f"{NODES}/node-b", json=patch, headers=MERGE)
        assert status == 200, body


async def test_a_daemonset_pod_token_carries_its_node(emulator: KubeServer, tokens: Tokens) -> None:
    async with admin(emulator) as http:
        pod = {
            "metadata": {"name": "monitor-a"},
            "spec": {
                "serviceAccountName": MONITOR,
                "nodeName": "node-a",
                "containers": [{"name": "monitor", "image": "cdo/health-monitor"}],
            },
        }
        created = await ok(http, "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod)
        ref = {"kind": "Pod", "apiVersion": "v1", "name": "monitor-a"}
        ref["uid"] = created["metadata"]["uid"]
        jwt = await token(http, MONITOR, namespace=NAMESPACE, spec={"boundObjectRef": ref})
    patch = {"metadata": {"labels": {"cdo.dev/multi-node-nvlink": "true"}}}
    async with bearer(emulator, jwt) as http:
        status, body, _ = await http.request("PATCH", f"{NODES}/node-a", json=patch, headers=MERGE)
        assert status == 200, body
        status, body, _ = await http.request("PATCH", f"{NODES}/node-b", json=patch, headers=MERGE)
        assert (status, body) == (
            403,
            denied("nodes", "", "node-b", "node node-a may write only its own Node, not node-b"),
        )


async def test_device_taint_rules_of_its_own_node_only(
    emulator: KubeServer, as_monitor_a: Http, tokens: Tokens
) -> None:
    http = as_monitor_a
    await ok(http, "POST", RULES, taint_rule("cdo-gpu-fault-node-a-gpu-0", "node-a", "node-a"))
    message = (
        "node node-a may write only DeviceTaintRules that select the device pool node-a and "
        "carry the label cdo.dev/gpu-fault-node=node-a"
    )
    for name, pool, label in [("r1", "node-b", "node-a"), ("r2", "node-a", "node-b")]:
        status, body, _ = await http.request("POST", RULES, json=taint_rule(name, pool, label))
        assert (status, body) == (403, denied("devicetaintrules", "resource.k8s.io", name, message))
    async with bearer(emulator, tokens.monitor_b) as as_b:
        status, body, _ = await as_b.request("DELETE", f"{RULES}/cdo-gpu-fault-node-a-gpu-0")
        assert status == 403, body
        assert body["details"]["name"] == "Unknown"
    await ok(http, "DELETE", f"{RULES}/cdo-gpu-fault-node-a-gpu-0")


async def test_kubectl_shows_the_denial(
    emulator: KubeServer, tokens: Tokens, tmp_path: Any
) -> None:
    kubectl = Kubectl(emulator.kubeconfig, tmp_path / "kubectl-cache")
    rc, out, err = await kubectl(
        "--token", tokens.agent_a, "annotate", "node", "node-b", "cdo.dev/imex-address=10.0.0.9"
    )
    assert rc == 1, out
    assert err.strip() == (
        'Error from server (Forbidden): nodes "node-b" is forbidden: ValidatingAdmissionPolicy '
        f"'{POLICY}' with binding '{POLICY}' denied request: node node-a may write only its own "
        "Node, not node-b"
    )
    await kubectl.ok(
        "--token", tokens.agent_a, "annotate", "node", "node-a", "cdo.dev/imex-address=10.0.0.9"
    )


def token_kubeconfig(kube: KubeServer, jwt: str, path: Path) -> Path:
    """The emulator's kubeconfig with ``jwt`` as its user's credentials, written to ``path``."""
    config = yaml.safe_load(kube.kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"token": jwt}
    path.write_text(yaml.safe_dump(config))
    return path


@contextlib.asynccontextmanager
async def kube_client(kube: KubeServer, jwt: str, path: Path) -> AsyncIterator[KubeClient]:
    """cdo's own client, configured as a pod with ``jwt`` is."""
    client = await KubeClient.connect(kubeconfig=token_kubeconfig(kube, jwt, path))
    try:
        yield client
    finally:
        await client.close()


async def test_the_health_monitors_own_writes_pass(
    emulator: KubeServer, tokens: Tokens, tmp_path: Path
) -> None:
    """The monitor's real Node writer, as its node's identity: the taint (others' kept), the
    condition, the clique labels and its annotation go through; another node's do not."""
    health = NodeHealth(
        reaction=Reaction.NO_EXECUTE,
        condition=ConditionState(status="False", reason="GpuFault", message="XID 79"),
        labels={"nvidia.com/gpu.clique": "c.1", "cdo.dev/nvlink-domain": "c"},
    )
    async with kube_client(emulator, tokens.monitor_a, tmp_path / "kubeconfig") as client:
        writer = NodeWriter(
            client,
            node_name="node-a",
            field_manager=MONITOR,
            metrics=HealthMetrics(Metrics()),
        )
        after = await writer.apply(
            health, await writer.read(), annotations={"cdo.dev/gpu-fault-breaker": "{}"}
        )
        assert [t.key for t in after.spec.taints] == ["example.com/dedicated", "cdo.dev/gpu-fault"]
        assert after.metadata.labels["nvidia.com/gpu.clique"] == "c.1"
        assert after.metadata.annotations["cdo.dev/gpu-fault-breaker"] == "{}"
        assert "cdo.dev/GpuHealthy" in {c.type for c in after.status.conditions}
        other = NodeWriter(
            client, node_name="node-b", field_manager=MONITOR, metrics=HealthMetrics(Metrics())
        )
        with pytest.raises(KubeApiError) as refused:
            await other.apply(health, await other.read())
        assert (refused.value.code, refused.value.reason) == (403, "Forbidden")


async def test_the_agents_own_resource_slice_publisher_passes(
    emulator: KubeServer, tokens: Tokens, tmp_path: Path
) -> None:
    """The agent's real ResourceSlice publisher, as its node's identity: it creates and
    replaces node A's slice; node B's it may not."""
    async with admin(emulator) as http:
        uids = {
            n: (await ok(http, "GET", f"{NODES}/{n}"))["metadata"]["uid"]
            for n in ("node-a", "node-b")
        }
    devices = [{"name": "attachment-0"}]
    async with kube_client(emulator, tokens.agent_a, tmp_path / "kubeconfig") as client:

        def publisher(node_name: str) -> NodeSlicePublisher:
            return NodeSlicePublisher(
                client,
                driver="compute-domain.cdo.dev",
                node=node_name,
                node_uid=uids[node_name],
                devices=lambda: list(devices),
                resync_s=60.0,
                managed_by=AGENT,
            )

        await publisher("node-a").sync()
        devices.append({"name": "attachment-1"})
        await publisher("node-a").sync()
        async with admin(emulator) as http:
            published = await ok(http, "GET", f"{SLICES}/node-a-compute-domain.cdo.dev")
        assert [d["name"] for d in published["spec"]["devices"]] == ["attachment-0", "attachment-1"]
        with pytest.raises(KubeApiError) as refused:
            await publisher("node-b").sync()
        assert (refused.value.code, refused.value.reason) == (403, "Forbidden")
