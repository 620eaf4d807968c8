"""The overlays render with the real kubectl, validate, and say what docs/deploy.md says."""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import msgspec
import pytest
import yaml

from services.clique_allocator.settings import WebhookSettings
from services.clique_allocator.webhook.configuration import (
    ALLOCATION_PATH,
    MATCH_TEMPLATE_CLAIMS,
    POD_CREATE_RULE,
    WEBHOOK_PATH,
    ServiceReference,
    allocation_webhook_configuration,
    webhook_configuration,
)
from services.domain_controller.gauges import TEMPLATE_CONFLICT
from services.domain_controller.template import (
    desired_device_class,
    device_class_drifted,
    device_class_spec,
)
from shared.crds.definitions import COMPUTE_DOMAINS
from shared.crds.names import CONVERSION_PATH, DRIVER_NAME, PLACEMENT_GATE
from shared.kube.models import DeviceClass
from tests.integration.deploy.conftest import (
    KUSTOMIZE,
    NAMESPACE,
    OVERLAYS,
    ROOT,
    Manifest,
    bootstrap_settings,
    find,
    generated,
    group_of,
    render_with,
    service_workloads,
    workloads,
)

OUR_GROUPS = frozenset({"resource.nvidia.com", "cdo.dev"})
"""Custom resources of cdo's CRDs: checked against the rendered CRD schema instead."""
FOREIGN_GROUPS = frozenset({"cert-manager.io", "monitoring.coreos.com"})
"""Custom resources of other projects' CRDs: no schema here to check them against."""
GPU_NODE_SELECTOR = {"nvidia.com/gpu.present": "true"}
NATS_IDENTITIES = {"dev": "user", "prod": "token"}
"""How each overlay's services authenticate to NATS: a static user and password each (dev), or
their ServiceAccount token through the auth callout (prod, components/nats-auth-callout)."""

KUBERNETES_VERSION = kubernetes_validate.latest_version()

COMBINATIONS = {
    "all-components": (
        "nats-cluster",
        "tls",
        "cert-manager",
        "tracing",
        "metrics",
        "nats-auth-callout",
    ),
    "cert-manager": ("cert-manager",),
    "monitoring": ("monitoring",),
    "ui": ("ui",),
    "nats-auth-callout": ("nats-auth-callout",),
}


IMEX_DAEMON = "imex-daemon"
"""The IMEX agent pod's second container: the launcher and the node's nvidia-imex."""


def container(workload: Manifest) -> dict[str, Any]:
    """The workload's main container (the IMEX agent's pod also has ``imex-daemon``)."""
    containers: list[dict[str, Any]] = workload["spec"]["template"]["spec"]["containers"]
    names = [c["name"] for c in containers]
    if IMEX_DAEMON in names:
        assert names == ["imex-agent", IMEX_DAEMON]
    else:
        assert len(containers) == 1
    return containers[0]


def daemon_container(workload: Manifest) -> dict[str, Any]:
    containers: list[dict[str, Any]] = workload["spec"]["template"]["spec"]["containers"]
    (found,) = [c for c in containers if c["name"] == IMEX_DAEMON]
    return found


def pod_spec(workload: Manifest) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def env_of(workload: Manifest) -> dict[str, Any]:
    return {item["name"]: item for item in container(workload).get("env", [])}


def common_env(objs: list[Manifest]) -> dict[str, str]:
    data: dict[str, str] = generated(objs, "ConfigMap", "cdo-common-env")["data"]
    return data


def test_the_kubernetes_version_is_current() -> None:
    major, minor = (int(part) for part in KUBERNETES_VERSION.split(".")[:2])
    assert (major, minor) >= (1, 33)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_validates_strictly(overlays: dict[str, list[Manifest]], overlay: str) -> None:
    checked = 0
    for obj in overlays[overlay]:
        assert group_of(obj) not in FOREIGN_GROUPS, f"{overlay} needs a foreign CRD"
        if group_of(obj) in OUR_GROUPS:
            continue
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        checked += 1
    assert checked > 30


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_components_compose_and_validate(tmp_path: Path, combination: str) -> None:
    objs = render_with(tmp_path / combination, COMBINATIONS[combination])
    for obj in objs:
        if group_of(obj) in OUR_GROUPS | FOREIGN_GROUPS:
            continue
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_everything_lands_in_cdo_system(overlays: dict[str, list[Manifest]], overlay: str) -> None:
    for obj in overlays[overlay]:
        namespace = obj["metadata"].get("namespace")
        assert namespace in (None, NAMESPACE), obj["metadata"]["name"]
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "cdo"


def test_the_crds_are_the_generated_files(overlays: dict[str, list[Manifest]]) -> None:
    committed = {
        doc["metadata"]["name"]: doc
        for path in sorted((KUSTOMIZE / "base" / "crds").glob("*.yaml"))
        if path.name != "kustomization.yaml"
        for doc in yaml.safe_load_all(path.read_text())
    }
    for overlay in OVERLAYS:
        rendered = {
            obj["metadata"]["name"]: obj
            for obj in overlays[overlay]
            if obj["kind"] == "CustomResourceDefinition"
        }
        assert sorted(rendered) == sorted(committed)
        for name, crd in rendered.items():
            assert crd["spec"] == committed[name]["spec"]


def crd_schema(objs: list[Manifest], api_version: str, kind: str) -> dict[str, Any]:
    group, _, version = api_version.rpartition("/")
    for crd in objs:
        if crd["kind"] != "CustomResourceDefinition":
            continue
        spec = crd["spec"]
        if spec["group"] != group or spec["names"]["kind"] != kind:
            continue
        for served in spec["versions"]:
            if served["name"] == version:
                schema: dict[str, Any] = served["schema"]["openAPIV3Schema"]
                return schema
    raise AssertionError(f"no CRD serves {api_version} {kind}")


def examples() -> list[Manifest]:
    return [
        doc
        for path in sorted((ROOT / "deploy" / "examples").glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


def test_examples_validate(overlays: dict[str, list[Manifest]]) -> None:
    objs = overlays["prod"]
    custom = 0
    for example in examples():
        if group_of(example) in OUR_GROUPS:
            schema = crd_schema(objs, example["apiVersion"], example["kind"])
            jsonschema.validate(example, schema)
            custom += 1
        else:
            kubernetes_validate.validate(example, KUBERNETES_VERSION, strict=True)
    assert custom >= 1


def test_the_crd_schema_refuses_a_broken_example(overlays: dict[str, list[Manifest]]) -> None:
    domains = [e for e in examples() if e["kind"] == "ComputeDomain"]
    assert domains
    for domain in domains:
        broken = copy.deepcopy(domain)
        broken["spec"]["channel"]["allocationMode"] = "Sometimes"
        schema = crd_schema(overlays["prod"], domain["apiVersion"], domain["kind"])
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, schema)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_services_have_probes_resources_and_settings(
    overlays: dict[str, list[Manifest]], overlay: str
) -> None:
    objs = overlays[overlay]
    for service, workload in service_workloads(objs).items():
        main = container(workload)
        env = env_of(workload)
        port = int(env["CDO_HTTP_PORT"]["value"])
        ports = {p["name"]: p["containerPort"] for p in main["ports"]}
        assert ports["http"] == port, service
        assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
        assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
        resources = main["resources"]
        for key in ("cpu", "memory"):
            assert key in resources["requests"], (service, key)
            assert key in resources["limits"], (service, key)
        assert [ref["configMapRef"]["name"] for ref in main["envFrom"]] == [
            generated(objs, "ConfigMap", "cdo-common-env")["metadata"]["name"]
        ]
        if NATS_IDENTITIES[overlay] == "token":
            # components/nats-auth-callout: a projected token of audience nats, no password.
            assert "CDO_NATS_USER" not in env and "CDO_NATS_PASSWORD" not in env, service
            mounts = {m["name"]: m["mountPath"] for m in main["volumeMounts"]}
            volumes = {v["name"]: v for v in pod_spec(workload)["volumes"]}
            (source,) = volumes["nats-token"]["projected"]["sources"]
            assert source["serviceAccountToken"]["audience"] == "nats", service
            path = f"{mounts['nats-token']}/{source['serviceAccountToken']['path']}"
            assert env["CDO_NATS_TOKEN_FILE"]["value"] == path, service
        else:
            assert "CDO_NATS_TOKEN_FILE" not in env, service
            assert env["CDO_NATS_USER"]["value"] == service
            assert env["CDO_NATS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
                "name": "cdo-nats-users",
                "key": service,
            }


def test_prod_runs_the_nats_authenticator(overlays: dict[str, list[Manifest]]) -> None:
    """Prod: the auth callout's server config, its authenticator and the issuer key; dev keeps
    the static users (docs/deploy.md)."""
    assert sorted(NATS_IDENTITIES) == sorted(OVERLAYS)
    for overlay, identities in NATS_IDENTITIES.items():
        objs = overlays[overlay]
        config = generated(objs, "ConfigMap", "cdo-nats-config")["data"]["auth.conf"]
        authenticators = [o for o in objs if o["metadata"]["name"] == "cdo-nats-auth"]
        if identities == "token":
            assert "auth_callout" in config, overlay
            deployment = find(objs, "Deployment", "cdo-nats-auth")
            assert deployment["spec"]["replicas"] == 2
            server = find(objs, "StatefulSet", "cdo-nats")
            names = {e["name"] for e in server["spec"]["template"]["spec"]["containers"][0]["env"]}
            assert {"NATS_AUTH_ISSUER", "NATS_PASSWORD_NATS_AUTH"} <= names
            assert bootstrap_settings(objs)["CDO_BOOTSTRAP_NATS_AUTH_CALLOUT"] == "true"
        else:
            assert "auth_callout" not in config and authenticators == [], overlay


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_security_contexts(overlays: dict[str, list[Manifest]], overlay: str) -> None:
    for workload in workloads(overlays[overlay]):
        name = workload["metadata"]["name"]
        pod = pod_spec(workload)
        main = container(workload)
        context = {**pod.get("securityContext", {}), **main.get("securityContext", {})}
        assert context["allowPrivilegeEscalation"] is False, name
        assert context["readOnlyRootFilesystem"] is True, name
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert "privileged" not in context, name
        for shared_namespace in ("hostPID", "hostIPC"):
            assert shared_namespace not in pod, name
        if name == "cdo-imex-agent":
            # Root with CAP_MKNOD alone: justified line by line in the DaemonSet.
            assert context["runAsUser"] == 0
            assert context["runAsNonRoot"] is False
            assert main["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["MKNOD"]}
            assert pod["hostNetwork"] is True
        else:
            assert context["runAsNonRoot"] is True, name
            assert context["runAsUser"] != 0, name
            assert main["securityContext"]["capabilities"] == {"drop": ["ALL"]}, name
            assert "hostNetwork" not in pod, name


AGENT_HOST_PATHS = {
    **{
        path: path
        for path in (
            "/var/lib/kubelet/plugins/compute-domain.cdo.dev",
            "/var/lib/kubelet/plugins_registry",
            "/var/run/cdi",
            "/dev/nvidia-caps-imex-channels",
        )
    },
    # Read-only, below /host: containerd's configuration, for the CDI check.
    "/etc/containerd": "/host/etc/containerd",
}
"""Host path -> mount path: the agent mounts each host path it writes at the same path."""
MONITOR_HOST_PATHS = {"/var/lib/kubelet/pod-resources": "/var/lib/kubelet/pod-resources"}
"""The health monitor reads the kubelet's PodResources socket (which pods hold a GPU)."""
HOST_PATHS = {"cdo-imex-agent": AGENT_HOST_PATHS, "cdo-health-monitor": MONITOR_HOST_PATHS}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_host_paths_are_only_what_the_node_services_need(
    overlays: dict[str, list[Manifest]], overlay: str
) -> None:
    for workload in workloads(overlays[overlay]):
        volumes = {v["name"]: v for v in pod_spec(workload).get("volumes", [])}
        mounts = {m["name"]: m["mountPath"] for m in container(workload).get("volumeMounts", [])}
        host = {
            volume["hostPath"]["path"]: mounts[name]
            for name, volume in volumes.items()
            if "hostPath" in volume
        }
        assert host == HOST_PATHS.get(workload["metadata"]["name"], {}), workload["metadata"][
            "name"
        ]
    agent = service_workloads(overlays[overlay])["imex-agent"]
    env = env_of(agent)
    assert env["CDO_IMEX_AGENT_DRA_KUBELET_ROOT"]["value"] == "/var/lib/kubelet"
    assert env["CDO_IMEX_AGENT_DRA_CDI_ROOT"]["value"] in AGENT_HOST_PATHS.values()
    assert env["CDO_IMEX_AGENT_DRA_DEVICE_ROOT"]["value"] in AGENT_HOST_PATHS.values()
    assert env["CDO_IMEX_AGENT_RUNTIME_CONFIG_ROOT"]["value"] == "/host"
    read_only = {m["name"] for m in container(agent)["volumeMounts"] if m.get("readOnly")}
    assert "containerd-config" in read_only


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_imex_daemon_outlives_the_agents_container(
    overlays: dict[str, list[Manifest]], overlay: str
) -> None:
    """docs/deploy.md: the daemon in a container of its own, one process namespace, one config
    directory that lives as long as the pod, no rollout that replaces pods."""
    agent = service_workloads(overlays[overlay])["imex-agent"]
    pod = pod_spec(agent)
    assert pod["shareProcessNamespace"] is True
    assert agent["spec"]["updateStrategy"] == {"type": "OnDelete"}
    main, daemon = container(agent), daemon_container(agent)
    assert daemon["command"] == ["python", "-m", "services.imex_agent.launcher"]
    assert daemon["image"] == main["image"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    config = "/var/run/cdo-imex"
    for each in (main, daemon):
        env = {item["name"]: item.get("value") for item in each["env"]}
        assert env["CDO_IMEX_AGENT_IMEX_CONFIG_DIR"] == config
        assert env["CDO_IMEX_AGENT_IMEX_LAUNCHER_SOCKET"] == f"{config}/launcher.sock"
        mounts = {m["mountPath"]: m["name"] for m in each["volumeMounts"]}
        assert "emptyDir" in volumes[mounts[config]], "as long as the pod, not the container"
        for key in ("cpu", "memory"):
            assert key in each["resources"]["requests"] and key in each["resources"]["limits"]
    context = daemon["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["allowPrivilegeEscalation"] is False
    assert context["readOnlyRootFilesystem"] is True
    assert "privileged" not in context
    env = {item["name"]: item.get("value") for item in daemon["env"]}
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "utility"
    ca_file = env_of(agent).get("CDO_IMEX_AGENT_IMEX_CA_FILE")
    if ca_file is not None:  # the daemon reads the CA config.cfg names (its key: config dir)
        mounts = {m["mountPath"]: m["name"] for m in daemon["volumeMounts"]}
        ca_volume = volumes[mounts[str(Path(ca_file["value"]).parent)]]
        assert ca_volume["secret"]["secretName"] == "cdo-imex-ca"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_daemonsets_run_on_gpu_nodes_through_faults(
    overlays: dict[str, list[Manifest]], overlay: str
) -> None:
    for service in ("imex-agent", "health-monitor"):
        pod = pod_spec(service_workloads(overlays[overlay])[service])
        assert pod["nodeSelector"] == GPU_NODE_SELECTOR
        assert {"key": "cdo.dev/gpu-fault", "operator": "Exists"} in pod["tolerations"]
        assert pod["runtimeClassName"] == "nvidia"
        env = {
            item["name"]: item.get("value")
            for item in container({"spec": {"template": {"spec": pod}}})["env"]
        }
        assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
        assert env["NVIDIA_DRIVER_CAPABILITIES"] == "utility"
        assert "nvidia.com/gpu" not in str(pod["containers"][0]["resources"])


def test_replicas_per_overlay(overlays: dict[str, list[Manifest]]) -> None:
    for overlay, expected, nats in (("dev", 1, 1), ("prod", 2, 3)):
        objs = overlays[overlay]
        for name in ("cdo-domain-controller", "cdo-clique-allocator"):
            deployment = find(objs, "Deployment", name)
            assert deployment["spec"]["replicas"] == expected, (overlay, name)
            env = env_of(deployment)
            prefix = "CDO_" + name.removeprefix("cdo-").upper().replace("-", "_")
            assert env[f"{prefix}_LEASE_NAME"]["value"] == name
            assert f"{prefix}_LEADER_ELECTION_LEASE_DURATION_S" in env
        assert find(objs, "StatefulSet", "cdo-nats")["spec"]["replicas"] == nats
        assert common_env(objs)["CDO_NATS_STREAM_REPLICAS"] == str(nats)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_replicated_workload_has_a_disruption_budget(
    overlays: dict[str, list[Manifest]], overlay: str
) -> None:
    objs = overlays[overlay]
    budgets = [obj for obj in objs if obj["kind"] == "PodDisruptionBudget"]
    for workload in objs:
        if workload["kind"] not in ("Deployment", "StatefulSet"):
            continue
        if workload["metadata"]["name"] == "cdo-jaeger":  # dev tooling, one replica
            continue
        labels = workload["spec"]["template"]["metadata"]["labels"]
        covering = [
            b for b in budgets if b["spec"]["selector"]["matchLabels"].items() <= labels.items()
        ]
        assert len(covering) == 1, workload["metadata"]["name"]
        assert covering[0]["spec"] == {
            "maxUnavailable": 1,
            "selector": covering[0]["spec"]["selector"],
        }


CDO_IMAGE = "registry.example.com/cdo/cdo"
"""The placeholder deploy/ names cdo's image by; docs/install.md tells the user to set theirs."""


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_images_are_set_by_the_images_transformer(
    overlays: dict[str, list[Manifest]], overlay: str
) -> None:
    # One image for every service; the container's first argument picks the service.
    for service, workload in service_workloads(overlays[overlay]).items():
        main = container(workload)
        name, _, tag = main["image"].rpartition(":")
        assert name == CDO_IMAGE
        assert tag and tag != "latest"
        assert main["args"][0] == service
    for workload in workloads(overlays[overlay]):
        image = container(workload)["image"]
        assert ":" in image and not image.endswith(":latest"), image


def registry_of(image: str) -> str | None:
    """The registry host an image reference names, or None for a bare Docker Hub name (whose
    first part is a repository, not a host: no dot, no port, not localhost)."""
    first, slash, _ = image.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return first
    return None


def test_registry_of_tells_a_host_from_a_docker_hub_repository() -> None:
    assert registry_of("registry.example.com/cdo/cdo:0.1.0") == "registry.example.com"
    assert registry_of("localhost:5000/cdo:1") == "localhost:5000"
    assert registry_of("docker.io/library/nats:2.15.1-alpine") == "docker.io"
    assert registry_of("cdo/cdo:0.1.0") is None
    assert registry_of("nats:2.15.1-alpine") is None


def test_every_image_names_its_registry_and_a_release(tmp_path: Path) -> None:
    """Never a bare Docker Hub name: ``cdo/cdo`` would pull whatever docker.io/cdo/cdo is."""
    rendered = render_with(tmp_path / "all", (*COMBINATIONS["all-components"], "monitoring"))
    checked = 0
    for workload in workloads(rendered):
        spec = pod_spec(workload)
        for each in [*spec.get("initContainers", []), *spec["containers"]]:
            image = each["image"]
            assert registry_of(image) is not None, (workload["metadata"]["name"], image)
            reference = image.rpartition("/")[2]
            assert "@sha256:" in reference or (
                ":" in reference and not reference.endswith(":latest")
            ), image
            checked += 1
    assert checked >= 8
    images = {c["image"] for w in workloads(rendered) for c in pod_spec(w)["containers"]}
    assert f"{CDO_IMAGE}:0.1.0" in images
    # docs/install.md says how to replace the placeholder with the user's own image.
    install = (ROOT / "docs" / "install.md").read_text()
    assert f"- name: {CDO_IMAGE}" in install and "newName:" in install


def test_dev_traces_to_jaeger_and_prod_does_not(overlays: dict[str, list[Manifest]]) -> None:
    dev = overlays["dev"]
    endpoint = common_env(dev)["OTEL_EXPORTER_OTLP_ENDPOINT"]
    service = find(dev, "Service", "cdo-jaeger")
    ports = {p["port"] for p in service["spec"]["ports"]}
    assert endpoint == "http://cdo-jaeger:4318" and 4318 in ports
    jaeger = find(dev, "Deployment", "cdo-jaeger")
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in common_env(overlays["prod"])
    # Jaeger v2, the maintained line: one image configured by its YAML, OTLP/HTTP on 4318 and
    # its health on the port the probes ask.
    main = container(jaeger)
    name, _, tag = main["image"].rpartition(":")
    assert name == "docker.io/jaegertracing/jaeger" and tag.startswith("2.")
    config_map = generated(dev, "ConfigMap", "cdo-jaeger-config")
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    assert config["receivers"]["otlp"]["protocols"]["http"]["endpoint"].endswith(":4318")
    health = config["extensions"]["healthcheckv2"]["http"]["endpoint"].rpartition(":")[2]
    named_ports = {p["name"]: p["containerPort"] for p in main["ports"]}
    assert main["livenessProbe"]["httpGet"] == {"path": "/status", "port": "health"}
    assert named_ports["health"] == int(health)
    assert config["service"]["pipelines"]["traces"]["receivers"] == ["otlp"]


def test_prod_turns_tls_on(overlays: dict[str, list[Manifest]]) -> None:
    prod = overlays["prod"]
    env = common_env(prod)
    assert env["CDO_NATS_URL"] == "tls://cdo-nats:4222"
    ca_file = env["CDO_NATS_TLS_CA_FILE"]
    for service, workload in service_workloads(prod).items():
        mounts = {m["mountPath"]: m["name"] for m in container(workload)["volumeMounts"]}
        volumes = {v["name"]: v for v in pod_spec(workload)["volumes"]}
        volume = volumes[mounts[str(Path(ca_file).parent)]]
        assert volume["secret"]["secretName"] == "cdo-nats-tls", service
        assert volume["secret"]["items"] == [{"key": "ca.crt", "path": "ca.crt"}], service
    agent = service_workloads(prod)["imex-agent"]
    agent_env = env_of(agent)
    # IMEX: each node's own certificate from the cdo.dev/imex signer; only the CA is mounted
    # (never a key), and no shared certificate is left.
    assert agent_env["CDO_IMEX_AGENT_IMEX_CERT_SIGNER"]["value"] == "cdo.dev/imex"
    assert "CDO_IMEX_AGENT_IMEX_TLS_DIR" not in agent_env
    ca_dir = str(Path(agent_env["CDO_IMEX_AGENT_IMEX_CA_FILE"]["value"]).parent)
    mounts = {m["mountPath"]: m["name"] for m in container(agent)["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec(agent)["volumes"]}
    assert volumes[mounts[ca_dir]]["secret"] == {
        "secretName": "cdo-imex-ca",
        "items": [{"key": "tls.crt", "path": "ca.crt"}],
    }
    assert agent_env["CDO_IMEX_AGENT_IMEX_TLS_TARGET_OVERRIDE"]["value"] == "cdo-imex"
    assert all(
        v.get("secret", {}).get("secretName") != "cdo-imex-tls"
        for workload in service_workloads(prod).values()
        for v in pod_spec(workload)["volumes"]
    )
    controller_env = env_of(service_workloads(prod)["domain-controller"])
    assert controller_env["CDO_DOMAIN_CONTROLLER_IMEX_SIGNER_ENABLED"]["value"] == "true"
    assert bootstrap_settings(prod)["CDO_BOOTSTRAP_IMEX_CA"] == "true"
    assert bootstrap_settings(overlays["dev"])["CDO_BOOTSTRAP_IMEX_CA"] == "false"
    config = generated(prod, "ConfigMap", "cdo-nats-config")["data"]
    assert "cert_file: /etc/nats-tls/tls.crt" in config["tls.conf"]
    assert "verify: true" in config["cluster-tls.conf"]
    assert bootstrap_settings(prod)["CDO_BOOTSTRAP_TLS_CERTS"] == "true"
    dev_env = common_env(overlays["dev"])
    assert dev_env["CDO_NATS_URL"].startswith("nats://")
    assert "CDO_NATS_TLS_CA_FILE" not in dev_env


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_metrics_annotations_name_the_probe_port(
    overlays: dict[str, list[Manifest]], overlay: str
) -> None:
    for service, workload in service_workloads(overlays[overlay]).items():
        annotations = workload["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true", service
        assert annotations["prometheus.io/path"] == "/metrics", service
        assert annotations["prometheus.io/port"] == env_of(workload)["CDO_HTTP_PORT"]["value"]


def test_the_device_class_is_the_one_the_controller_writes(
    overlays: dict[str, list[Manifest]],
) -> None:
    rendered = find(overlays["prod"], "DeviceClass", "compute-domain-channel.cdo.dev")
    desired = desired_device_class()
    assert rendered["apiVersion"] == desired["apiVersion"]
    assert rendered["spec"] == device_class_spec()
    assert desired["metadata"]["labels"].items() <= rendered["metadata"]["labels"].items()
    decoded = msgspec.convert(rendered, DeviceClass)
    assert not device_class_drifted(decoded)


def test_the_pod_gate_policy_holds_back_exactly_what_the_webhook_gates(
    overlays: dict[str, list[Manifest]],
) -> None:
    """The policy and the webhook name the same gate, namespaces, pods and domain kind."""
    objs = overlays["prod"]
    policy = find(objs, "ValidatingAdmissionPolicy", "cdo-pod-gate")["spec"]
    binding = find(objs, "ValidatingAdmissionPolicyBinding", "cdo-pod-gate")["spec"]
    (hook,) = find(objs, "MutatingWebhookConfiguration", "cdo-clique-allocator")["webhooks"]
    assert hook["failurePolicy"] == "Ignore"
    assert policy["failurePolicy"] == "Ignore"
    assert policy["paramKind"] == {
        "apiVersion": COMPUTE_DOMAINS.api_version,
        "kind": COMPUTE_DOMAINS.kind,
    }
    assert binding == {
        "policyName": "cdo-pod-gate",
        "validationActions": ["Deny"],
        "paramRef": {"selector": {}, "parameterNotFoundAction": "Allow"},
    }
    assert policy["matchConstraints"]["namespaceSelector"] == hook["namespaceSelector"]
    (rule,) = policy["matchConstraints"]["resourceRules"]
    assert rule == POD_CREATE_RULE
    conditions = [{**c, "expression": " ".join(c["expression"].split())} for c in
                  policy["matchConditions"]]  # fmt: skip
    assert (
        conditions
        == hook["matchConditions"]
        == [{"name": "has-template-claims", "expression": MATCH_TEMPLATE_CLAIMS}]
    )
    gated = next(v for v in policy["variables"] if v["name"] == "gated")["expression"]
    assert f"g.name == '{PLACEMENT_GATE}'" in gated
    conflicting = next(v for v in policy["variables"] if v["name"] == "conflicting")
    assert f"c.reason == '{TEMPLATE_CONFLICT}'" in conflicting["expression"]


def test_the_webhook_is_the_one_the_allocator_renders(
    overlays: dict[str, list[Manifest]],
) -> None:
    objs = overlays["prod"]
    rendered = copy.deepcopy(find(objs, "MutatingWebhookConfiguration", "cdo-clique-allocator"))
    service = find(objs, "Service", "cdo-clique-allocator")
    (port,) = service["spec"]["ports"]
    expected = webhook_configuration(
        ca_bundle=b"",
        service=ServiceReference(
            namespace=NAMESPACE, name=service["metadata"]["name"], port=port["port"]
        ),
    )
    for webhook in expected["webhooks"]:
        assert webhook["clientConfig"].pop("caBundle") == base64.b64encode(b"").decode()
    labels = rendered["metadata"].pop("labels")
    assert expected["metadata"].pop("labels").items() <= labels.items()
    assert rendered == expected
    allocator = service_workloads(objs)["clique-allocator"]
    ports = {p["name"]: p["containerPort"] for p in container(allocator)["ports"]}
    assert ports[port["targetPort"]] == WebhookSettings().port
    env = env_of(allocator)
    defaults = WebhookSettings()
    assert env["CDO_CLIQUE_ALLOCATOR_WEBHOOK_CERT_FILE"]["value"] == defaults.cert_file
    assert env["CDO_CLIQUE_ALLOCATOR_WEBHOOK_KEY_FILE"]["value"] == defaults.key_file
    mounts = {m["mountPath"]: m["name"] for m in container(allocator)["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec(allocator)["volumes"]}
    secret = volumes[mounts[str(Path(defaults.cert_file).parent)]]["secret"]
    assert secret["secretName"] == "cdo-clique-allocator-webhook-tls"
    assert expected["webhooks"][0]["clientConfig"]["service"]["path"] == WEBHOOK_PATH


def test_the_channel_allocation_webhook_is_the_rendered_configuration(
    overlays: dict[str, list[Manifest]],
) -> None:
    objs = overlays["prod"]
    rendered = copy.deepcopy(find(objs, "ValidatingWebhookConfiguration", "cdo-clique-allocator"))
    service = find(objs, "Service", "cdo-clique-allocator")
    (port,) = service["spec"]["ports"]
    expected = allocation_webhook_configuration(
        ca_bundle=b"",
        driver=DRIVER_NAME,
        service=ServiceReference(
            namespace=NAMESPACE, name=service["metadata"]["name"], port=port["port"]
        ),
    )
    for webhook in expected["webhooks"]:
        assert webhook["clientConfig"].pop("caBundle") == base64.b64encode(b"").decode()
    labels = rendered["metadata"].pop("labels")
    assert expected["metadata"].pop("labels").items() <= labels.items()
    assert rendered == expected
    assert expected["webhooks"][0]["clientConfig"]["service"]["path"] == ALLOCATION_PATH


def test_the_conversion_webhook_is_the_allocators_service(
    overlays: dict[str, list[Manifest]],
) -> None:
    """The ComputeDomain CRD converts through the Service in front of the allocator's webhook
    port, the same one (and so the same certificate) as the pod webhook."""
    objs = overlays["prod"]
    crd = find(objs, "CustomResourceDefinition", "computedomains.resource.nvidia.com")
    webhook = crd["spec"]["conversion"]["webhook"]
    assert crd["spec"]["conversion"]["strategy"] == "Webhook"
    assert webhook["conversionReviewVersions"] == ["v1"]
    reference = webhook["clientConfig"]["service"]
    service = find(objs, "Service", reference["name"])
    pod_webhook = find(objs, "MutatingWebhookConfiguration", "cdo-clique-allocator")
    assert pod_webhook["webhooks"][0]["clientConfig"]["service"]["name"] == reference["name"]
    assert reference["namespace"] == service["metadata"]["namespace"] == NAMESPACE
    assert [p["port"] for p in service["spec"]["ports"]] == [reference["port"]]
    assert reference["path"] == CONVERSION_PATH
    assert "caBundle" not in webhook["clientConfig"]  # written at install, kept by apply


def test_cert_manager_issues_what_the_pods_mount(tmp_path: Path) -> None:
    objs = render_with(tmp_path / "cm", ("tls", "cert-manager"))
    certificates = {obj["spec"]["secretName"]: obj for obj in objs if obj["kind"] == "Certificate"}
    mounted = {
        volume["secret"]["secretName"]
        for workload in workloads(objs)
        for volume in pod_spec(workload).get("volumes", [])
        if "secret" in volume
    }
    assert mounted <= certificates.keys()
    webhook = find(objs, "MutatingWebhookConfiguration", "cdo-clique-allocator")
    inject = webhook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    namespace, _, name = inject.partition("/")
    assert namespace == NAMESPACE
    assert find(objs, "Certificate", name)["spec"]["secretName"] == (
        "cdo-clique-allocator-webhook-tls"
    )
    settings = bootstrap_settings(objs)
    assert settings["CDO_BOOTSTRAP_CERTIFICATES"] == "false"
    assert settings["CDO_BOOTSTRAP_TLS_CERTS"] == "false"
    # The ComputeDomain CRD's conversion webhook is served by the same server: same CA.
    crd = find(objs, "CustomResourceDefinition", "computedomains.resource.nvidia.com")
    assert crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == inject
