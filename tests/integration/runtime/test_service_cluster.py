"""A service process finds its API server as client-go controllers do (KUBECONFIG with several
files, ~/.kube/config), and one that needs DRA ends with exit code 2 on a server without it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.crds import install_crds
from shared.kube.apis import REQUIRED_APIS, missing_required_message
from shared.kube.client import KubeClient
from shared.kube.resources import NAMESPACES
from sim.kubeapi import ApiServer, ServerThread
from sim.natsserver import free_port
from tests.integration.cli.conftest import dead_kubeconfig
from tests.integration.runtime.test_service_lifecycle import http_get
from tests.support.processes import ProgramProcess
from tests.support.wait import wait_for_sync

DRA_SERVICES = {
    "services.domain_controller": "CDO_DOMAIN_CONTROLLER_",
    "services.clique_allocator": "CDO_CLIQUE_ALLOCATOR_",
    "services.imex_agent": "CDO_IMEX_AGENT_",
}
NODE_SETTINGS = {"CDO_IMEX_AGENT_NODE_NAME": "node-a", "CDO_IMEX_AGENT_ADDRESS": "127.0.0.1"}


@pytest.fixture
def emulator() -> Iterator[ServerThread]:
    with ServerThread() as server:
        yield server


async def _install(kubeconfig: Path) -> None:
    client = await KubeClient.connect(kubeconfig=kubeconfig)
    try:
        await install_crds(client)
        await client.create(
            NAMESPACES,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "cdo-system"}},
        )
    finally:
        await client.close()


def install(kubeconfig: Path) -> None:
    """What the domain controller needs to become ready: cdo's CRDs and its namespace."""
    asyncio.run(_install(kubeconfig))


def environment(tmp_path: Path, service_env: dict[str, str], **extra: str) -> dict[str, str]:
    """The service's environment: nothing of the test's own cluster settings, HOME in tmp."""
    blank = {
        name: ""
        for name in os.environ
        if name.startswith(("CDO_", "KUBERNETES_")) or name == "KUBECONFIG"
    }
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {**blank, **service_env, **NODE_SETTINGS, "HOME": str(home), **extra}


def ready(port: int) -> bool:
    return http_get(port, "/readyz")[0] == 200


@pytest.mark.parametrize("module", DRA_SERVICES)
def test_a_server_without_dra_ends_the_service_with_exit_2(
    module: str, emulator: ServerThread, tmp_path: Path, service_env: dict[str, str]
) -> None:
    def without_dra(api: ApiServer) -> None:
        for r in REQUIRED_APIS:
            api.registry.remove(r.group, r.version, r.plural)

    emulator.call(without_dra)
    env = environment(
        tmp_path, service_env, **{f"{DRA_SERVICES[module]}KUBECONFIG": str(emulator.kubeconfig)}
    )
    service = ProgramProcess(module, env=env, workdir=tmp_path).start()
    try:
        assert service.wait(timeout=60) == 2
    finally:
        service.stop()
    message = missing_required_message(list(REQUIRED_APIS))
    assert "cdo needs DRA's resource.k8s.io/v1, served from Kubernetes 1.34 on" in message
    errors = [r for r in service.log_records() if r["level"] == "error"]
    assert errors and errors[0]["message"] == message
    assert errors[0]["missing"] == [resource.plural for resource in REQUIRED_APIS]


def becomes_ready(env: dict[str, str], tmp_path: Path, name: str) -> None:
    """Start the domain controller with ``env``; it must become ready (it found the cluster)."""
    port = int(env["CDO_HTTP_PORT"])
    service = ProgramProcess("services.domain_controller", env=env, workdir=tmp_path, name=name)
    service.start()
    try:
        wait_for_sync(lambda: ready(port) or service.returncode is not None, timeout=60,
                      what=f"ready through {name}")  # fmt: skip
        assert service.returncode is None, service.stderr_text()[-2000:]
    finally:
        service.stop()


def test_a_service_finds_its_cluster_in_kubeconfig_and_in_home(
    emulator: ServerThread, tmp_path: Path, service_env: dict[str, str]
) -> None:
    install(emulator.kubeconfig)
    listed = os.pathsep.join([str(tmp_path / "not-there"), str(emulator.kubeconfig)])
    becomes_ready(environment(tmp_path, service_env, KUBECONFIG=listed), tmp_path, "KUBECONFIG")
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_bytes(emulator.kubeconfig.read_bytes())
    becomes_ready(environment(tmp_path, service_env), tmp_path, "home")


def test_a_server_that_does_not_answer_yet_is_waited_for_unready(
    tmp_path: Path, service_env: dict[str, str]
) -> None:
    port = free_port()
    kubeconfig = dead_kubeconfig(tmp_path / "kubeconfig", port)
    env = environment(tmp_path, service_env, CDO_DOMAIN_CONTROLLER_KUBECONFIG=str(kubeconfig))
    probe_port = int(env["CDO_HTTP_PORT"])
    service = ProgramProcess("services.domain_controller", env=env, workdir=tmp_path).start()
    try:
        status, _body = wait_for_sync(
            lambda: (lambda r: r if "dra served" in r[1] else None)(
                http_get(probe_port, "/readyz")
            ),
            timeout=60,
            what="unready while discovery does not answer",
        )
        assert status == 503 and service.returncode is None
        with ServerThread(port=port) as server:
            install(server.kubeconfig)
            wait_for_sync(lambda: ready(probe_port) or service.returncode is not None,
                          timeout=60, what="ready once the server answers")  # fmt: skip
            assert service.returncode is None, service.stderr_text()[-2000:]
    finally:
        service.stop()
