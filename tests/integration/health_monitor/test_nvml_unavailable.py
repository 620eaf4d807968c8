"""NVML that cannot be read: reported on the Node and in readiness, retried, never a crash."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import msgspec
import pytest

from shared.crds.names import CLIQUE_LABEL, GPU_HEALTHY_CONDITION
from shared.kube.client import KubeClient
from shared.kube.models import Node
from shared.kube.resources import NODES
from shared.runtime import Readiness
from shared.runtime.http import ProbeServer
from sim.kubeapi import KubeServer
from sim.nvml import SimulatedNvml
from sim.topology import Cluster
from tests.integration.health_monitor.harness import Harness, MonitorFactory, create_node
from tests.support.processes import ProgramProcess
from tests.support.wait import wait_for


class Ready(msgspec.Struct):
    ready: bool
    failing: list[str]


async def readyz(port: int) -> tuple[int, Ready]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/readyz") as response,
    ):
        return response.status, msgspec.json.decode(await response.read(), type=Ready)


@contextlib.asynccontextmanager
async def probes(h: Harness) -> AsyncIterator[int]:
    """The service's probe server with the check its composition root registers."""
    readiness = Readiness()
    readiness.add("nvml", lambda: h.monitor.nvml_available)
    server = ProbeServer(readiness=readiness, metrics=h.metrics, host="127.0.0.1", port=0)
    await server.start()
    assert server.bound_port is not None
    try:
        yield server.bound_port
    finally:
        await server.stop()


async def reason(h: Harness) -> str:
    condition = await h.condition()
    return condition.reason if condition is not None else ""


async def test_nvml_unavailable_at_start_is_reported_and_retried(
    start_monitor: MonitorFactory, cluster: Cluster
) -> None:
    sim = SimulatedNvml(cluster.nodes[0])
    sim.set_unavailable()
    async with start_monitor(sim=sim) as h, probes(h) as port:

        async def unknown() -> bool:
            return await reason(h) == "NvmlUnavailable"

        await wait_for(unknown, what="condition NvmlUnavailable")
        condition = await h.condition()
        assert condition is not None
        assert condition.status == "Unknown"
        assert "Driver Not Loaded" in condition.message
        taint = await wait_for(h.fault_taint, what="the fault taint")
        assert (taint.effect, taint.value) == ("NoSchedule", "warning")  # no eviction on a guess
        status, body = await readyz(port)
        assert (status, body.failing) == (503, ["nvml"])
        (fault,) = await wait_for(h.faults, what="a NodeFault")
        assert (fault.signal, fault.severity) == ("nvml", "warning")
        assert h.metric("cdo_health_nvml_available") == 0
        assert h.running

        sim.set_available()
        await h.settled()
        await wait_for(h.recoveries, what="NodeRecovered", timeout=10)
        assert await h.fault_taint() is None
        status, body = await readyz(port)
        assert (status, body.ready) == (200, True)
        assert h.running


async def test_nvml_lost_while_running_keeps_the_clique_label(
    start_monitor: MonitorFactory,
) -> None:
    async with start_monitor() as h, probes(h) as port:
        await h.settled()
        assert (await readyz(port))[0] == 200
        h.sim.set_unavailable()

        async def unknown() -> bool:
            return await reason(h) == "NvmlUnavailable"

        await wait_for(unknown, what="condition NvmlUnavailable")
        assert (await readyz(port))[0] == 503
        node = await h.node()
        assert node.metadata.labels[CLIQUE_LABEL] == h.clique  # unknown is not "left the clique"
        h.sim.set_available()
        await h.settled()
        await wait_for(lambda: h.monitor.nvml_available, what="NVML readable again")
        assert (await readyz(port))[0] == 200
        assert h.running


def nvml_present() -> bool:
    """Whether a fresh process finds a real NVML (this one may hold the simulated library)."""
    probe = subprocess.run(
        [sys.executable, "-c", "import pynvml; pynvml.nvmlInit()"], capture_output=True, check=False
    )
    return probe.returncode == 0


async def test_the_service_process_on_a_node_without_nvml(
    emulator: KubeServer,
    kube_client: KubeClient,
    service_env: dict[str, str],
    tmp_path: Path,
    cluster: Cluster,
) -> None:
    if nvml_present():
        pytest.skip("this machine has a real NVML")
    name = cluster.nodes[0].name
    await create_node(kube_client, name)
    env = {
        **service_env,
        "CDO_HEALTH_NODE_NAME": name,
        "CDO_HEALTH_KUBECONFIG": str(emulator.kubeconfig),
        "CDO_HEALTH_NVML_RETRY_S": "0.1",
        "CDO_HEALTH_NVML_RETRY_MAX_S": "0.2",
    }
    process = ProgramProcess("services.health_monitor", env=env, workdir=tmp_path).start()
    try:

        async def unknown() -> Node | None:
            node = msgspec.json.decode(await kube_client.get(NODES, name), type=Node)
            condition = node.condition(GPU_HEALTHY_CONDITION)
            return node if condition is not None and condition.status == "Unknown" else None

        node = await wait_for(unknown, what="condition Unknown", timeout=20)
        condition = node.condition(GPU_HEALTHY_CONDITION)
        assert condition is not None
        assert condition.reason == "NvmlUnavailable"
        port = int(service_env["CDO_HTTP_PORT"])
        status, body = await readyz(port)
        assert status == 503
        assert "nvml" in body.failing
        # Retried, not crashed.
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/metrics") as response,
        ):
            assert "cdo_health_nvml_available 0.0" in await response.text()
        assert process.returncode is None
    finally:
        process.stop()
    assert process.wait() == 0
    last = json.loads(process.stderr_path.read_text().splitlines()[-1])
    assert (last["message"], last["leftover_tasks"]) == ("shutdown complete", 0)
