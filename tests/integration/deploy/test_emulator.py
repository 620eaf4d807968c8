"""The overlays apply with the real kubectl to the API emulator, and the bootstrap Job's program
fills in what the pods wait for.

The emulator serves every kind cdo deploys (RBAC, PodDisruptionBudget and NetworkPolicy
included), so each overlay applies whole: server-side dry run, apply, and a re-apply that
changes nothing.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import yaml

from sim.kubeapi import ServerConfig, ServerThread
from tests.integration.deploy.conftest import (
    BOOTSTRAP,
    NAMESPACE,
    OVERLAYS,
    ROOT,
    Manifest,
    bootstrap_settings,
    group_of,
    kubectl,
)

STATEFULSET = ("apps", "StatefulSet")
ALWAYS_PATCHED = frozenset({"poddisruptionbudget.policy", "statefulset.apps"})
"""kubectl reports these "configured" on every re-apply, against a real cluster too: a PDB's
selector has patch strategy ``replace`` (its diff is never empty) and the server fills defaults
into volumeClaimTemplates (an atomic list that then differs from the manifest). The patch it
sends changes nothing, which the resourceVersion check shows."""


class Cluster:
    def __init__(self, kubeconfig: Path, home: Path) -> None:
        self.kubeconfig = kubeconfig
        self.home = home

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "HOME": str(self.home)}
        result = subprocess.run(
            [kubectl(), "--cache-dir", str(self.home / "cache"), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        if check:
            assert result.returncode == 0, f"kubectl {' '.join(args)}:\n{result.stderr}"
        return result

    def apply(self, path: Path, *extra: str) -> list[str]:
        return self.kubectl("apply", "-f", str(path), *extra).stdout.splitlines()

    def resource_version(self) -> str:
        """The server's current resourceVersion (a list's resourceVersion)."""
        listed = json.loads(self.kubectl("get", "--raw", "/api/v1/namespaces").stdout)
        version: str = listed["metadata"]["resourceVersion"]
        return version

    def served(self) -> set[tuple[str, str]]:
        listing = self.kubectl("api-resources", "--no-headers", "-o", "wide").stdout
        kinds: set[tuple[str, str]] = set()
        for line in listing.splitlines():
            fields = line.split()
            api_version = next(f for f in fields if "/" in f or f == "v1")
            kind = fields[fields.index(api_version) + 2]
            kinds.add((api_version.rpartition("/")[0], kind))
        return kinds

    def run_bootstrap(self, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(BOOTSTRAP)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=ROOT,
            env={
                **os.environ,
                "CDO_BOOTSTRAP_NAMESPACE": NAMESPACE,
                "CDO_BOOTSTRAP_KUBECONFIG": str(self.kubeconfig),
                **env,
            },
        )


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with ServerThread(
        config=ServerConfig(bookmark_interval_s=0.5), kubeconfig=tmp_path / "kubeconfig"
    ) as server:
        assert server.server is not None
        yield Cluster(Path(server.server.kubeconfig), tmp_path)


def write(path: Path, objs: Sequence[Manifest]) -> Path:
    path.write_text(yaml.safe_dump_all(list(objs), sort_keys=False))
    return path


def kind_of(obj: Manifest) -> tuple[str, str]:
    return group_of(obj), obj["kind"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_applies_to_the_emulator(
    cluster: Cluster, overlays: dict[str, list[Manifest]], overlay: str, tmp_path: Path
) -> None:
    objs = overlays[overlay]
    served = cluster.served()
    assert {kind_of(obj) for obj in objs} <= served
    first = [obj for obj in objs if obj["kind"] in ("Namespace", "CustomResourceDefinition")]
    rest = [obj for obj in objs if obj not in first]
    assert len(first) + len(rest) == len(objs)
    cluster.apply(write(tmp_path / "first.yaml", first))
    dry = cluster.apply(write(tmp_path / "rest.yaml", rest), "--dry-run=server")
    assert len(dry) == len(rest)
    assert all(line.endswith("created (server dry run)") for line in dry), dry
    created = cluster.apply(tmp_path / "rest.yaml")
    assert all(line.endswith(" created") for line in created), created
    before = cluster.resource_version()
    again = cluster.apply(tmp_path / "rest.yaml")
    assert cluster.resource_version() == before  # the re-apply changed nothing
    assert len(again) == len(rest)
    changed = [line for line in again if not line.endswith(" unchanged")]
    assert all(line.split("/", 1)[0] in ALWAYS_PATCHED for line in changed), changed
    for obj in rest:
        args = ["get", obj["kind"].lower(), obj["metadata"]["name"], "-o", "name"]
        if "namespace" in obj["metadata"]:
            args += ["-n", obj["metadata"]["namespace"]]
        cluster.kubectl(*args)


def test_the_nats_statefulset_applies(
    cluster: Cluster, overlays: dict[str, list[Manifest]], tmp_path: Path
) -> None:
    objs = overlays["dev"]
    cluster.apply(write(tmp_path / "ns.yaml", [o for o in objs if o["kind"] == "Namespace"]))
    statefulsets = [obj for obj in objs if kind_of(obj) == STATEFULSET]
    assert statefulsets
    claims = {
        c["metadata"]["name"] for s in statefulsets for c in s["spec"]["volumeClaimTemplates"]
    }
    mounts = {
        m["name"]
        for s in statefulsets
        for c in s["spec"]["template"]["spec"]["containers"]
        for m in c.get("volumeMounts", [])
    }
    assert claims & mounts  # containers mount a claim template, not a template volume
    created = cluster.apply(write(tmp_path / "sts.yaml", statefulsets))
    assert all(line.endswith(" created") for line in created), created
    before = cluster.resource_version()
    cluster.apply(tmp_path / "sts.yaml")
    assert cluster.resource_version() == before


def webhook_bundles(cluster: Cluster) -> list[str]:
    """The caBundles of the allocator's webhooks: the pod webhook's, then the channel
    allocation webhook's."""
    found: list[str] = []
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        out = cluster.kubectl(
            "get",
            kind,
            "cdo-clique-allocator",
            "-o",
            "jsonpath={.webhooks[*].clientConfig.caBundle}",
        ).stdout
        found += out.split()
    return found


def conversion_bundle(cluster: Cluster) -> str:
    return cluster.kubectl(
        "get",
        "crd",
        "computedomains.resource.nvidia.com",
        "-o",
        "jsonpath={.spec.conversion.webhook.clientConfig.caBundle}",
    ).stdout


def test_bootstrap_fills_in_what_the_pods_wait_for(
    cluster: Cluster, overlays: dict[str, list[Manifest]], tmp_path: Path
) -> None:
    objs = [obj for obj in overlays["prod"] if kind_of(obj) in cluster.served()]
    kinds = (
        "Namespace",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "CustomResourceDefinition",
    )
    keep = [o for o in objs if o["kind"] in kinds]
    cluster.apply(write(tmp_path / "objs.yaml", keep))
    assert webhook_bundles(cluster) == []
    assert conversion_bundle(cluster) == ""

    flags = bootstrap_settings(overlays["prod"])
    assert flags["CDO_BOOTSTRAP_TLS_CERTS"] == "true"
    assert flags["CDO_BOOTSTRAP_NATS_AUTH_CALLOUT"] == "true"
    result = cluster.run_bootstrap(**flags)
    assert result.returncode == 0, result.stderr
    secrets = cluster.kubectl("get", "secrets", "-n", NAMESPACE, "-o", "json").stdout
    by_name = {s["metadata"]["name"]: s for s in yaml.safe_load(secrets)["items"]}
    assert set(by_name) == {
        "cdo-nats-users",
        "cdo-ca",
        "cdo-clique-allocator-webhook-tls",
        "cdo-nats-tls",
        "cdo-imex-ca",
        "cdo-nats-auth-issuer",
    }
    static = [
        "nats-bootstrap",
        "domain-controller",
        "clique-allocator",
        "imex-agent",
        "health-monitor",
        "reader",
    ]
    assert sorted(by_name["cdo-nats-users"]["data"]) == sorted([*static, "nats-auth"])
    assert sorted(by_name["cdo-nats-auth-issuer"]["data"]) == ["public", "seed"]
    for name in ("cdo-clique-allocator-webhook-tls", "cdo-nats-tls"):
        assert by_name[name]["type"] == "kubernetes.io/tls"
        assert sorted(by_name[name]["data"]) == ["ca.crt", "tls.crt", "tls.key"]
    # The IMEX CA is a CA of its own: the nodes' IMEX certificates chain to nothing else.
    assert sorted(by_name["cdo-imex-ca"]["data"]) == ["tls.crt", "tls.key"]
    assert by_name["cdo-imex-ca"]["data"]["tls.crt"] != by_name["cdo-ca"]["data"]["tls.crt"]
    ca = by_name["cdo-ca"]["data"]["tls.crt"]
    assert webhook_bundles(cluster) == [ca, ca]
    assert conversion_bundle(cluster) == ca

    # Every secret the rendered pods mount or read is one the program made.
    wanted = {
        ref
        for workload in overlays["prod"]
        if workload["kind"] in ("Deployment", "DaemonSet", "StatefulSet")
        for ref in secret_references(workload)
    }
    assert wanted <= set(by_name)

    # A second run changes nothing; re-applying the manifests keeps the injected bundle.
    versions = {name: s["metadata"]["resourceVersion"] for name, s in by_name.items()}
    again = cluster.run_bootstrap(**flags)
    assert again.returncode == 0, again.stderr
    secrets = cluster.kubectl("get", "secrets", "-n", NAMESPACE, "-o", "json").stdout
    after = {
        s["metadata"]["name"]: s["metadata"]["resourceVersion"]
        for s in yaml.safe_load(secrets)["items"]
    }
    assert after == versions
    cluster.apply(tmp_path / "objs.yaml")
    assert webhook_bundles(cluster) == [ca, ca]
    assert conversion_bundle(cluster) == ca
    assert base64.b64decode(ca).startswith(b"-----BEGIN CERTIFICATE-----")


def secret_references(workload: Manifest) -> set[str]:
    spec = workload["spec"]["template"]["spec"]
    names = {v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v}
    for item in spec["containers"][0].get("env", []):
        ref = item.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            names.add(ref["name"])
    return names


def test_bootstrap_without_the_webhook_fails_clearly(cluster: Cluster) -> None:
    cluster.kubectl("create", "namespace", NAMESPACE)
    result = cluster.run_bootstrap()
    assert result.returncode == 2
    assert "MutatingWebhookConfiguration cdo-clique-allocator not found" in result.stderr
