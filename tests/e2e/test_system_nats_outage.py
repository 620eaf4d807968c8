"""NATS is a feed, Kubernetes the truth: the whole system works through a NATS outage.

With the nats-server stopped, the domain controller and the clique allocator are SIGKILLed and
come back (their control plane restarts them, as the kubelet would) without NATS: they are ready
(their /readyz lists ``nats`` as degraded), they lead, and a new ComputeDomain is placed and
Ready; a pod whose claim template names another driver's DeviceClass is admitted. The nats-server
then starts again on the same port and store: the membership events published meanwhile reach
the stream, and the KV snapshots (the domain's membership, the capacity of its clique) are
brought up to date.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
import pytest_asyncio
from opentelemetry.sdk.trace import TracerProvider

from bench._e2e_outage import (
    OTHER_TEMPLATE,
    other_driver_pod,
    other_driver_template,
    restart_control_plane,
    start_nats,
    stop_nats,
)
from shared.bus import EventBus, NatsSettings, StartAt
from shared.bus.history import Delivery
from shared.events import CliqueCapacity, DomainMembershipChanged
from shared.events.subjects import CLIQUE_SNAPSHOT, DOMAIN_SNAPSHOT
from shared.kube.models import Pod
from shared.kube.resources import PODS, RESOURCE_CLAIM_TEMPLATES
from shared.metrics import Metrics
from sim.control.state import read_controlplane
from tests.e2e.whole_system import (
    GPUS_PER_NODE,
    SYSTEM_STEP_S,
    WholeSystem,
    gated,
    running_whole_system,
)
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

NAMESPACE = "outage"
DOMAIN = "dark"
PODS_OF_DOMAIN = 2


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[WholeSystem]:
    async with running_whole_system() as running:
        yield running


def readyz(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/readyz", timeout=5) as response:
        body: dict[str, Any] = json.loads(response.read())
        return body


async def reader(system: WholeSystem) -> EventBus:
    bus = EventBus(
        NatsSettings(url=system.nats_url, max_reconnect_attempts=1),
        service="e2e",
        instance="outage",
        metrics=Metrics(),
        tracer=TracerProvider().get_tracer("e2e"),
    )
    await bus.connect()
    return bus


async def test_a_nats_outage_stops_no_domain_and_no_pod_and_the_feed_catches_up(
    system: WholeSystem,
) -> None:
    await system.create_namespace(NAMESPACE)
    nats = await stop_nats(system.state_dir)
    await restart_control_plane(system.state_dir, timeout_s=SYSTEM_STEP_S)
    await system.wait_services_ready()
    info = read_controlplane(system.state_dir)
    assert info is not None
    for service in info.services.values():
        assert readyz(service.probe_url) == {"ready": True, "failing": [], "degraded": ["nats"]}

    # Another driver's pod is admitted, untouched.
    template = other_driver_template(NAMESPACE)
    await system.client.create(RESOURCE_CLAIM_TEMPLATES, template, namespace=NAMESPACE)
    pod = other_driver_pod("other-driver", NAMESPACE)
    raw = await system.client.create(PODS, pod, namespace=NAMESPACE)
    assert not gated(msgspec.json.decode(raw, type=Pod))

    # A domain created while NATS is down is placed and Ready.
    await system.create_workload(NAMESPACE, DOMAIN, replicas=PODS_OF_DOMAIN, gpus=GPUS_PER_NODE)
    domain = await system.wait_domain_ready(NAMESPACE, DOMAIN)
    placement = await system.placement(NAMESPACE, DOMAIN)
    assert placement is not None
    (clique,) = {piece.clique for piece in placement.spec.all_slices}

    # NATS is back, same port and store: what was published meanwhile arrives, and the
    # snapshots say what Kubernetes says.
    start_nats(system.state_dir, nats)
    bus = await reader(system)
    try:
        key = DOMAIN_SNAPSHOT.render(namespace=NAMESPACE, name=DOMAIN)

        async def membership_ready() -> DomainMembershipChanged | None:
            found = [
                event
                for event in await bus.snapshots(key)
                if isinstance(event, DomainMembershipChanged)
            ]
            return found[0] if found and found[0].phase == "Ready" else None

        snapshot = await wait_for(membership_ready, timeout=60, what="the domain's snapshot")
        assert snapshot.uid == domain.metadata.uid
        assert len(snapshot.members) == PODS_OF_DOMAIN

        async def capacity_caught_up() -> CliqueCapacity | None:
            found = [
                event
                for event in await bus.snapshots(CLIQUE_SNAPSHOT.render(clique=clique))
                if isinstance(event, CliqueCapacity)
            ]
            held = PODS_OF_DOMAIN * GPUS_PER_NODE
            done = found and found[0].gpus_total - found[0].gpus_free >= held
            return found[0] if done else None

        await wait_for(capacity_caught_up, timeout=60, what="the clique's capacity snapshot")

        phases: list[str] = []

        async def on_delivery(delivery: Delivery) -> None:
            event = delivery.event
            if isinstance(event, DomainMembershipChanged) and event.name == DOMAIN:
                phases.append(event.phase)

        await bus.ensure_jetstream()
        subscription = await bus.consume(on_delivery, start=StartAt())
        await wait_for(lambda: "Ready" in phases, timeout=60, what="the stream's Ready event")
        await subscription.unsubscribe()
        await wait_for(
            lambda: all(readyz(s.probe_url)["degraded"] == [] for s in info.services.values()),
            timeout=60,
            what="the services' feed up",
        )
    finally:
        await bus.close()
    await system.client.delete(PODS, "other-driver", namespace=NAMESPACE)
    await system.client.delete(RESOURCE_CLAIM_TEMPLATES, OTHER_TEMPLATE, namespace=NAMESPACE)
    await system.clean_up(NAMESPACE)
