"""The nats-auth-callout component as rendered: its auth.conf on a real nats-server, and the
authenticator run as its Deployment runs it (``python -m services.nats_auth`` with the
rendered environment), with its own ServiceAccount token for the API."""

from __future__ import annotations

import contextlib
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from nats.aio.client import Client

from services.nats_auth.nkeyjwt import ACCOUNT, Signer, new_seed
from shared.events import subjects as s
from sim.kubeapi.hosting.kubeconfig import kubeconfig
from sim.natsserver import NatsServer, free_port
from tests.integration.deploy.conftest import (
    Manifest,
    bootstrap_settings,
    find,
    generated,
    render_with,
    service_workloads,
)
from tests.integration.nats_auth.conftest import (
    AUTHENTICATOR,
    CALLOUT_PASSWORD,
    NAMESPACE,
    NODE_A,
    NODE_B,
    Cluster,
)
from tests.support.processes import ProgramProcess
from tests.support.wait import wait_for

COMPONENT = "nats-auth-callout"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[Manifest]:
    return render_with(tmp_path_factory.mktemp("render"), (COMPONENT,))


def environment(deployment: Manifest, values: dict[str, str]) -> dict[str, str]:
    """The container's env: literal values as rendered, the others (from the downward API
    and Secrets) from ``values``; every one of those must be given."""
    env: dict[str, str] = {}
    for item in deployment["spec"]["template"]["spec"]["containers"][0]["env"]:
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            env[item["name"]] = values.pop(item["name"])
    assert not values, f"not in the Deployment: {sorted(values)}"
    return env


@contextlib.contextmanager
def running(program: ProgramProcess) -> Iterator[ProgramProcess]:
    program.start()
    try:
        yield program
    finally:
        program.stop()


def ready(port: int, program: ProgramProcess) -> bool:
    assert program.returncode is None, program.stderr_text()[-3000:]
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


class Violations:
    def __init__(self) -> None:
        self.errors: list[str] = []

    async def on_error(self, exc: Exception) -> None:
        self.errors.append(str(exc).lower())


async def test_the_rendered_authenticator_scopes_a_node(
    cluster: Cluster, rendered: list[Manifest], tmp_path: Path
) -> None:
    config = tmp_path / "config"
    config.mkdir()
    for name, text in generated(rendered, "ConfigMap", "cdo-nats-config")["data"].items():
        # The store is the test server's (given on its command line).
        (config / name).write_text(text.replace("store_dir: /data/jetstream", ""))
    seed = new_seed(ACCOUNT)
    (tmp_path / "seed").write_text(seed)
    issuer = Signer.from_seed(seed).public_key
    server = NatsServer(
        store_dir=tmp_path / "nats",
        config=config / "nats.conf",
        environ={
            "POD_NAME": "cdo-nats-0",
            "NATS_AUTH_ISSUER": issuer,
            "NATS_PASSWORD_NATS_AUTH": CALLOUT_PASSWORD,
        },
    )
    # The authenticator's API access: its own ServiceAccount's token, as in its pod.
    token = await cluster.token(
        AUTHENTICATOR, audience=cluster.kube.api.config.service_account_issuer
    )
    api = kubeconfig(cluster.kube.url, ca_pem=cluster.kube.ca_pem)
    api["users"][0]["user"] = {"token": token}
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(api))
    deployment = find(rendered, "Deployment", "cdo-nats-auth")
    port = free_port()
    env = environment(
        deployment,
        {
            "CDO_INSTANCE": "cdo-nats-auth-0",
            "CDO_NATS_PASSWORD": CALLOUT_PASSWORD,
            "CDO_NATS_AUTH_NAMESPACE": NAMESPACE,
        },
    )
    assert env["CDO_NATS_AUTH_ISSUER_SEED_FILE"] == "/etc/cdo/nats-auth/seed"
    env.update(
        CDO_NATS_AUTH_ISSUER_SEED_FILE=str(tmp_path / "seed"),
        CDO_NATS_AUTH_KUBECONFIG=str(tmp_path / "kubeconfig"),
        CDO_HTTP_PORT=str(port),
        CDO_HTTP_HOST="127.0.0.1",
    )
    server.start()
    env["CDO_NATS_URL"] = server.url
    program = ProgramProcess("services.nats_auth", env=env, workdir=tmp_path)
    try:
        with running(program):
            await wait_for(lambda: ready(port, program), timeout=20, what="authenticator ready")
            violations = Violations()
            client = Client()
            await client.connect(
                server.url,
                token=await cluster.token("cdo-health-monitor", node=NODE_A),
                error_cb=violations.on_error,
                max_reconnect_attempts=1,
            )
            try:
                await client.publish(s.NODE_FAULT.render(node=NODE_B), b"{}")
                await client.publish(s.NODE_FAULT.render(node=NODE_A), b"{}")
                await client.flush()
                denied = f'"{s.NODE_FAULT.render(node=NODE_B).lower()}"'
                await wait_for(
                    lambda: any(denied in error for error in violations.errors), what="denial"
                )
                assert len(violations.errors) == 1
            finally:
                await client.close()
    finally:
        server.stop()


def test_every_service_gets_a_nats_token_and_no_password(rendered: list[Manifest]) -> None:
    for service, workload in service_workloads(rendered).items():
        pod = workload["spec"]["template"]["spec"]
        main = pod["containers"][0]
        env = {item["name"]: item for item in main["env"]}
        assert "CDO_NATS_USER" not in env and "CDO_NATS_PASSWORD" not in env, service
        volume = next(v for v in pod["volumes"] if v["name"] == "nats-token")
        source = volume["projected"]["sources"][0]["serviceAccountToken"]
        assert source["audience"] == "nats", service
        mount = next(m for m in main["volumeMounts"] if m["name"] == "nats-token")
        assert env["CDO_NATS_TOKEN_FILE"]["value"] == f"{mount['mountPath']}/{source['path']}"
        assert pod["serviceAccountName"] == f"cdo-{service}"


def test_the_authenticator_may_only_review_tokens(rendered: list[Manifest]) -> None:
    role = find(rendered, "ClusterRole", "cdo-nats-auth")
    assert role["rules"] == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}
    ]
    binding = find(rendered, "ClusterRoleBinding", "cdo-nats-auth")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "cdo-nats-auth", "namespace": NAMESPACE}
    ]
    deployment = find(rendered, "Deployment", "cdo-nats-auth")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "cdo-nats-auth"
    # The bootstrap Job makes (and may read) the issuer key.
    bootstrap_role = find(rendered, "Role", "cdo-bootstrap")
    assert "cdo-nats-auth-issuer" in bootstrap_role["rules"][1]["resourceNames"]
    assert bootstrap_settings(rendered)["CDO_BOOTSTRAP_NATS_AUTH_CALLOUT"] == "true"
