"""``cdo`` finds its cluster as kubectl does, checked against real kubectl on the same files.

Two API emulators over HTTPS, A and B, each with a namespace and a node of its own, so that
``kubectl get ns`` and ``cdo top cliques`` (computed from the nodes when NATS does not answer)
tell which one a command reached. The kubeconfig files live in a temporary HOME; the second
one sits in a subdirectory and names its CA by a relative path, which both must take from that
file's directory.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from cli.connection import context_namespace, find_cluster
from shared.kube.client import KubeClient
from shared.kube.kubeconfig import ClusterSource
from shared.kube.resources import NAMESPACES
from sim.kubeapi import KubeServer, ServerConfig, serve
from sim.natsserver import free_port
from tests.integration.cli import objects
from tests.integration.cli.conftest import Result, acdo

KUBECTL = Path(sys.executable).parent / "kubectl"
CLIQUE_A = objects.A
CLIQUE_B = objects.B


@dataclass(frozen=True)
class Clusters:
    a: KubeServer
    b: KubeServer
    home: Path
    first: Path
    """~/first.yaml: cluster ``only-a`` and ``shared`` (both A), context ``ctx-a``; no
    current-context."""
    second: Path
    """~/conf/second.yaml: cluster ``shared`` (B!) and ``only-b``, contexts ``ctx-b`` and
    ``ctx-shared`` (namespace team-b); current-context ``ctx-shared``; CA by relative path."""


def _cluster(name: str, server: KubeServer, ca: str) -> dict[str, Any]:
    return {"name": name, "cluster": {"server": server.url, "certificate-authority": ca}}


def _context(name: str, cluster: str, namespace: str = "") -> dict[str, Any]:
    body = {"cluster": cluster, "user": "admin"}
    if namespace:
        body["namespace"] = namespace
    return {"name": name, "context": body}


def _write(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", **document}))
    return path


async def _mark(server: KubeServer, namespace: str, clique: str) -> None:
    client = await KubeClient.connect(kubeconfig=server.kubeconfig)
    try:
        await objects.namespace(client, namespace)
        await objects.node(client, f"node-{namespace}", clique)
    finally:
        await client.close()


@pytest.fixture
async def clusters(tmp_path: Path) -> AsyncIterator[Clusters]:
    config = ServerConfig(tls=True)
    async with (
        serve(config=config, kubeconfig=tmp_path / "a.kubeconfig") as a,
        serve(config=config, kubeconfig=tmp_path / "b.kubeconfig") as b,
    ):
        await _mark(a, "team-a", CLIQUE_A)
        await _mark(b, "team-b", CLIQUE_B)
        home = tmp_path / "home"
        assert a.ca_pem is not None and b.ca_pem is not None
        (home / "conf").mkdir(parents=True)
        (home / "a-ca.crt").write_bytes(a.ca_pem)
        (home / "conf" / "b-ca.crt").write_bytes(b.ca_pem)
        token = yaml.safe_load(a.kubeconfig.read_text())["users"][0]["user"]["token"]
        users = [{"name": "admin", "user": {"token": token}}]
        first = _write(
            home / "first.yaml",
            {
                "clusters": [
                    _cluster("only-a", a, str(home / "a-ca.crt")),
                    _cluster("shared", a, str(home / "a-ca.crt")),
                ],
                "users": users,
                "contexts": [_context("ctx-a", "only-a", "team-a")],
            },
        )
        second = _write(
            home / "conf" / "second.yaml",
            {
                "clusters": [_cluster("shared", b, "b-ca.crt"), _cluster("only-b", b, "b-ca.crt")],
                "users": users,
                "contexts": [
                    _context("ctx-b", "only-b"),
                    _context("ctx-shared", "shared", "team-b"),
                ],
                "current-context": "ctx-shared",
            },
        )
        yield Clusters(a=a, b=b, home=home, first=first, second=second)


def _environment(clusters: Clusters, kubeconfig: list[Path] | None) -> dict[str, str]:
    env = {"HOME": str(clusters.home)}
    if kubeconfig is not None:
        env["KUBECONFIG"] = os.pathsep.join(str(path) for path in kubeconfig)
    return env


async def kubectl(env: dict[str, str], *args: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "HOME")}
    process = await asyncio.create_subprocess_exec(
        str(KUBECTL),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**clean, **env},
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode().strip()


async def cdo_cliques(env: dict[str, str], *args: str) -> set[str]:
    """The cliques ``cdo top cliques`` shows (from the nodes: NATS does not answer)."""
    nats = f"nats://127.0.0.1:{free_port()}"
    result: Result = await acdo(
        "top", "cliques", "-o", "json", "--nats-url", nats, *args,
        env={**env, "CDO_SIM_STATE_DIR": ""},
    )  # fmt: skip
    assert result.code == 0, result.stderr
    return {row["clique"] for row in json.loads(result.stdout)["cliques"]}


async def kubectl_namespaces(env: dict[str, str], *args: str) -> set[str]:
    names = await kubectl(env, "get", "ns", "-o", "name", *args)
    return {name.removeprefix("namespace/") for name in names.split()} & {"team-a", "team-b"}


async def test_home_kubeconfig_alone_is_found_as_kubectl_finds_it(clusters: Clusters) -> None:
    (clusters.home / ".kube").mkdir()
    (clusters.home / ".kube" / "config").write_text(clusters.second.read_text().replace(
        "b-ca.crt", str(clusters.home / "conf" / "b-ca.crt")
    ))  # fmt: skip
    env = _environment(clusters, kubeconfig=None)
    assert await kubectl(env, "config", "current-context") == "ctx-shared"
    assert await kubectl_namespaces(env) == {"team-b"}
    assert await cdo_cliques(env) == {CLIQUE_B}
    # The case that exited 3 "no cluster to ask": cdo status with only ~/.kube/config. It still
    # exits 3 for the NATS that does not answer, and shows the API's part.
    status = await acdo("status", "-o", "json", "--nats-url", f"nats://127.0.0.1:{free_port()}",
                        env={**env, "CDO_SIM_STATE_DIR": ""})  # fmt: skip
    assert "no cluster to ask" not in status.stderr and "NATS at" in status.stderr
    report = json.loads(status.stdout)
    assert report["kubernetes_reachable"] is True
    assert [row["clique"] for row in report["nodes"]] == [CLIQUE_B]


async def test_a_kubeconfig_list_merges_as_kubectl_merges_it(clusters: Clusters) -> None:
    env = _environment(clusters, kubeconfig=[clusters.first, clusters.second])
    # current-context from the first file that sets one (the second); cluster "shared" from
    # the first file that names it (A), though the second's context points at it.
    assert await kubectl(env, "config", "current-context") == "ctx-shared"
    assert await kubectl_namespaces(env) == {"team-a"}
    assert await cdo_cliques(env) == {CLIQUE_A}
    # --context picks another context of the merged files, for both.
    assert await kubectl_namespaces(env, "--context", "ctx-b") == {"team-b"}
    assert await cdo_cliques(env, "--context", "ctx-b") == {CLIQUE_B}
    # --kubeconfig reads that one file alone, KUBECONFIG or not.
    alone = ["--kubeconfig", str(clusters.second)]
    assert await kubectl_namespaces(env, *alone) == {"team-b"}
    assert await cdo_cliques(env, *alone) == {CLIQUE_B}


async def test_the_context_namespace_is_kubectls(clusters: Clusters) -> None:
    env = _environment(clusters, kubeconfig=[clusters.first, clusters.second])
    assert await kubectl(env, "config", "view", "--minify", "-o",
                         "jsonpath={.contexts[0].context.namespace}") == "team-b"  # fmt: skip
    found, problem = find_cluster(
        state_dir=clusters.home, explicit_state_dir=False, kubeconfig_file=None, context=None,
        environ=env,
    )  # fmt: skip
    assert problem == "" and found is not None
    assert found.files == (clusters.first, clusters.second)
    assert context_namespace(found) == "team-b"
    chosen = ClusterSource(found.files, found.origin, "ctx-a")
    assert context_namespace(chosen) == "team-a"


async def test_in_a_pod_the_service_account_is_used(clusters: Clusters, tmp_path: Path) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    assert clusters.a.ca_pem is not None
    (account / "ca.crt").write_bytes(clusters.a.ca_pem)
    (account / "token").write_text("any")
    (account / "namespace").write_text("team-a")
    host, port = clusters.a.url.removeprefix("https://").rsplit(":", 1)
    env = {"HOME": str(clusters.home), "KUBERNETES_SERVICE_HOST": host,
           "KUBERNETES_SERVICE_PORT": port}  # fmt: skip
    found, problem = find_cluster(
        state_dir=tmp_path, explicit_state_dir=False, kubeconfig_file=None, context=None,
        environ=env, service_account_dir=account,
    )  # fmt: skip
    assert problem == "" and found is not None and found.in_cluster
    assert context_namespace(found) == "team-a"
    client = await KubeClient.connect_to(found)
    try:
        listed = json.loads(await client.list(NAMESPACES))
    finally:
        await client.close()
    assert "team-a" in {item["metadata"]["name"] for item in listed["items"]}
