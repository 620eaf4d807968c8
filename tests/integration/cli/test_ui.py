"""``cdo ui`` as a process against the API emulator over HTTP and a real nats-server: the state
it serves, a domain's view and a domain that does not exist, a change in the cluster and a
fault on the feed reaching an open stream within a second, and a cluster or NATS that does not
answer said with the reason."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from shared.crds import install_crds
from shared.crds.names import GPU_HEALTHY_CONDITION, IMEX_SLOT_ANNOTATION
from shared.events import NodeFault
from shared.kube.client import KubeClient
from shared.kube.resources import NODES
from sim.kubeapi import KubeServer
from sim.natsserver import NatsServer, free_port
from tests.conftest import BusFactory
from tests.integration.cli import objects
from tests.integration.cli.conftest import dead_kubeconfig
from tests.integration.cli.objects import A, B, condition
from tests.support.uiserver import UiServer, running_ui
from tests.support.wait import wait_for

LIVE_S = 1.0
"""The issue's bound: a change is on the page within a second."""


async def cluster(client: KubeClient) -> None:
    """ml/big placed on a1, a2 (clique A); b1, b2 in clique B; a2 with a fault taint."""
    await install_crds(client)
    await objects.namespace(client, "ml")
    for name, clique in (("a1", A), ("a2", A), ("b1", B), ("b2", B)):
        await objects.node(client, name, clique, fault=name == "a2")
    for slot, name in enumerate(("a1", "a2")):
        await client.patch(
            NODES, name, {"metadata": {"annotations": {IMEX_SLOT_ANNOTATION: str(slot)}}}
        )
    await objects.domain(
        client,
        "ml",
        "big",
        [
            condition("Ready", "False", "NodeFault", "a member node carries the fault taint"),
            condition("Placed", "True", "Placed"),
            condition("Degraded", "True", "NodeFault"),
        ],
    )
    await objects.placement(client, "ml", "big", members={"a1": ["big-0"], "a2": ["big-1"]})


def connection(emulator: KubeServer, tmp_path: Path, nats_url: str) -> list[str]:
    return [
        "--kubeconfig",
        str(emulator.kubeconfig),
        "--nats-url",
        nats_url,
        "--state-dir",
        str(tmp_path),
    ]


class Stream:
    """The page's Server-Sent Events, read as a browser's EventSource reads them."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def next(self, wanted: str) -> dict[str, Any] | list[Any]:
        event = ""
        async for raw in self._response.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                event = line[len("event: ") :]
            elif line.startswith("data: ") and event == wanted:
                data: dict[str, Any] | list[Any] = json.loads(line[len("data: ") :])
                return data
        raise AssertionError(f"the stream ended before a {wanted} event")

    async def until(self, wanted: str, predicate: Any, *, within_s: float) -> float:
        """Seconds until an event ``wanted`` whose data satisfies ``predicate`` arrives."""
        started = time.monotonic()
        async with asyncio.timeout(within_s):
            while not predicate(await self.next(wanted)):
                pass
        return time.monotonic() - started


async def open_stream(ui: UiServer) -> AsyncIterator[Stream]:
    async with aiohttp.ClientSession() as session, session.get(ui.url + "api/stream") as response:
        assert response.headers["Content-Type"] == "text/event-stream"
        yield Stream(response)


def gpus_of(rack: dict[str, Any], node: str) -> list[list[Any]]:
    for block in rack["blocks"]:
        for tray in block["trays"]:
            if tray and tray["node"] == node:
                gpus: list[list[Any]] = tray["gpus"]
                return gpus
    return []


def tray_of(state: dict[str, Any], node: str) -> dict[str, Any]:
    for rack in state["racks"]:
        for block in rack["blocks"]:
            for tray in block["trays"]:
                if tray and tray["node"] == node:
                    found: dict[str, Any] = tray
                    return found
    raise AssertionError(f"no tray {node}")


@pytest.mark.asyncio
async def test_the_page_state_a_domain_view_and_one_that_does_not_exist(
    emulator: KubeServer, kube_client: KubeClient, nats_server: NatsServer, tmp_path: Path
) -> None:
    await cluster(kube_client)
    with running_ui(*connection(emulator, tmp_path, nats_server.url), workdir=tmp_path) as ui:
        state = await wait_for(
            lambda: ((s := ui.state())["status"]["synced"] and len(s["racks"]) == 1 and s) or None,
            timeout=30,
            what="the page state synced",
        )
        # No NVLink-domain label in these objects: the clique label's UUID groups both cliques.
        (rack,) = state["racks"]
        assert [b["clique"] for b in rack["blocks"]] == [A, B]
        assert [e["namespace"] + "/" + e["name"] for e in state["legend"]] == ["ml/big"]
        assert [g[:2] for g in tray_of(state, "a1")["gpus"]] == [["held", 1]] * 4
        assert [g[:2] for g in tray_of(state, "b1")["gpus"]] == [["free", 0]] * 4
        assert tray_of(state, "a2")["marks"][0][0] == "F"
        assert state["status"]["api"]["up"] is True

        code, view = await asyncio.to_thread(ui.get, "api/domains/ml/big")
        assert code == 200
        assert view["phase"] == "Degraded"
        (piece,) = view["slices"]
        assert [(seat["node"], seat["pods"]) for seat in piece["seats"]] == [
            ("a1", [["big-0", 0]]),
            ("a2", [["big-1", 1]]),
        ]
        assert any(f["reason"] == "NodeFault" for f in view["explanation"]["findings"])

        code, missing = await asyncio.to_thread(ui.get, "api/domains/ml/nope")
        assert code == 404 and missing["error"] == "ComputeDomain ml/nope not found"


@pytest.mark.asyncio
async def test_a_node_fault_and_a_feed_event_reach_an_open_stream_within_a_second(
    emulator: KubeServer,
    kube_client: KubeClient,
    nats_server: NatsServer,
    bus_factory: BusFactory,
    tmp_path: Path,
) -> None:
    await cluster(kube_client)
    bus = await bus_factory("health-monitor")  # makes the stream, as the services do
    with running_ui(*connection(emulator, tmp_path, nats_server.url), workdir=tmp_path) as ui:
        await wait_for(
            lambda: ((s := ui.state()["status"])["synced"] and s["feed"]["up"]) or None,
            timeout=30,
            what="synced, feed up",
        )
        async for stream in open_stream(ui):
            await stream.next("snapshot")
            # The health monitor writes its condition: GPU 3 of b1 is faulty.
            status = {
                "conditions": [
                    condition("Ready", "True", "KubeletReady"),
                    condition(
                        GPU_HEALTHY_CONDITION,
                        "False",
                        "GpuFault",
                        "GPU 3: XID 79: GPU has fallen off the bus",
                    ),
                ]
            }
            await kube_client.patch(NODES, "b1", {"status": status}, subresource="status")
            took = await stream.until(
                "racks",
                lambda data: any(
                    gpus_of(r, "b1")[3:4] == [["faulty", 0, ""]] for r in data["racks"]
                ),
                within_s=5 * LIVE_S,
            )
            assert took < LIVE_S, f"the API's fault reached the page after {took:.2f} s"

            # The feed is faster than the API: its fault marks the GPU before the Node says so.
            await bus.publish(
                NodeFault(node="b2", signal="xid", code=79, severity="fatal", gpu_index=1,
                          message="GPU 1: XID 79", time=datetime.now(UTC))
            )  # fmt: skip
            took = await stream.until(
                "racks",
                lambda data: any(
                    gpus_of(r, "b2")[1:2] == [["faulty", 0, "GPU 1: XID 79"]] for r in data["racks"]
                ),
                within_s=5 * LIVE_S,
            )
            assert took < LIVE_S, f"the feed's fault reached the page after {took:.2f} s"
            feed = ui.state()["feed"]
            assert [(f["kind"], f["node"]) for f in feed] == [("fault", "b2")]


@pytest.mark.asyncio
async def test_a_cluster_and_a_nats_that_do_not_answer_are_said_with_the_reason(
    emulator: KubeServer, kube_client: KubeClient, tmp_path: Path
) -> None:
    await cluster(kube_client)
    dead = dead_kubeconfig(tmp_path / "dead", free_port())
    nats = f"nats://127.0.0.1:{free_port()}"
    args = ["--kubeconfig", str(dead), "--nats-url", nats, "--state-dir", str(tmp_path)]
    with running_ui(*args, workdir=tmp_path) as ui:
        status = await wait_for(
            lambda: (
                (
                    (s := ui.state()["status"])["api"]["message"]
                    != "connecting to the Kubernetes API"
                    and s
                )
                or None
            ),
            timeout=30,
            what="the API's status",
        )
        assert status["api"]["up"] is False
        assert status["api"]["message"].startswith(
            "the Kubernetes API does not answer (kubeconfig "
        )
        assert status["feed"]["up"] is False
        assert f"NATS at {nats} (from --nats-url) does not answer" in status["feed"]["message"]
        code, body = await asyncio.to_thread(ui.get, "api/domains/ml/big")
        assert code == 503 and "cannot be read" in body["error"]
    # The same page, pointed at the live cluster: the API is up, the feed still down.
    with running_ui(*connection(emulator, tmp_path, nats), workdir=tmp_path) as ui:
        state = await wait_for(
            lambda: ((s := ui.state())["status"]["synced"] and s) or None, timeout=30, what="synced"
        )
        assert state["status"]["api"]["up"] is True and state["racks"]
        assert state["status"]["feed"]["up"] is False
