"""The whole system with NATS identities (``cdo sim up --nats-auth``): every service connects
with its own ServiceAccount token through the auth callout, and its permissions are enough for
everything it publishes, while one node's token cannot publish another node's events.

A domain runs and one of its nodes takes a fault that clears again, so every service publishes:
the domain controller membership, the allocator capacity, the agents IMEX state, the monitor the
fault and the recovery. Each kind must arrive (as the reader sees them), the server must have
refused no publish and no subscription of any service, and the authenticator must have refused
no connection. Then a real health monitor's token file, bound to node A, tries node B's fault
subject, and so does the reader's token: the server refuses both, and nothing arrives.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import AsyncIterator

import nats
import pytest
import pytest_asyncio

from shared.bus.token import TokenFile
from shared.events import subjects
from shared.events.catalog import (
    CliqueCapacity,
    DomainMembershipChanged,
    NodeFault,
    NodeImexState,
    NodeRecovered,
)
from sim import control as simctl
from sim.control.state import IDENTITIES_DIR
from sim.identities import HEALTH_MONITOR_SA, nats_token_path
from tests.e2e.whole_system import WholeSystem, running_whole_system
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

# A fault that clears within the test: latched briefly, then a short hold-down.
HEALTH = {"CDO_HEALTH_XID_LATCH_S": "3", "CDO_HEALTH_HOLD_DOWN_S": "2"}
NAMESPACE = "nats-identities"
NAME = "ids"
INTRUDER = "intruder"
"""The client name of the connection made with another node's token (in the server's log)."""
SERVICE_CONNECTIONS = 2 + 2 * 36
"""The two controllers and the agent and monitor of each of the 36 nodes."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[WholeSystem]:
    async with running_whole_system(HEALTH, nats_auth=True) as running:
        yield running


def server_violations(system: WholeSystem) -> list[str]:
    """The permission violations nats-server logged, except the intruder's."""
    log = system.state_dir / "logs" / "nats-server.log"
    return [
        line
        for line in log.read_text(errors="replace").splitlines()
        if "Violation" in line and f':{INTRUDER}"' not in line
    ]


def authorizations(system: WholeSystem) -> dict[str, float]:
    """``cdo_nats_auth_requests_total`` by result, from the authenticator's metrics."""
    with urllib.request.urlopen(system.nats_auth_url + "/metrics", timeout=5) as response:
        text = response.read().decode()
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("cdo_nats_auth_requests_total{"):
            labels, _, value = line.rpartition(" ")
            found[labels.split('result="', 1)[1].split('"', 1)[0]] = float(value)
    return found


async def inject(system: WholeSystem, node: str, body: dict[str, object] | None) -> None:
    await asyncio.to_thread(simctl.fault, system.state_dir, node, body, say=lambda _line: None)


async def test_every_service_publishes_within_its_permissions(system: WholeSystem) -> None:
    assert system.nats_token_file, "the system runs without NATS identities"
    tap = await system.tap(subjects.ALL_EVENTS)
    try:
        await system.create_namespace(NAMESPACE)
        await system.create_workload(NAMESPACE, NAME, replicas=2, gpus=4)
        await system.wait_domain_ready(NAMESPACE, NAME, nodes=2)
        pods = await system.wait_running(NAMESPACE, f"app={NAME}", 2)
        victim = sorted(pod.spec.node_name for pod in pods)[0]
        await inject(system, victim, {"kind": "xid", "gpu": 0, "xid": 74})
        await wait_for(
            lambda: any(e.node == victim for e in tap.of_type(NodeFault)),
            timeout=60,
            interval=0.1,
            what=f"NodeFault of {victim}",
        )
        await inject(system, victim, None)
        await wait_for(
            lambda: any(e.node == victim for e in tap.of_type(NodeRecovered)),
            timeout=90,
            interval=0.2,
            what=f"NodeRecovered of {victim}",
        )
        for kind in (DomainMembershipChanged, CliqueCapacity, NodeImexState):
            assert tap.of_type(kind), f"no {kind.__name__} arrived"
        assert any(e.name == NAME for e in tap.of_type(DomainMembershipChanged))
        # The reader's own view, through the CLI: the capacity snapshots in the bucket.
        assert await system.capacity()
        await system.clean_up(NAMESPACE)
    finally:
        await tap.close()
    assert server_violations(system) == []
    results = authorizations(system)
    refused = {result: n for result, n in results.items() if result != "authorized" and n}
    assert refused == {}
    assert results["authorized"] >= SERVICE_CONNECTIONS


async def refused_publish(system: WholeSystem, token_file: str, subject: str) -> None:
    """Connect with ``token_file`` (as :data:`INTRUDER`), publish on ``subject``, and wait
    until the server reports the publish refused."""
    errors: list[str] = []

    async def on_error(exc: Exception) -> None:
        errors.append(str(exc).lower())

    intruder = await nats.connect(
        system.nats_url,
        token=TokenFile(token_file, variable="token_file"),
        name=INTRUDER,
        error_cb=on_error,
        max_reconnect_attempts=1,
    )
    try:
        await intruder.publish(subject, json.dumps({"subject": subject}).encode())
        await intruder.flush()
        await wait_for(
            lambda: any(f'publish to "{subject.lower()}"' in e for e in errors),
            timeout=10,
            what=f"the server refuses the publish on {subject}",
        )
    finally:
        await intruder.close()


async def test_one_nodes_token_cannot_publish_another_nodes_fault(system: WholeSystem) -> None:
    nodes = sorted(node.metadata.name for node in await system.nodes())
    faulted = set(await system.faulted_nodes())
    node_a, node_b = [node for node in nodes if node not in faulted][-2:]
    token_file = nats_token_path(system.state_dir / IDENTITIES_DIR, HEALTH_MONITOR_SA, node_a)
    target = subjects.NODE_FAULT.render(node=node_b)
    tap = await system.tap(target)
    try:
        await refused_publish(system, str(token_file), target)
        # The reader's token publishes nothing at all.
        await refused_publish(system, system.nats_token_file, target)
        # The tap was subscribed before the publishes: after a round trip, nothing has come.
        await tap.flush()
    finally:
        await tap.close()
    assert tap.events == []
    log = (system.state_dir / "logs" / "nats-server.log").read_text(errors="replace")
    # The server names the user with its role: "...cdo-health-monitor@<node> (<role>)".
    assert any(
        f"cdo-health-monitor@{node_a}" in line
        and f'- Publish Violation - Subject "{target}"' in line
        for line in log.splitlines()
    ), "the monitor's refused publish is not in the server's log"
