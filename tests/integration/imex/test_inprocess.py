"""Many simulated IMEX daemons in one event loop, over real TCP between loopback addresses."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from sim.imex import (
    ConnectionState,
    DomainState,
    DomainView,
    Endpoint,
    ImexConfig,
    ImexDaemon,
    ImexStartError,
    RefusalReason,
    Resolver,
    Timing,
    parse_config,
    query_domain,
    query_status,
    render_json,
)
from sim.imex.protocol import StatusReply, StatusRequest, read_command_message, write_message
from tests.integration.imex.cluster import free_port, loopback_subnet
from tests.integration.imex.pki import Authority
from tests.support.wait import wait_for


def write_domain(
    root: Path,
    addresses: Sequence[str],
    *,
    entries: Sequence[str] | None = None,
    extra: dict[str, str] | None = None,
) -> list[ImexConfig]:
    """Config files for one daemon per address, all listing ``entries`` (default: addresses)."""
    root.mkdir(parents=True, exist_ok=True)
    peer_port, cmd_port = free_port(), free_port()
    nodes_file = root / "nodes_config.cfg"
    nodes_file.write_text("".join(f"{entry}\n" for entry in entries or addresses))
    configs: list[ImexConfig] = []
    for index, address in enumerate(addresses):
        settings = {
            "DAEMONIZE": "0",
            "BIND_INTERFACE_IP": address,
            "SERVER_PORT": str(peer_port),
            "IMEX_NODE_CONFIG_FILE": str(nodes_file),
            "IMEX_CMD_ENABLED": "1",
            "IMEX_CMD_BIND_INTERFACE_IP": address,
            "IMEX_CMD_PORT": str(cmd_port),
            **(extra or {}),
        }
        path = root / f"config{index}.cfg"
        path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        configs.append(parse_config(path.read_text(), source=path))
    return configs


@contextlib.asynccontextmanager
async def started(daemons: Sequence[ImexDaemon]) -> AsyncIterator[Sequence[ImexDaemon]]:
    try:
        for daemon in daemons:
            await daemon.start()
        yield daemons
    finally:
        for daemon in daemons:
            await daemon.stop()


async def domain_is(config: ImexConfig, state: DomainState, **kwargs: object) -> DomainView:
    async def probe() -> DomainView | None:
        view = await query_domain(config, **kwargs)  # type: ignore[arg-type]
        return view if view.status is state else None

    return await wait_for(probe, what=f"domain {state}")


def cell(view: DomainView, row: int, column: int) -> ConnectionState:
    return view.nodes[row].connections[column].status


async def test_many_daemons_share_one_event_loop(tmp_path: Path) -> None:
    subnet = loopback_subnet()
    addresses = [f"{subnet}.{index + 1}" for index in range(12)]
    configs = write_domain(tmp_path, addresses)

    async with started([ImexDaemon(config) for config in configs]) as daemons:
        view = await domain_is(configs[0], DomainState.UP)
        assert len(view.nodes) == 12
        assert all(
            cell(view, r, c) is ConnectionState.CONNECTED for r in range(12) for c in range(12)
        )
        assert (await query_domain(configs[11])).status is DomainState.UP

        await daemons[5].kill()  # a crash: no goodbye
        await daemons[6].stop()  # a clean stop: goodbye

        async def settled() -> DomainView | None:
            view = await query_domain(configs[0])
            lost = (cell(view, 0, 5), cell(view, 0, 6))
            return (
                view if lost == (ConnectionState.RECOVERING, ConnectionState.DISCONNECTED) else None
            )

        view = await wait_for(settled, what="crash and clean stop told apart")
        assert view.status is DomainState.DEGRADED
        assert view.nodes[5].status.value == "UNAVAILABLE"


async def test_a_stalled_event_loop_is_not_taken_for_silent_peers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    subnet = loopback_subnet()
    configs = write_domain(tmp_path, [f"{subnet}.{index + 1}" for index in range(3)])
    timing = Timing(heartbeat_interval=0.2, heartbeat_timeout=0.6)

    async with started([ImexDaemon(config, timing=timing) for config in configs]):
        await domain_is(configs[0], DomainState.UP)
        caplog.set_level(logging.WARNING, logger="sim.imex")
        # The stall itself is the fault: one callback holds the loop every daemon shares for
        # longer than the heartbeat timeout, as a busy node host does on a loaded machine.
        time.sleep(3 * timing.heartbeat_timeout)  # noqa: ASYNC251
        view = await domain_is(configs[0], DomainState.UP)

    assert all(cell(view, r, c) is ConnectionState.CONNECTED for r in range(3) for c in range(3))
    assert not [r.message for r in caplog.records if "lost connection" in r.message]


@pytest.mark.parametrize(("grace", "final"), [("0", "DISCONNECTED"), ("1", "DISCONNECTED")])
async def test_the_grace_time_decides_when_a_lost_peer_is_cleaned_up(
    tmp_path: Path, grace: str, final: str
) -> None:
    subnet = loopback_subnet()
    configs = write_domain(
        tmp_path,
        [f"{subnet}.1", f"{subnet}.2"],
        extra={"IMEX_NODE_DISCONNECTED_GRACE_TIME": grace},
    )
    async with started([ImexDaemon(config) for config in configs]) as daemons:
        await domain_is(configs[0], DomainState.UP)

        await daemons[1].kill()

        def link_state() -> ConnectionState | None:
            state = daemons[0].status().connections[1].status
            return None if state is ConnectionState.CONNECTED else state

        first = await wait_for(link_state, what="link lost")
        assert first.value == ("DISCONNECTED" if grace == "0" else "RECOVERING")
        await wait_for(
            lambda: daemons[0].status().connections[1].status.value == final,
            timeout=5.0,
            what=f"{final} after the grace time",
        )


async def test_mutual_tls_admits_only_certificates_of_the_domain_ca(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    subnet = loopback_subnet()
    addresses = [f"{subnet}.1", f"{subnet}.2", f"{subnet}.3"]
    domain_ca = Authority(tmp_path / "pki", "imex-domain")
    intruder_ca = Authority(tmp_path / "intruder", "someone-else")
    configs = write_domain(tmp_path, addresses)

    def with_tls(config: ImexConfig, ca: Authority, source: str = "FILE") -> ImexConfig:
        key, cert = ca.issue(config.bind_interface_ip)
        lines = {
            "IMEX_ENABLE_AUTH_ENCRYPTION": "1",
            "IMEX_AUTH_SOURCE": source,
            "IMEX_SERVER_KEY": str(key),
            "IMEX_SERVER_CERT": str(cert),
            "IMEX_SERVER_CERT_AUTH": str(ca.cert_path),
            "IMEX_CLIENT_KEY": str(key),
            "IMEX_CLIENT_CERT": str(cert),
            "IMEX_CLIENT_CERT_AUTH": str(ca.cert_path),
        }
        if source == "ENV_VAL":
            # The values name environment variables that hold the PEM text itself.
            for name, path in list(lines.items())[2:]:
                variable = f"NODE2_{name}"
                monkeypatch.setenv(variable, Path(path).read_text())
                lines[name] = variable
        assert config.source is not None
        text = config.source.read_text() + "".join(f"{k}={v}\n" for k, v in lines.items())
        return parse_config(text, source=config.source)

    configs = [
        with_tls(configs[0], domain_ca),
        with_tls(configs[1], domain_ca, source="ENV_VAL"),
        with_tls(configs[2], intruder_ca),
    ]
    async with started([ImexDaemon(config) for config in configs]) as daemons:

        def intruder_refused() -> bool:
            links = daemons[0].status().connections
            return (
                links[1].status is ConnectionState.CONNECTED
                and links[2].refused is RefusalReason.AUTHENTICATION_FAILED
                and daemons[2].status().connections[0].refused
                is RefusalReason.AUTHENTICATION_FAILED
            )

        verdict = await wait_for(intruder_refused, what="TLS verdicts")
        assert verdict
        view = await query_domain(configs[0])
        assert cell(view, 0, 1) is cell(view, 1, 0) is ConnectionState.CONNECTED
        assert cell(view, 0, 2) is ConnectionState.NEVER_CONNECTED
        assert view.status is DomainState.DEGRADED


async def test_a_node_replaced_behind_a_stable_hostname(tmp_path: Path) -> None:
    subnet = loopback_subnet()
    names = ["tray-0", "tray-1", "tray-2"]
    hosts = tmp_path / "hosts"
    hosts.write_text(f"{subnet}.1 tray-0\n{subnet}.2 tray-1\n{subnet}.3 tray-2\n")
    addresses = [f"{subnet}.1", f"{subnet}.2", f"{subnet}.3"]
    configs = write_domain(tmp_path, addresses, entries=names)
    resolver = Resolver(hosts)
    daemons = [ImexDaemon(config, resolver=resolver) for config in configs]

    async with started(daemons[:2]):
        await daemons[2].start()
        view = await domain_is(configs[0], DomainState.UP, resolver=resolver)
        assert '"hostName": "tray-2"' in render_json(view, hostnames=True)
        survivors = [daemon.instance for daemon in daemons[:2]]

        # tray-2 fails and comes back on a new address; only the hosts file changes.
        await daemons[2].kill()
        hosts.write_text(f"{subnet}.1 tray-0\n{subnet}.2 tray-1\n{subnet}.9 tray-2\n")
        replacement_config = write_domain(tmp_path / "replacement", [f"{subnet}.9"], entries=names)[
            0
        ]
        replacement_config = parse_config(
            replacement_config.source.read_text()  # type: ignore[union-attr]
            .replace(str(replacement_config.server_port), str(configs[0].server_port))
            .replace(str(replacement_config.cmd_port), str(configs[0].cmd_port)),
            source=replacement_config.source,  # type: ignore[arg-type]
        )
        async with started([ImexDaemon(replacement_config, resolver=resolver)]):
            for daemon in daemons[:2]:
                assert daemon.request_reconnect()  # what SIGUSR1 asks for
            view = await domain_is(configs[0], DomainState.UP, resolver=resolver)
            assert view.nodes[2].host == f"{subnet}.9"
            assert [daemon.instance for daemon in daemons[:2]] == survivors


async def test_a_repeated_reconnect_request_within_the_interval_is_ignored(
    tmp_path: Path,
) -> None:
    subnet = loopback_subnet()
    configs = write_domain(tmp_path, [f"{subnet}.1"])
    daemon = ImexDaemon(configs[0], timing=Timing(reconnect_min_interval=60.0))
    async with started([daemon]):
        assert daemon.request_reconnect()
        assert not daemon.request_reconnect()


async def test_the_command_service_can_listen_on_a_unix_socket(tmp_path: Path) -> None:
    subnet = loopback_subnet()
    path = tmp_path / "imex-cmd.sock"
    configs = write_domain(
        tmp_path, [f"{subnet}.1"], extra={"IMEX_CMD_UNIX_DOMAIN_PATH": str(path)}
    )
    async with started([ImexDaemon(configs[0])]):
        status = await query_status(Endpoint(unix_path=str(path)))
        assert status.state.value == "READY"
    assert not path.exists()


async def test_a_failed_start_leaves_nothing_bound(tmp_path: Path) -> None:
    subnet = loopback_subnet()
    first = write_domain(tmp_path / "a", [f"{subnet}.1"])[0]
    # Same peer address and port, its own command port: the command service binds, the peer
    # listener does not, and the command port must be released again.
    clash = write_domain(tmp_path / "b", [f"{subnet}.1"])[0]
    assert clash.source is not None
    clash = parse_config(
        clash.source.read_text().replace(
            f"SERVER_PORT={clash.server_port}", f"SERVER_PORT={first.server_port}"
        ),
        source=clash.source,
    )
    async with started([ImexDaemon(first)]):
        with pytest.raises(ImexStartError, match="cannot listen for peers"):
            await ImexDaemon(clash).start()

    with socket.socket() as probe:
        probe.bind((clash.cmd_bind_interface_ip, clash.cmd_port))


def assert_free(address: str, port: int) -> None:
    with socket.socket() as probe:
        probe.bind((address, port))  # EADDRINUSE while a listener of the daemon is left open


async def test_a_start_cancelled_at_any_point_leaves_nothing_bound(tmp_path: Path) -> None:
    """A node's services stopped while its agent starts the daemon cancel the start: wherever
    it is, no listener may outlive it (asyncio's start_server yields once it listens)."""
    subnet = loopback_subnet()
    config = write_domain(tmp_path, [f"{subnet}.1"])[0]
    steps = 0
    while True:
        daemon = ImexDaemon(config)
        start = asyncio.create_task(daemon.start())
        for _ in range(steps):
            await asyncio.sleep(0)
        if start.done():
            await start
            await daemon.stop()
            break
        start.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await start
        assert_free(config.cmd_bind_interface_ip, config.cmd_port)
        assert_free(config.bind_interface_ip, config.server_port)
        steps += 1
    assert steps >= 2  # the start yielded in both listeners at least


async def test_a_stopped_daemon_closes_the_connections_it_accepted(tmp_path: Path) -> None:
    """Stopping ends the daemon's connections as the end of its process would, also a command
    client's that sends nothing and never closes."""
    subnet = loopback_subnet()
    config = write_domain(tmp_path, [f"{subnet}.1"])[0]
    daemon = ImexDaemon(config)
    async with started([daemon]):
        reader, writer = await asyncio.open_connection(
            config.cmd_bind_interface_ip, config.cmd_port
        )
        write_message(writer, StatusRequest())
        await writer.drain()
        assert isinstance(await read_command_message(reader), StatusReply)  # being served
    try:
        async with asyncio.timeout(5):
            assert await reader.read() == b""  # end of stream: the daemon closed it
    finally:
        writer.close()
