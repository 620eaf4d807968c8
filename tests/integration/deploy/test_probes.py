"""Every container deploy/ runs says whether it is well: a readiness or liveness probe on every
long-running container, a deadline on every batch one (docs/deploy.md, "What runs")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.imex_agent.launcher import load
from services.imex_agent.launchprotocol import SOCKET_VARIABLE
from tests.integration.deploy.conftest import (
    COMPONENTS,
    OVERLAYS,
    Manifest,
    find,
    render_with,
)

LONG_RUNNING = ("Deployment", "DaemonSet", "StatefulSet")
BATCH = ("Job", "CronJob")
PROBES = ("readinessProbe", "livenessProbe")
HANDLERS = ("httpGet", "tcpSocket", "exec", "grpc")


def pod_and_deadline(obj: Manifest) -> tuple[dict[str, Any], int | None]:
    """The pod spec of a workload, and the Job deadline of a batch one."""
    if obj["kind"] == "CronJob":
        job = obj["spec"]["jobTemplate"]["spec"]
        return job["template"]["spec"], job.get("activeDeadlineSeconds")
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec, obj["spec"].get("activeDeadlineSeconds")


def check_every_container(objs: list[Manifest]) -> int:
    checked = 0
    for obj in objs:
        if obj["kind"] not in LONG_RUNNING + BATCH:
            continue
        pod, deadline = pod_and_deadline(obj)
        assert "initContainers" not in pod, obj["metadata"]["name"]
        for container in pod["containers"]:
            where = f"{obj['kind']} {obj['metadata']['name']} container {container['name']}"
            if obj["kind"] in BATCH:
                # A run to completion: a hung run is ended by its deadline and retried.
                assert isinstance(deadline, int) and 0 < deadline <= 3600, where
            else:
                probes = [container[key] for key in PROBES if key in container]
                assert probes, f"{where} has no readiness or liveness probe"
                for probe in probes:
                    assert [key for key in HANDLERS if key in probe], where
            checked += 1
    return checked


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_of_each_overlay_has_a_probe(
    overlays: dict[str, list[Manifest]], overlay: str
) -> None:
    assert check_every_container(overlays[overlay]) >= 8


def test_every_container_of_every_component_has_a_probe(tmp_path: Path) -> None:
    assert check_every_container(render_with(tmp_path / "all", COMPONENTS)) >= 10


def test_the_imex_daemon_container_is_ready_while_its_launcher_answers(
    overlays: dict[str, list[Manifest]],
) -> None:
    agent = find(overlays["prod"], "DaemonSet", "cdo-imex-agent")
    (daemon,) = [
        c for c in agent["spec"]["template"]["spec"]["containers"] if c["name"] == "imex-daemon"
    ]
    probe = daemon["readinessProbe"]
    # The command tests/integration/imex_agent/test_adopt.py runs against a real launcher.
    assert probe["exec"]["command"] == ["python", "-m", "services.imex_agent.launchprobe"]
    # Never a liveness probe: restarting this container would restart the node's nvidia-imex.
    assert "livenessProbe" not in daemon and "startupProbe" not in daemon
    # The probe reads the variable the launcher reads its socket from, set in the container.
    env = {item["name"]: item.get("value") for item in daemon["env"]}
    launcher = load(env)
    assert launcher.launcher_socket == env[SOCKET_VARIABLE]
    assert launcher.launcher_socket.startswith(str(launcher.directory))
    # The probe's own 3 s wait for an answer fits in the kubelet's timeout.
    assert probe["timeoutSeconds"] > 3
