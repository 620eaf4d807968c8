"""``cdo preflight`` as a user runs it, against the API emulator over real HTTP: a cluster ready for
cdo, and clusters broken on purpose (DRA not served, NVIDIA's driver installed, an unreachable
server, and after install: a service not ready, a webhook that does not answer, NATS down, nodes
whose IMEX agents report the host's IMEX service and CDI off). The findings of real agents on
simulated nodes are in tests/e2e/test_sim_cli.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli.preflight.gather import DAEMON_SETS, ENDPOINT_SLICES, MUTATING_WEBHOOKS
from services.clique_allocator.webhook.configuration import ServiceReference, webhook_configuration
from shared.crds import install_crds
from shared.crds.names import (
    CDI_ENABLED_CONDITION,
    CLIQUE_LABEL,
    GPU_RESOURCE,
    IMEX_READY_CONDITION,
    NVLINK_DOMAIN_LABEL,
)
from shared.kube.apis import OPTIONAL_APIS, REQUIRED_APIS, missing_required_message
from shared.kube.client import KubeClient
from shared.kube.resources import DEPLOYMENTS, DEVICE_CLASSES, NAMESPACES, NODES
from sim.kubeapi import ApiServer, KubeServer, ServerConfig
from sim.kubeapi.releases import SUPPORTED_RELEASES
from sim.natsserver import free_port
from sim.podgate import install_pod_gate
from tests.integration.cli.conftest import Result, acdo, dead_kubeconfig
from tests.integration.cli.objects import A, condition
from tests.support.releases import at_release

NAMESPACE = "cdo-system"


async def preflight(kubeconfig: Path, tmp_path: Path, *args: str) -> tuple[Result, dict[str, Any]]:
    """Run ``cdo preflight -o json``; the result and its document's checks by name."""
    result = await acdo(
        "preflight", "-o", "json", "--kubeconfig", str(kubeconfig), "--state-dir",
        str(tmp_path), "--nats-url", f"nats://127.0.0.1:{free_port()}", *args,
        env={"HOME": str(tmp_path)},
    )  # fmt: skip
    document = json.loads(result.stdout) if result.stdout.startswith("{") else {}
    return result, {check["name"]: check for check in document.get("checks", [])}


async def gpu_node(client: KubeClient, name: str, *, labels: dict[str, str] | None = None) -> None:
    await client.create(
        NODES,
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": name, "labels": {CLIQUE_LABEL: A, **(labels or {})}}},
    )  # fmt: skip
    status = {"allocatable": {GPU_RESOURCE: "4"}, "capacity": {GPU_RESOURCE: "4"}}
    await client.patch(NODES, name, {"status": status}, subresource="status")


async def report(client: KubeClient, node: str, *conditions: dict[str, Any]) -> None:
    """What the node's IMEX agent and health monitor write on it."""
    await client.patch(
        NODES, node, {"metadata": {"labels": {NVLINK_DOMAIN_LABEL: A.split(".")[0]}}}
    )
    body = {"status": {"conditions": [condition("cdo.dev/GpuHealthy", "True", "GpuHealthy"),
                                      *conditions]}}  # fmt: skip
    await client.patch(NODES, node, body, subresource="status", patch_type="strategic")


@pytest.fixture
async def ready_cluster(kube_client: KubeClient) -> KubeClient:
    """Two GPU nodes from NVIDIA's device plugin, in one clique; nothing of cdo yet."""
    await gpu_node(kube_client, "gpu-1")
    await gpu_node(kube_client, "gpu-2")
    return kube_client


@pytest.mark.parametrize(
    "emulator_config", [pytest.param(at_release(v)[0], id=v) for v in SUPPORTED_RELEASES]
)
async def test_a_ready_cluster_before_install_passes_at_every_release(
    ready_cluster: KubeClient, emulator: KubeServer, emulator_config: ServerConfig, tmp_path: Path
) -> None:
    release = emulator_config.kubernetes_version
    result, checks = await preflight(emulator.kubeconfig, tmp_path)
    rules = checks["optional-api/devicetaintrules.resource.k8s.io/v1"]
    # DeviceTaintRule is served at resource.k8s.io/v1 by default only from 1.37.
    assert (rules["status"], result.code) == (("ok", 0) if release == "1.37" else ("warn", 1))
    assert {name: check["status"] for name, check in checks.items() if "optional" not in name} == {
        "api-server": "ok", "dra": "ok", "nvidia-compute-domain-driver": "ok", "gpus": "ok",
        "cliques": "ok", "clique-label": "ok", "installed": "skip",
    }  # fmt: skip
    assert f"Kubernetes v{release}.0" in checks["api-server"]["message"]
    assert "8 GPUs on 2 nodes from NVIDIA's device plugin" in checks["gpus"]["message"]
    if release != "1.37":
        assert "the health monitor taints the whole node" in rules["message"]
    text = await acdo("preflight", "--kubeconfig", str(emulator.kubeconfig), "--state-dir",
                      str(tmp_path), env={"HOME": str(tmp_path)})  # fmt: skip
    assert text.code == result.code
    assert "  ok    dra: DRA's resource.k8s.io/v1 serves" in text.stdout


async def test_a_server_without_dra_fails_and_names_what_is_missing(
    ready_cluster: KubeClient, emulator: KubeServer, tmp_path: Path
) -> None:
    def without_dra(api: ApiServer) -> None:
        for resource in (*REQUIRED_APIS, *(optional.resource for optional in OPTIONAL_APIS)):
            api.registry.remove(resource.group, resource.version, resource.plural)

    without_dra(emulator.api)
    result, checks = await preflight(emulator.kubeconfig, tmp_path)
    assert result.code == 2
    assert checks["dra"]["status"] == "fail"
    assert checks["dra"]["message"] == missing_required_message(list(REQUIRED_APIS))
    api = OPTIONAL_APIS[0]
    optional = checks[f"optional-api/{api.name}"]
    assert optional["status"] == "warn" and api.without in optional["message"]
    assert checks["gpus"]["status"] == "ok"  # the device plugin's GPUs are still there


async def test_nvidia_compute_domain_driver_installed_fails(
    ready_cluster: KubeClient, emulator: KubeServer, tmp_path: Path
) -> None:
    await ready_cluster.create(
        DEVICE_CLASSES,
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
         "metadata": {"name": "compute-domain-default-channel.nvidia.com"}, "spec": {}},
    )  # fmt: skip
    result, checks = await preflight(emulator.kubeconfig, tmp_path)
    assert result.code == 2
    check = checks["nvidia-compute-domain-driver"]
    assert check["status"] == "fail"
    assert "compute-domain-default-channel.nvidia.com" in check["message"]
    assert "docs/migrating.md" in check["hint"]


async def test_an_unreachable_server_says_so_and_exits_2(tmp_path: Path) -> None:
    config = dead_kubeconfig(tmp_path / "kubeconfig", free_port())
    result, checks = await preflight(config, tmp_path)
    assert result.code == 2
    assert list(checks) == ["api-server"] and checks["api-server"]["status"] == "fail"
    assert "the Kubernetes API does not answer" in checks["api-server"]["message"]
    assert str(config) in checks["api-server"]["message"]
    text = await acdo("preflight", "--state-dir", str(tmp_path / "none"),
                      env={"HOME": str(tmp_path)})  # fmt: skip
    assert text.code == 2
    assert "FAIL  api-server: no cluster to ask" in text.stdout
    assert text.stdout.rstrip().endswith("not ready for cdo: 0 ok, 0 warnings, 1 failure")


async def _workload(client: KubeClient, resource: Any, name: str, status: dict[str, int]) -> None:
    labels = {"app.kubernetes.io/name": name}
    spec: dict[str, Any] = {
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels},
                     "spec": {"containers": [{"name": "c", "image": "cdo/cdo"}]}},
    }  # fmt: skip
    if resource is DEPLOYMENTS:
        spec["replicas"] = 2
    await client.create(
        resource,
        {"apiVersion": "apps/v1", "kind": resource.kind,
         "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec},
        namespace=NAMESPACE,
    )  # fmt: skip
    await client.patch(resource, name, {"status": status}, namespace=NAMESPACE,
                       subresource="status")  # fmt: skip


async def test_after_install_the_broken_parts_are_named(
    ready_cluster: KubeClient, emulator: KubeServer, tmp_path: Path
) -> None:
    client = ready_cluster
    await client.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    ready = {"replicas": 2, "readyReplicas": 2}
    await _workload(client, DEPLOYMENTS, "cdo-domain-controller", ready)
    await _workload(client, DEPLOYMENTS, "cdo-clique-allocator", ready)
    await _workload(client, DAEMON_SETS, "cdo-imex-agent",
                    {"desiredNumberScheduled": 2, "numberReady": 1})  # fmt: skip
    await _workload(client, DAEMON_SETS, "cdo-health-monitor",
                    {"desiredNumberScheduled": 2, "numberReady": 2})  # fmt: skip
    # The allocator's webhook, registered at an address where nothing answers.
    await client.create(
        MUTATING_WEBHOOKS,
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": "cdo-clique-allocator"},
         "webhooks": [{
             "name": "pod-gate.clique-allocator.cdo.dev", "admissionReviewVersions": ["v1"],
             "clientConfig": {"url": f"https://127.0.0.1:{free_port()}/mutate-pods"},
             "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                        "resources": ["pods"]}],
             "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 2}]},
    )  # fmt: skip
    foreign = condition(IMEX_READY_CONDITION, "False", "ForeignImexDaemon",
                        "another IMEX daemon runs on this node; ports 50000 answer")  # fmt: skip
    await report(client, "gpu-1", foreign,
                 condition(CDI_ENABLED_CONDITION, "True", "CdiEnabled"))  # fmt: skip
    said = "containerd://1.7.27: enable_cdi = false in /etc/containerd/config.toml"
    cdi_off = condition(CDI_ENABLED_CONDITION, "False", "CdiDisabled", said)
    await report(client, "gpu-2", condition(IMEX_READY_CONDITION, "True", "ImexReady"), cdi_off)

    result, checks = await preflight(emulator.kubeconfig, tmp_path)
    assert result.code == 2, result.stdout
    statuses = {name: check["status"] for name, check in checks.items()}
    assert statuses == {
        "api-server": "ok", "dra": "ok",
        **{f"optional-api/{api.name}": "ok" for api in OPTIONAL_APIS},
        "nvidia-compute-domain-driver": "ok", "gpus": "ok", "cliques": "ok",
        "clique-label": "ok", "services": "fail", "webhook": "fail",
        "webhook-certificate": "warn", "nats": "warn", "host-imex-service": "fail",
        "imex-programs": "ok", "cdi": "fail", "imex-ready": "ok",
    }  # fmt: skip
    assert "daemonset/cdo-imex-agent 1/2" in checks["services"]["message"]
    assert "cdo-nats missing" in checks["services"]["message"]  # shown, not a failure
    assert "failed calling webhook" in checks["webhook"]["message"]
    assert "does not answer" in checks["nats"]["message"]
    assert "on 1 node: gpu-1" in checks["host-imex-service"]["message"]
    assert "systemctl disable --now nvidia-imex" in checks["host-imex-service"]["hint"]
    assert "1 node: gpu-2" in checks["cdi"]["message"]
    assert "enable_cdi = false" in checks["cdi"]["message"]


async def test_a_service_webhook_without_a_ready_endpoint_fails(
    ready_cluster: KubeClient, emulator: KubeServer, tmp_path: Path
) -> None:
    """deploy/'s registration: a Service, failurePolicy Ignore, and the cdo-pod-gate policy."""
    client = ready_cluster
    await install_crds(client)
    await install_pod_gate(client)
    await client.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    await client.create(
        MUTATING_WEBHOOKS,
        webhook_configuration(
            ca_bundle=b"-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n",
            service=ServiceReference(namespace=NAMESPACE, name="cdo-clique-allocator"),
        ),
    )
    slice_of = {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "cdo-clique-allocator-a", "namespace": NAMESPACE,
                     "labels": {"kubernetes.io/service-name": "cdo-clique-allocator"}},
        "addressType": "IPv4", "ports": [{"port": 8443}],
        "endpoints": [{"addresses": ["10.0.0.7"], "conditions": {"ready": False}}],
    }  # fmt: skip
    await client.create(ENDPOINT_SLICES, slice_of, namespace=NAMESPACE)
    result, checks = await preflight(emulator.kubeconfig, tmp_path)
    assert result.code == 2
    assert checks["webhook"]["status"] == "fail"
    assert "has no ready endpoint" in checks["webhook"]["message"]
    assert (
        "Secret cdo-system/cdo-clique-allocator-webhook-tls does not exist"
        in (checks["webhook-certificate"]["message"])
    )

    ready = {"addresses": ["10.0.0.7"], "conditions": {"ready": True}}
    await client.patch(ENDPOINT_SLICES, "cdo-clique-allocator-a", {"endpoints": [ready]},
                       namespace=NAMESPACE)  # fmt: skip
    result, checks = await preflight(emulator.kubeconfig, tmp_path)
    assert checks["webhook"]["status"] == "ok"
    assert "has 1 ready endpoints" in checks["webhook"]["message"]
