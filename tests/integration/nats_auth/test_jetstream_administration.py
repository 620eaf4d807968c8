"""JetStream administration apart from publishing, on a real nats-server with the real callout.

The stream and the bucket are made by the NATS bootstrap's identity (the ``callout`` fixture,
through the policy). Every other identity is refused what would change them, and a reader
owns its consumers: each attack below is refused, leaves the state as it was, and shows in the
server's log with the refused identity and its role.
"""

from __future__ import annotations

import contextlib
import functools
import json
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.js import api
from opentelemetry.sdk.trace import TracerProvider

from services.nats_bootstrap import BootstrapFailedError, bootstrap
from shared.bus import EventBus, NatsSettings
from shared.bus.history import Delivery
from shared.events import subjects as s
from shared.events.catalog import DomainMembershipChanged
from shared.metrics import Metrics
from sim.natsauth import CalloutNats
from tests.integration.nats_auth.conftest import NAMESPACE, NODE_A, READERS_NAMESPACE, Cluster
from tests.support.natsviolations import Violations
from tests.support.wait import wait_for

STREAM = "CDO"
BUCKET_STREAM = "KV_cdo-snapshots"
DASHBOARD = f"{READERS_NAMESPACE}_dashboard"
"""The consumer the reader ``schedulers/dashboard`` owns."""
API_TIMEOUT_S = 0.5
"""A refused JetStream call gets no answer: the client gives up after this."""


@pytest.fixture
def readers() -> tuple[str, ...]:
    """Every ServiceAccount of the readers' namespace reads (dashboard and intruder)."""
    return (f"{READERS_NAMESPACE}/*",)


@contextlib.asynccontextmanager
async def connected(
    callout: CalloutNats, token: str, violations: Violations | None = None
) -> AsyncIterator[Client]:
    client = Client()
    options: dict[str, Any] = {"token": token, "max_reconnect_attempts": 1}
    if violations is not None:
        options["error_cb"] = violations.on_error
    await client.connect(callout.server.url, **options)
    try:
        yield client
    finally:
        await client.close()


async def node_token(cluster: Cluster) -> str:
    return await cluster.token("cdo-imex-agent", node=NODE_A)


async def reader_token(cluster: Cluster, name: str = "dashboard") -> str:
    return await cluster.token(name, namespace=READERS_NAMESPACE)


def streams(callout: CalloutNats) -> dict[str, dict[str, Any]]:
    """Every stream of the CDO account with its config, from the server's monitoring port:
    what the server holds, whoever asks."""
    server = callout.server
    url = f"http://{server.host}:{server.monitor_port}/jsz?accounts=true&streams=true&config=true"
    with urllib.request.urlopen(url, timeout=5) as response:
        body = json.load(response)
    found: dict[str, dict[str, Any]] = {}
    for account in body.get("account_details") or ():
        for stream in account.get("stream_detail") or ():
            found[stream["name"]] = stream
    return found


def logged_violation(callout: CalloutNats, who: str, subject: str) -> bool:
    """The server's log line for a refused publish names the user (identity and role)."""
    text = callout.server.log_file.read_text(errors="replace")
    return any(
        "Publish Violation" in line and who in line and f'"{subject}"' in line
        for line in text.splitlines()
    )


async def refused(call: Any) -> None:
    with pytest.raises((nats.errors.TimeoutError, nats.js.errors.Error)):
        await call


async def test_only_the_nats_bootstrap_changes_the_stream(
    cluster: Cluster, callout: CalloutNats, tmp_path: Path
) -> None:
    """The bootstrap program, as its Job runs it: with its token it updates the stream to new
    limits; with a service's token it is refused and the stream keeps them."""
    token_file = tmp_path / "token"

    def settings(max_age_s: float) -> NatsSettings:
        return NatsSettings(
            url=callout.server.url,
            token_file=str(token_file),
            max_reconnect_attempts=1,
            stream_max_age_s=max_age_s,
        )

    token_file.write_text(await cluster.token("cdo-nats-bootstrap"))
    done = await bootstrap(settings(3600.0))
    assert (done.stream, done.bucket) == ("updated", "kept")
    assert (await bootstrap(settings(3600.0))).stream == "kept"
    token_file.write_text(await cluster.token("cdo-domain-controller"))
    with pytest.raises(BootstrapFailedError, match="only the NATS bootstrap's may"):
        await bootstrap(settings(60.0))
    assert streams(callout)[STREAM]["config"]["max_age"] == 3600 * 10**9


async def test_a_node_token_cannot_update_the_stream(
    cluster: Cluster, callout: CalloutNats
) -> None:
    violations = Violations()
    async with connected(callout, await node_token(cluster), violations) as client:
        js = client.jetstream(timeout=API_TIMEOUT_S)
        truncated = api.StreamConfig(name=STREAM, subjects=[s.ALL_EVENTS], max_msgs=1)
        await refused(js.update_stream(truncated))
        await refused(js.update_stream(api.StreamConfig(name=BUCKET_STREAM, max_msgs=1)))
        await wait_for(lambda: len(violations.subjects) == 2, what="both refusals")
    assert violations.subjects == [
        f"$js.api.stream.update.{STREAM}".lower(),
        f"$js.api.stream.update.{BUCKET_STREAM}".lower(),
    ]
    held = streams(callout)
    assert held[STREAM]["config"]["max_msgs"] == -1
    assert held[BUCKET_STREAM]["config"]["max_msgs"] == -1
    who = f"{NAMESPACE}/cdo-imex-agent@{NODE_A} (node-imex-publisher)"
    assert logged_violation(callout, who, f"$JS.API.STREAM.UPDATE.{STREAM}")


async def test_a_node_token_cannot_create_a_stream(cluster: Cluster, callout: CalloutNats) -> None:
    violations = Violations()
    async with connected(callout, await node_token(cluster), violations) as client:
        js = client.jetstream(timeout=API_TIMEOUT_S)
        # A stream of its own, or one that would take the events away from CDO's.
        await refused(js.add_stream(name="STOLEN", subjects=["stolen.>"]))
        await refused(js.add_stream(name="SHADOW", subjects=[s.NODE_FAULT.wildcard()]))
        await wait_for(lambda: len(violations.subjects) == 2, what="both refusals")
    assert violations.subjects == ["$js.api.stream.create.stolen", "$js.api.stream.create.shadow"]
    assert set(streams(callout)) == {STREAM, BUCKET_STREAM}


async def test_nobody_deletes_or_purges_the_history(cluster: Cluster, callout: CalloutNats) -> None:
    for token in (await node_token(cluster), await reader_token(cluster)):
        violations = Violations()
        async with connected(callout, token, violations) as client:
            js = client.jetstream(timeout=API_TIMEOUT_S)
            await refused(js.purge_stream(STREAM))
            await refused(js.delete_stream(BUCKET_STREAM))
            await wait_for(functools.partial(violations.count, 2), what="both refusals")
    assert set(streams(callout)) == {STREAM, BUCKET_STREAM}


async def test_a_consumer_is_its_owners_alone(cluster: Cluster, callout: CalloutNats) -> None:
    """The reader dashboard's durable consumer: a node's token and another reader may neither
    delete it nor pull from it, nor make a consumer under its name; it stays."""
    async with connected(callout, await reader_token(cluster)) as owner:
        js = owner.jetstream(timeout=2)
        await js.add_consumer(STREAM, durable_name=DASHBOARD, ack_policy=api.AckPolicy.EXPLICIT)
        for token in (await node_token(cluster), await reader_token(cluster, "intruder")):
            violations = Violations()
            async with connected(callout, token, violations) as attacker:
                theirs = attacker.jetstream(timeout=API_TIMEOUT_S)
                await refused(theirs.delete_consumer(STREAM, DASHBOARD))
                await refused(theirs.add_consumer(STREAM, durable_name=DASHBOARD))
                await refused(
                    attacker.request(
                        f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.{DASHBOARD}",
                        b"1",
                        timeout=API_TIMEOUT_S,
                    )
                )
                await wait_for(functools.partial(violations.count, 3), what="3 refusals")
            assert violations.subjects == [
                f"$js.api.consumer.delete.{STREAM}.{DASHBOARD}".lower(),
                f"$js.api.consumer.durable.create.{STREAM}.{DASHBOARD}".lower(),
                f"$js.api.consumer.msg.next.{STREAM}.{DASHBOARD}".lower(),
            ]
        assert (await js.consumer_info(STREAM, DASHBOARD)).name == DASHBOARD
        assert await js.delete_consumer(STREAM, DASHBOARD)


async def test_a_reader_cannot_publish(cluster: Cluster, callout: CalloutNats) -> None:
    fault = s.NODE_FAULT.render(node=NODE_A)
    snapshot = f"$KV.cdo-snapshots.{s.NODE_HEALTH_SNAPSHOT.render(node=NODE_A)}"
    before = streams(callout)[STREAM]["state"]["messages"]
    violations = Violations()
    async with connected(callout, await reader_token(cluster), violations) as reader:
        await reader.publish(fault, b"{}")
        await reader.publish(snapshot, b"{}")
        await reader.flush()
        await wait_for(lambda: len(violations.subjects) == 2, what="both refusals")
    assert violations.subjects == [fault.lower(), snapshot.lower()]
    assert streams(callout)[STREAM]["state"]["messages"] == before
    assert logged_violation(callout, f"{READERS_NAMESPACE}/dashboard (reader)", fault)


async def token_bus(callout: CalloutNats, directory: Path, service: str, token: str) -> EventBus:
    """A bus that connects with ``token`` from a file, as a service does (not connected yet)."""
    path = directory / f"{service}.token"
    path.write_text(token)
    return EventBus(
        NatsSettings(url=callout.server.url, token_file=str(path), max_reconnect_attempts=1),
        service=service,
        instance="test",
        metrics=Metrics(),
        tracer=TracerProvider().get_tracer("test"),
    )


async def test_services_and_readers_work_within_their_rights(
    cluster: Cluster, callout: CalloutNats, tmp_path: Path
) -> None:
    """A controller binds, publishes with acks and reads the snapshots back; a reader replays
    the history (ephemeral consumer), pulls from and acks its own durable, reads the bucket."""
    bus = await token_bus(
        callout, tmp_path, "domain-controller", await cluster.token("cdo-domain-controller")
    )
    event = DomainMembershipChanged(namespace="team", name="d1")
    await bus.connect()
    try:
        await bus.ensure_jetstream()
        await bus.publish(event)
        assert await bus.acknowledged(5.0)
        await bus.flush()
        assert [e.subject() for e in await bus.snapshots("v1.domain.>")] == [event.subject()]
    finally:
        await bus.stop_intake()
        await bus.close()
    reader = await token_bus(callout, tmp_path, "reader", await reader_token(cluster))
    replayed: list[Delivery] = []

    async def keep(delivery: Delivery) -> None:
        replayed.append(delivery)

    await reader.connect()
    try:
        await reader.ensure_jetstream()
        await reader.consume(keep)
        await wait_for(lambda: len(replayed) == 1, what="the history replayed")
        assert len(await reader.snapshots(">")) == 1
        js = reader.js
        pull = await js.pull_subscribe(s.ALL_EVENTS, durable=DASHBOARD, stream=STREAM)
        messages = await pull.fetch(1, timeout=2)
        await messages[0].ack_sync(timeout=2)
        assert (await js.consumer_info(STREAM, DASHBOARD)).ack_floor.stream_seq == 1
        assert await js.delete_consumer(STREAM, DASHBOARD)
    finally:
        await reader.stop_intake()
        await reader.close()
