"""The rendered NATS configuration on a real nats-server: each user publishes only its own.

The server runs the overlay's cdo-nats-config files as they are (only the listen ports, the
store directory and, for TLS, the certificate paths are changed), with the passwords in its
environment as the StatefulSet passes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from opentelemetry.sdk.trace import TracerProvider

from services.nats_auth.nkeyjwt import ACCOUNT, Signer
from services.nats_bootstrap import bootstrap
from shared.bus import EventBus, NatsSettings
from shared.events import Event
from shared.metrics import Metrics
from sim.natsserver import free_port, nats_server_binary
from tests.integration.deploy.conftest import Manifest, generated, load_bootstrap
from tests.support.natsviolations import Violations
from tests.support.wait import wait_for, wait_for_sync
from tests.unit.events.samples import sample_events

USERS = ("domain-controller", "clique-allocator", "imex-agent", "health-monitor", "reader")
ADMIN = "nats-bootstrap"
"""The NATS bootstrap's static user: it alone creates and updates the stream and bucket."""
CALLOUT_USER = "nats-auth"
"""The authenticator's static user (components/nats-auth-callout, in prod)."""
OWN_EVENTS = {
    "domain-controller": {"DomainMembershipChanged"},
    "clique-allocator": {"CliqueCapacity"},
    "imex-agent": {"NodeImexState"},
    "health-monitor": {"NodeFault", "NodeRecovered"},
    "reader": set(),
    ADMIN: set(),
}
BUCKET = "cdo-snapshots"


@dataclass(frozen=True)
class Server:
    url: str
    passwords: dict[str, str]
    log: Path


def env_name(user: str) -> str:
    return "NATS_PASSWORD_" + user.upper().replace("-", "_")


def write_config(objs: list[Manifest], directory: Path, *, tls: Path | None = None) -> Path:
    """The ConfigMap's files; the store moves under ``directory``, the TLS files to ``tls``."""
    directory.mkdir(parents=True, exist_ok=True)
    data: dict[str, str] = generated(objs, "ConfigMap", "cdo-nats-config")["data"]
    for name, text in data.items():
        text = text.replace("store_dir: /data/jetstream", f"store_dir: {directory / 'store'}")
        if tls is not None:
            text = text.replace("/etc/nats-tls", str(tls))
        (directory / name).write_text(text)
    return directory / "nats.conf"


@contextlib.contextmanager
def running(
    config: Path,
    store: Path,
    *,
    host: str = "127.0.0.1",
    extra_env: dict[str, str] | None = None,
) -> Iterator[Server]:
    port, monitor = free_port(), free_port()
    passwords = {user: f"pw-{user}-{os.getpid()}" for user in (*USERS, ADMIN, CALLOUT_USER)}
    log = store / "nats-server.log"
    store.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "POD_NAME": "cdo-nats-0"}
    env.update({env_name(user): password for user, password in passwords.items()})
    env.update(extra_env or {})
    process = subprocess.Popen(
        [
            nats_server_binary(),
            "--config",
            str(config),
            "--addr",
            host,
            "--port",
            str(port),
            "--http_port",
            str(monitor),
            "--log",
            str(log),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )

    def healthy() -> bool:
        assert process.poll() is None, log.read_text() if log.exists() else "no log"
        try:
            url = f"http://{host}:{monitor}/healthz?js-enabled-only=true"
            with urllib.request.urlopen(url, timeout=1) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    try:
        wait_for_sync(healthy, timeout=15, what="nats-server ready")
        yield Server(url=f"nats://{host}:{port}", passwords=passwords, log=log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def server(overlays: dict[str, list[Manifest]], tmp_path: Path) -> Iterator[Server]:
    config = write_config(overlays["dev"], tmp_path / "config")
    with running(config, tmp_path / "store") as started:
        yield started


def admin_settings(server: Server, **layout: Any) -> NatsSettings:
    return NatsSettings(
        url=server.url,
        user=ADMIN,
        password=server.passwords[ADMIN],
        max_reconnect_attempts=1,
        **layout,
    )


@pytest.fixture
async def set_up(server: Server) -> Server:
    """The stream and the bucket, as the cdo-nats-bootstrap Job makes them."""
    await bootstrap(admin_settings(server))
    return server


def make_bus(server: Server, user: str, **settings: Any) -> EventBus:
    return EventBus(
        NatsSettings(
            url=server.url,
            user=user,
            password=server.passwords[user],
            max_reconnect_attempts=1,
            reconnect_wait_s=0.1,
            **settings,
        ),
        service=user,
        instance="test",
        metrics=Metrics(),
        tracer=TracerProvider().get_tracer("test"),
    )


@contextlib.asynccontextmanager
async def bus_for(server: Server, user: str, **settings: Any) -> AsyncIterator[EventBus]:
    bus = make_bus(server, user, **settings)
    await bus.connect()
    try:
        yield bus
    finally:
        await bus.stop_intake()
        await bus.close()


async def raw(server: Server, user: str, violations: Violations) -> Client:
    client: Client = await nats.connect(
        server.url,
        user=user,
        password=server.passwords[user],
        error_cb=violations.on_error,
        max_reconnect_attempts=1,
    )
    return client


def event_subjects() -> dict[str, tuple[str, str]]:
    """Per event type: its subject and its snapshot's KV subject."""
    found = {}
    for event in sample_events():
        template = type(event).snapshot_template
        assert template is not None
        kv = f"$KV.{BUCKET}.{template.render_for(event)}"
        found[type(event).__name__] = (event.subject(), kv)
    return found


@pytest.mark.parametrize("user", [*USERS, ADMIN])
async def test_each_user_publishes_only_its_own_subjects(server: Server, user: str) -> None:
    subjects = event_subjects()
    own = {s for name in OWN_EVENTS[user] for s in subjects[name]}
    everything = {s for pair in subjects.values() for s in pair}
    watcher_violations, violations = Violations(), Violations()
    watcher = await raw(server, "reader", watcher_violations)
    seen: list[str] = []

    async def collect(msg: Msg) -> None:
        seen.append(msg.subject)

    await watcher.subscribe("cdo.v1.>", cb=collect)
    await watcher.flush()
    client = await raw(server, user, violations)
    try:
        for subject in sorted(everything):
            await client.publish(subject, b"{}")
        await client.flush()
        denied = {subject.lower() for subject in everything - own}
        await wait_for(
            lambda: set(violations.subjects) >= denied,
            what=f"{user} refused: {violations.subjects}",
        )
        own_events = {s for s in own if s.startswith("cdo.")}
        await wait_for(lambda: set(seen) >= own_events, what=f"{user} delivered")
        assert set(violations.subjects) == denied
        assert set(seen) == own_events
        assert watcher_violations.subjects == []
    finally:
        await client.close()
        await watcher.close()


async def test_services_run_their_bus_code_within_their_rights(
    set_up: Server, caplog: pytest.LogCaptureFixture
) -> None:
    """Binding to the stream and the bucket, acknowledged events and snapshots, as each
    service does them (the two controllers read their snapshots back at start)."""
    server = set_up
    caplog.set_level(logging.WARNING, logger="cdo.bus")
    events = {type(e).__name__: e for e in sample_events()}
    for user in USERS[:-1]:
        async with bus_for(server, user) as bus:
            await bus.ensure_jetstream()
            for name in sorted(OWN_EVENTS[user]):
                await bus.publish(events[name])
            assert await bus.acknowledged(5.0)
            if user in ("domain-controller", "clique-allocator"):
                await bus.snapshots(">")
    assert [r.getMessage() for r in caplog.records] == []
    async with bus_for(server, "reader") as reader:
        await reader.ensure_jetstream()
        latest = await reader.snapshots(">")
        assert sorted(type(e).__name__ for e in latest) == sorted(
            {"DomainMembershipChanged", "CliqueCapacity", "NodeImexState", "NodeRecovered"}
        )
        history: list[Event] = []

        async def keep(delivery: Any) -> None:
            history.append(delivery.event)

        await reader.consume(keep)
        await wait_for(lambda: len(history) == 5, what="the reader replays the history")
    assert [r.getMessage() for r in caplog.records] == []


@pytest.mark.parametrize("user", [*USERS, ADMIN])
async def test_nobody_deletes_the_history(set_up: Server, user: str) -> None:
    server = set_up
    async with bus_for(server, "domain-controller") as owner:
        await owner.ensure_jetstream()
        await owner.publish(sample_events()[0])
    violations = Violations()
    client = await raw(server, user, violations)
    try:
        js = client.jetstream(timeout=0.5)
        for attempt in (
            js.purge_stream("CDO"),
            js.delete_stream("CDO"),
            js.delete_stream(f"KV_{BUCKET}"),
            js.delete_msg("CDO", 1),
        ):
            with pytest.raises((nats.errors.TimeoutError, nats.js.errors.Error)):
                await attempt
        info = await js.stream_info("CDO")
        assert info.state.messages == 1
    finally:
        await client.close()


@pytest.mark.parametrize("user", USERS)
async def test_only_the_nats_bootstrap_changes_the_stream(set_up: Server, user: str) -> None:
    """Every service's user and the reader are refused updating or creating a stream; the
    bootstrap's user changes the layout."""
    server = set_up
    violations = Violations()
    client = await raw(server, user, violations)
    try:
        js = client.jetstream(timeout=0.5)
        info = await js.stream_info("CDO")
        config = info.config
        config.max_msgs = 1
        with pytest.raises((nats.errors.TimeoutError, nats.js.errors.Error)):
            await js.update_stream(config)
        with pytest.raises((nats.errors.TimeoutError, nats.js.errors.Error)):
            await js.add_stream(name="STOLEN", subjects=["stolen.>"])
        await wait_for(lambda: len(violations.subjects) == 2, what="both refused")
        assert violations.subjects == ["$js.api.stream.update.cdo", "$js.api.stream.create.stolen"]
        assert (await js.stream_info("CDO")).config.max_msgs == -1
    finally:
        await client.close()
    done = await bootstrap(admin_settings(server, stream_max_age_s=3600.0))
    assert (done.stream, done.bucket) == ("updated", "kept")


async def test_prod_config_serves_tls(overlays: dict[str, list[Manifest]], tmp_path: Path) -> None:
    """The prod overlay's client TLS, with a certificate the bootstrap program issues. Prod
    authenticates through the auth callout (tests/integration/nats_auth): its one static user,
    the authenticator's, connects here over TLS, and a plain connection is refused."""
    bootstrap = load_bootstrap()
    now = dt.datetime.now(dt.UTC)
    ca = bootstrap.new_ca(now=now)
    leaf = bootstrap.issue(ca, names=["127.0.0.1", "cdo-nats"], client=True, now=now)
    certs = tmp_path / "tls"
    certs.mkdir()
    (certs / "tls.crt").write_bytes(leaf.cert)
    (certs / "tls.key").write_bytes(leaf.key)
    (certs / "ca.crt").write_bytes(ca.cert)
    config = write_config(overlays["prod"], tmp_path / "config", tls=certs)
    assert "auth_callout" in (config.parent / "auth.conf").read_text()
    # One server here: the three-server routes need the cluster's DNS names.
    (config.parent / "cluster.conf").write_text("# no routes in this test\n")
    issuer = Signer.generate(ACCOUNT).public_key
    with running(config, tmp_path / "store", extra_env={"NATS_AUTH_ISSUER": issuer}) as started:
        tls_url = started.url.replace("nats://", "tls://")
        context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        client = await nats.connect(
            tls_url,
            user=CALLOUT_USER,
            password=started.passwords[CALLOUT_USER],
            tls=context,
            max_reconnect_attempts=0,
            allow_reconnect=False,
            connect_timeout=2,
        )
        try:
            assert client.is_connected
            await client.flush()
        finally:
            await client.close()
        with pytest.raises((nats.errors.NoServersError, OSError, asyncio.TimeoutError)):
            await nats.connect(
                started.url,
                user=CALLOUT_USER,
                password=started.passwords[CALLOUT_USER],
                max_reconnect_attempts=0,
                allow_reconnect=False,
                connect_timeout=1,
            )
