"""NATS identities from ServiceAccount tokens: a real nats-server asks the authenticator, which
asks the API emulator (TokenReview, over HTTPS with authentication enforced).

Each client below connects with nothing but a token the emulator issued (TokenRequest, audience
``nats``, bound to a pod on a node for the per-node services).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from opentelemetry.sdk.trace import TracerProvider

from services.nats_auth import nkeyjwt
from services.nats_auth.protocol import REQUEST_TYPE, parse_request
from shared.bus import EventBus, NatsSettings
from shared.events import NodeFault
from shared.events import subjects as s
from shared.kube.client import KubeClient
from shared.metrics import Metrics
from sim.kubeapi.auth.jwt import Signer as KubeSigner
from sim.natsauth import CalloutNats
from tests.integration.kubeapi.auth_helpers import claims
from tests.integration.nats_auth.conftest import (
    NAMESPACE,
    NODE_A,
    NODE_B,
    READERS_NAMESPACE,
    Cluster,
)
from tests.support.natsviolations import Violations
from tests.support.wait import wait_for

BUCKET = "cdo-snapshots"
SET_UP = 1
"""Users authorized before a test begins: the NATS bootstrap's, which made the stream."""


def kv(key: str) -> str:
    return f"$KV.{BUCKET}.{key}"


def node_subjects(node: str) -> dict[str, set[str]]:
    """What each per-node service of ``node`` publishes."""
    return {
        "cdo-imex-agent": {
            s.NODE_IMEX.render(node=node),
            kv(s.NODE_IMEX_SNAPSHOT.render(node=node)),
        },
        "cdo-health-monitor": {
            s.NODE_FAULT.render(node=node),
            s.NODE_RECOVERED.render(node=node),
            kv(s.NODE_HEALTH_SNAPSHOT.render(node=node)),
        },
    }


DOMAIN = {
    s.DOMAIN_MEMBERSHIP.render(namespace="team", name="d1"),
    kv(s.DOMAIN_SNAPSHOT.render(namespace="team", name="d1")),
}
CLIQUE = {
    s.CLIQUE_CAPACITY.render(clique="c0ffee00-0000-4000-8000-000000000001.1"),
    kv(s.CLIQUE_SNAPSHOT.render(clique="c0ffee00-0000-4000-8000-000000000001.1")),
}
EVERYTHING = {
    *DOMAIN,
    *CLIQUE,
    *(
        subject
        for node in (NODE_A, NODE_B)
        for own in node_subjects(node).values()
        for subject in own
    ),
}


@contextlib.asynccontextmanager
async def connected(callout: CalloutNats, token: str, **options: Any) -> AsyncIterator[Client]:
    client = Client()
    await client.connect(callout.server.url, token=token, max_reconnect_attempts=1, **options)
    try:
        yield client
    finally:
        await client.close()


async def refused(callout: CalloutNats, token: str) -> str:
    """The server's refusal of ``token`` (the test fails if it is accepted)."""
    client = Client()
    try:
        await client.connect(
            callout.server.url,
            token=token,
            allow_reconnect=False,
            max_reconnect_attempts=0,
            connect_timeout=5,
        )
    except nats.errors.Error as exc:
        return str(exc)
    finally:
        await client.close()
    pytest.fail("the server accepted the token")


@contextlib.asynccontextmanager
async def watching(callout: CalloutNats, cluster: Cluster) -> AsyncIterator[list[str]]:
    """A reader's subscription to every event: the subjects it received, in order."""
    seen: list[str] = []
    token = await cluster.token("dashboard", namespace=READERS_NAMESPACE)

    async def collect(msg: Msg) -> None:
        seen.append(msg.subject)

    async with connected(callout, token) as reader:
        await reader.subscribe(s.ALL_EVENTS, cb=collect)
        await reader.flush()
        yield seen


IDENTITIES = {
    "imex agent of node A": ("cdo-imex-agent", NODE_A),
    "health monitor of node A": ("cdo-health-monitor", NODE_A),
    "health monitor of node B": ("cdo-health-monitor", NODE_B),
    "domain controller": ("cdo-domain-controller", ""),
    "clique allocator": ("cdo-clique-allocator", ""),
    "reader": ("dashboard", ""),
}


def own_subjects(sa: str, node: str) -> set[str]:
    if node:
        return node_subjects(node)[sa]
    return {"cdo-domain-controller": DOMAIN, "cdo-clique-allocator": CLIQUE}.get(sa, set())


@pytest.mark.parametrize("who", sorted(IDENTITIES))
async def test_each_identity_publishes_only_its_own_subjects(
    cluster: Cluster, callout: CalloutNats, who: str
) -> None:
    sa, node = IDENTITIES[who]
    namespace = READERS_NAMESPACE if sa == "dashboard" else NAMESPACE
    token = await cluster.token(sa, node=node, namespace=namespace)
    own = own_subjects(sa, node)
    violations = Violations()
    async with (
        watching(callout, cluster) as seen,
        connected(callout, token, error_cb=violations.on_error) as client,
    ):
        for subject in sorted(EVERYTHING):
            await client.publish(subject, b"{}")
        await client.flush()
        denied = {subject.lower() for subject in EVERYTHING - own}
        await wait_for(
            lambda: set(violations.subjects) >= denied,
            what=f"{who} refused: {violations.subjects}",
        )
        own_events = {subject for subject in own if subject.startswith("cdo.")}
        await wait_for(lambda: set(seen) >= own_events, what=f"{who} delivered")
        # A refused publish is never routed: nothing more can arrive for the watcher.
        assert set(violations.subjects) == denied
        assert set(seen) == own_events


async def test_node_a_cannot_publish_node_b_fault(
    cluster: Cluster, callout: CalloutNats, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The health monitor of node A, through the bus and a token file, as a service runs."""
    token_file = tmp_path / "token"
    token_file.write_text(await cluster.token("cdo-health-monitor", node=NODE_A) + "\n")
    bus = EventBus(
        NatsSettings(url=callout.server.url, token_file=str(token_file), max_reconnect_attempts=1),
        service="health-monitor",
        instance="test",
        metrics=Metrics(),
        tracer=TracerProvider().get_tracer("test"),
    )
    caplog.set_level(logging.WARNING, logger="cdo.bus")
    async with watching(callout, cluster) as seen:
        await bus.connect()
        try:
            await bus.publish(NodeFault(node=NODE_B, signal="xid", code=79, severity="fatal"))
            # Published after node B's: once it arrives, node B's would have arrived before it.
            await bus.publish(NodeFault(node=NODE_A, signal="xid", code=79, severity="fatal"))
            await bus.flush()
            await wait_for(lambda: s.NODE_FAULT.render(node=NODE_A) in seen, what="own fault")
        finally:
            await bus.stop_intake()
            await bus.close()
        errors = [str(getattr(r, "error", "")) for r in caplog.records]
    assert seen == [s.NODE_FAULT.render(node=NODE_A)]
    denied = {
        f'publish to "{s.NODE_FAULT.render(node=NODE_B)}"'.lower(),
        f'publish to "{kv(s.NODE_HEALTH_SNAPSHOT.render(node=NODE_B))}"'.lower(),
    }
    assert {error.lower().rsplit("for ", 1)[-1] for error in errors} == denied, errors


async def test_an_expired_token_is_refused(cluster: Cluster, callout: CalloutNats) -> None:
    token = await cluster.token("cdo-domain-controller", seconds=600)
    async with connected(callout, token):
        pass
    # Past its expiry and the API server's 60 s leeway.
    cluster.move_clock(600 + 61)
    error = await refused(callout, token)
    assert "authorization violation" in error.lower()
    assert callout.count("unauthenticated") == 1
    assert callout.count("authorized") == SET_UP + 1


async def test_a_forged_token_is_refused(cluster: Cluster, callout: CalloutNats) -> None:
    """The claims of a real token, signed with another key."""
    real = await cluster.token("cdo-domain-controller")
    forged = KubeSigner().sign(claims(real))
    await refused(callout, forged)
    assert callout.count("unauthenticated") == 1
    assert callout.count("authorized") == SET_UP


async def test_a_token_for_another_audience_is_refused(
    cluster: Cluster, callout: CalloutNats
) -> None:
    token = await cluster.token(
        "cdo-domain-controller", audience="https://kubernetes.default.svc.cluster.local"
    )
    await refused(callout, token)
    assert callout.count("unauthenticated") == 1


async def test_a_token_of_a_deleted_service_account_is_refused(
    cluster: Cluster, callout: CalloutNats
) -> None:
    token = await cluster.token("cdo-clique-allocator")
    async with connected(callout, token):
        pass
    path = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/cdo-clique-allocator"
    status, _, _ = await cluster.http.request("DELETE", path)
    assert status == 200
    await refused(callout, token)
    assert callout.count("unauthenticated") == 1


async def test_a_token_bound_to_a_deleted_pod_is_refused(
    cluster: Cluster, callout: CalloutNats
) -> None:
    token = await cluster.token("cdo-imex-agent", node=NODE_A)
    pod = next(iter(cluster.pods))
    path = f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}"
    status, _, _ = await cluster.http.request("DELETE", path, json={"gracePeriodSeconds": 0})
    assert status == 200
    await wait_for(
        lambda: cluster.kube.store.buckets["pods"].get(NAMESPACE, pod) is None, what="pod gone"
    )
    await refused(callout, token)
    assert callout.count("unauthenticated") == 1


async def test_unknown_identities_are_refused(cluster: Cluster, callout: CalloutNats) -> None:
    """A ServiceAccount cdo does not know, and a per-node service's token bound to no node."""
    await refused(callout, await cluster.token("intruder", namespace=READERS_NAMESPACE))
    await refused(callout, await cluster.token("cdo-health-monitor"))
    assert callout.count("forbidden") == 2
    await refused(callout, "not-a-token")
    assert callout.count("unauthenticated") == 1


def server_request(server: nkeyjwt.Signer, issuer: str, token: str, **nats_claims: Any) -> bytes:
    """An authorization request as nats-server makes one (signed by its server key)."""
    user = nkeyjwt.Signer.generate(nkeyjwt.USER).public_key
    body = {
        "server_id": {"id": server.public_key, "name": "test", "host": "127.0.0.1"},
        "user_nkey": user,
        "client_info": {"host": "127.0.0.1", "id": 1},
        "connect_opts": {"auth_token": token, "protocol": 1},
        "type": REQUEST_TYPE,
        "version": 2,
        **nats_claims,
    }
    claims_ = {"sub": issuer, "aud": "nats-authorization-request", "exp": int(time.time()) + 5}
    return nkeyjwt.encode({**claims_, "nats": body}, server, now=time.time()).encode()


async def test_the_user_lives_no_longer_than_its_token(
    cluster: Cluster, callout: CalloutNats
) -> None:
    token = await cluster.token("cdo-imex-agent", node=NODE_A, seconds=900)
    server = nkeyjwt.Signer.generate(nkeyjwt.SERVER)
    issuer = callout.authenticator.issuer
    request = parse_request(server_request(server, issuer, token), issuer=issuer, now=time.time())
    answer = nkeyjwt.decode(
        (await callout.authenticator.answer(request)).decode(), roles=(nkeyjwt.ACCOUNT,)
    )
    assert answer["iss"] == issuer
    assert answer["aud"] == server.public_key
    assert answer["sub"] == request.user_nkey
    user = nkeyjwt.decode(answer["nats"]["jwt"], roles=(nkeyjwt.ACCOUNT,))
    assert user["exp"] == claims(token)["exp"]
    assert user["aud"] == "CDO"
    assert user["name"] == f"{NAMESPACE}/cdo-imex-agent@{NODE_A} (node-imex-publisher)"


class Received:
    def __init__(self, data: bytes, reply: str) -> None:
        self.data = data
        self.reply = reply


async def test_malformed_requests_are_counted_and_dropped(
    cluster: Cluster, callout: CalloutNats
) -> None:
    """Garbage, a request signed by a key other than the server it names, one addressed to
    another issuer, one without a reply subject: each counted, none answered, and the next
    client is still served. Only the server itself may publish on the callout subject (it
    refuses even the callout user), so the messages go to the authenticator's handler as its
    subscription would hand them over."""
    server = nkeyjwt.Signer.generate(nkeyjwt.SERVER)
    other = nkeyjwt.Signer.generate(nkeyjwt.SERVER)
    issuer = callout.authenticator.issuer
    token = await cluster.token("cdo-domain-controller")
    good = server_request(server, issuer, token)
    impostor = server_request(
        other, issuer, token, server_id={"id": server.public_key, "name": "x", "host": "h"}
    )
    wrong_issuer = server_request(
        server, nkeyjwt.Signer.generate(nkeyjwt.ACCOUNT).public_key, token
    )
    answers: list[bytes] = []

    async def on_answer(msg: Msg) -> None:
        answers.append(msg.data)

    inbox = callout.connection.new_inbox()
    await callout.connection.subscribe(inbox, cb=on_answer)
    for data in (b"\x00not a jwt", b"a.b.c", impostor, wrong_issuer):
        await callout.authenticator.handle(Received(data, inbox))
    await callout.authenticator.handle(Received(good, ""))
    assert callout.count("malformed") == 5
    await callout.authenticator.handle(Received(good, inbox))
    await wait_for(lambda: answers, what="the good request's answer")
    assert len(answers) == 1
    async with connected(callout, token):
        pass
    assert callout.count("authorized") == SET_UP + 2


def refused_in(errors: list[str], subject: str) -> bool:
    return any(f'subscription to "{subject.lower()}"' in error for error in errors)


async def test_only_readers_and_imex_peers_subscribe_to_events(
    cluster: Cluster, callout: CalloutNats
) -> None:
    """The health monitor may not listen to events; the IMEX agent follows its peers' IMEX
    state only."""
    cases = (
        ("cdo-health-monitor", s.NODE_FAULT.wildcard(), False),
        ("cdo-imex-agent", s.NODE_IMEX.wildcard(), True),
        ("cdo-imex-agent", s.ALL_EVENTS, False),
    )
    # Refused for both: once its refusal is back, the one before it has been answered too.
    marker = "cdo.v1.domain.>"
    for sa, subject, allowed in cases:
        errors: list[str] = []

        async def on_error(exc: Exception, sink: list[str] = errors) -> None:
            sink.append(str(exc).lower())

        token = await cluster.token(sa, node=NODE_A)
        async with connected(callout, token, error_cb=on_error) as client:
            await client.subscribe(subject)
            await client.subscribe(marker)
            await client.flush()
            await wait_for(functools.partial(refused_in, errors, marker), what="marker refused")
        assert refused_in(errors, subject) is not allowed, (sa, subject, errors)


async def test_a_token_bound_to_the_node_itself_scopes_the_same(
    cluster: Cluster, callout: CalloutNats, tmp_path: Path
) -> None:
    """The simulated per-node services have no pods: their tokens are bound to the Node."""
    path = await callout.token_file("cdo-imex-agent", node=NODE_B, directory=tmp_path)
    violations = Violations()
    own, other = s.NODE_IMEX.render(node=NODE_B), s.NODE_IMEX.render(node=NODE_A)
    async with (
        watching(callout, cluster) as seen,
        connected(callout, path.read_text(), error_cb=violations.on_error) as client,
    ):
        await client.publish(other, b"{}")
        await client.publish(own, b"{}")
        await client.flush()
        await wait_for(lambda: own in seen and violations.subjects, what="own and refused")
    assert seen == [own]
    assert violations.subjects == [other.lower()]


async def test_the_simulated_token_files_are_refreshed(cluster: Cluster, tmp_path: Path) -> None:
    admin_client = await KubeClient.connect(kubeconfig=cluster.kube.kubeconfig)
    nats_ = CalloutNats(
        admin=admin_client,
        api_url=cluster.kube.url,
        ca_pem=cluster.kube.ca_pem,
        store_dir=tmp_path / "nats",
        namespace=NAMESPACE,
        refresh_after_s=0.1,
    )
    try:
        await nats_.start()
        path = await nats_.token_file("cdo-health-monitor", node=NODE_A, directory=tmp_path)
        first = path.read_text()
        await wait_for(lambda: path.read_text() != first, what="a fresh token")
        async with connected(nats_, path.read_text()):
            pass
    finally:
        await nats_.stop()
        await admin_client.close()
