"""``ImexDaemon``: one simulated ``nvidia-imex``, as an asyncio object.

The process shell (``python -m sim.imex.daemon``) is a thin wrapper around this class, and a
large simulation can host hundreds of them in one event loop. Each daemon

- listens for peers on BIND_INTERFACE_IP:SERVER_PORT (every simulated node has its own address
  on 127.0.0.0/8, so all of them can share one port number, as real nodes do);
- keeps one outgoing connection to every other node of its map, whose handshake compares
  node-map digests and refuses a mismatch, and whose heartbeats notice a hung peer;
- answers the command service on IMEX_CMD_BIND_INTERFACE_IP:IMEX_CMD_PORT (and/or
  IMEX_CMD_UNIX_DOMAIN_PATH) for ``nvidia-imex-ctl``;
- keeps every peer's node-map entry (a hostname, say) as the target of its link and resolves it
  again on every connection attempt, as the real daemon's reconnect loop does (500 ms, backing
  off to 3 s): a name that starts resolving is picked up without a signal, and one that does not
  resolve, or resolves to an address nobody serves, is simply a peer that is down;
- on ``request_reconnect`` (SIGUSR1) reloads its TLS credentials and restarts its outgoing
  connections (which resolve their names again), at most once per 5 s. Like the real daemon it
  reads nodes_config only at start: a map changed on disk is reported in the log and not used;
- on ``stop`` (SIGTERM) says goodbye to every peer.

Usage::

    daemon = ImexDaemon(load_config("config.cfg"))
    await daemon.start()          # raises ImexConfigError / ImexStartError
    daemon.state, daemon.status() # READY, NodeStatus(...)
    await daemon.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal

import msgspec

from sim.imex.config import ImexConfig, unknown_key_warning
from sim.imex.errors import ImexConfigError, ImexStartError
from sim.imex.logbook import DaemonLog
from sim.imex.nodemap import NodeMap, Resolver, is_address, load_node_map
from sim.imex.protocol import (
    PING_LINE,
    PROTOCOL_VERSION,
    STREAM_LIMIT,
    ConnectionStatus,
    ErrorReply,
    Goodbye,
    Hello,
    NodeStatus,
    Refuse,
    StatusReply,
    StatusRequest,
    Welcome,
    read_command_message,
    read_peer_message,
    write_message,
)
from sim.imex.states import (
    ConnectionState,
    DaemonState,
    LinkHistory,
    RefusalReason,
    connection_state,
)
from sim.imex.tls import TlsContexts, load_tls

__all__ = ["DEFAULT_VERSION", "ImexDaemon", "Timing"]

# What the daemon reports as its version in ``-N -j``; the real one reports the driver version.
DEFAULT_VERSION = "580.95.05"


class Timing(msgspec.Struct, frozen=True, kw_only=True):
    """How fast the daemon notices failures and retries. Defaults suit loopback simulations."""

    # A peer whose pings stop for heartbeat_timeout is treated as lost (a hung process keeps
    # its sockets open, so end-of-stream alone would never tell).
    heartbeat_interval: float = 0.5
    heartbeat_timeout: float = 1.5
    connect_timeout: float = 1.0
    # The real daemon's per-peer reconnect loop: 500 ms, doubling up to 3 s.
    reconnect_initial: float = 0.5
    reconnect_max: float = 3.0
    # A refused handshake will not succeed until somebody fixes a node map; no need to hurry.
    refused_retry: float = 1.0
    # The real daemon processes SIGUSR1 at most once per 5 s and ignores the rest.
    reconnect_min_interval: float = 5.0


_Command = Literal["reload", "stop"]
_PING_BACKLOG_LIMIT = 64 * 1024


class ImexDaemon:
    """One simulated IMEX daemon. Start with ``start()``, end with ``stop()``."""

    def __init__(
        self,
        config: ImexConfig,
        *,
        resolver: Resolver | None = None,
        hostname: str | None = None,
        version: str = DEFAULT_VERSION,
        timing: Timing | None = None,
        log: DaemonLog | None = None,
        server_port: int | None = None,
    ) -> None:
        self.config = config
        self._resolver = resolver or Resolver.from_environment()
        self._hostname_override = hostname
        self.version = version
        self.timing = timing or Timing()
        self._log = log
        self._port = config.server_port if server_port is None else server_port
        self.instance = uuid.uuid4().hex
        self.state = DaemonState.INITIALIZING

        self._map: NodeMap | None = None
        self._index = -1
        self._address = ""
        self._addresses: dict[str, str | None] = {}
        self._history: dict[str, LinkHistory] = {}
        self._refused_incoming: dict[str, RefusalReason] = {}
        self._tls: TlsContexts | None = None

        self._peer_server: asyncio.Server | None = None
        self._command_servers: list[asyncio.Server] = []
        self._links: dict[str, asyncio.Task[None]] = {}
        self._outgoing: dict[str, asyncio.StreamWriter] = {}
        self._incoming: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        # Every connection a listener accepted (peers and commands), from the moment asyncio
        # made it: its handler task may not have started yet when the daemon stops.
        self._accepted: set[asyncio.StreamWriter] = set()
        self._commands: asyncio.Queue[_Command] = asyncio.Queue()
        self._group: asyncio.TaskGroup | None = None
        self._main: asyncio.Task[None] | None = None
        self._last_reconnect: float | None = None
        self._stopped = asyncio.Event()

    # -- public surface -------------------------------------------------------------------

    @property
    def log(self) -> DaemonLog:
        if self._log is None:
            self._log = DaemonLog.open(self.config, name=self._log_name(), fallback="logging")
        return self._log

    @property
    def address(self) -> str:
        """The address this daemon serves peers on (known once started)."""
        return self._address

    @property
    def index(self) -> int:
        """This daemon's position in its node map (known once started)."""
        return self._index

    @property
    def node_map(self) -> NodeMap | None:
        return self._map

    @property
    def hostname(self) -> str:
        if self._hostname_override:
            return self._hostname_override
        if self._map is not None and 0 <= self._index < len(self._map):
            entry = self._map.entries[self._index]
            if not is_address(entry):
                return entry
        return socket.gethostname()

    @property
    def command_address(self) -> tuple[str, int] | None:
        """The TCP address and port its command service answers on, while it listens."""
        if not self._command_servers:
            return None
        return self.config.cmd_bind_interface_ip or self._address, self.config.cmd_port

    async def start(self) -> None:
        """Load the node map, bind the listeners and start connecting to peers.

        Returns once the daemon is READY; raises ImexConfigError or ImexStartError (and leaves
        nothing bound) when it cannot start.
        """
        if self._main is not None:
            raise RuntimeError("ImexDaemon.start() called twice")
        try:
            await self._initialize()
        except BaseException:
            await self._close_listeners()
            self.log.close()
            raise
        self._main = asyncio.create_task(self._run(), name=f"imex-daemon-{self._address}")
        self.state = DaemonState.READY
        self.log.info(f"IMEX daemon is READY as node #{self._index} ({self._address})")

    async def stop(self) -> None:
        """Shut down cleanly: tell every peer, close every connection, wait for the tasks."""
        await self._shutdown(graceful=True)

    async def kill(self) -> None:
        """Stop the way a crash or a power loss would: no goodbye, every connection reset.

        Peers see the link drop and keep it RECOVERING for the disconnected grace time, which
        is what distinguishes a failed node from one that was stopped.
        """
        await self._shutdown(graceful=False)

    async def _shutdown(self, *, graceful: bool) -> None:
        if self._main is None:
            return
        if self.state is not DaemonState.SHUTTING_DOWN:
            self.state = DaemonState.SHUTTING_DOWN
            if graceful:
                self.log.info("shutting down: notifying peers")
                await self._say_goodbye()
            else:
                for writer in [*self._outgoing.values(), *self._incoming.values()]:
                    writer.transport.abort()
            if self._peer_server is not None:
                self._peer_server.close()
            self._commands.put_nowait("stop")
        try:
            await self._main
        finally:
            await self._close_listeners()
            await self._close_incoming()
            self._close_accepted(abort=not graceful)
            if not self._stopped.is_set():
                self._stopped.set()
                self.log.info("IMEX daemon stopped" if graceful else "IMEX daemon killed")
                if graceful:
                    self.log.dump_verbose()
                self.log.close()

    async def wait(self) -> None:
        """Block until the daemon has stopped (re-raising what made it stop, if anything)."""
        await self._stopped.wait()
        if self._main is not None and self._main.done() and not self._main.cancelled():
            self._main.result()

    async def __aenter__(self) -> ImexDaemon:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def request_reconnect(self) -> bool:
        """What SIGUSR1 does; False when ignored for coming within 5 s of the last one."""
        now = time.monotonic()
        last = self._last_reconnect
        if last is not None and now - last < self.timing.reconnect_min_interval:
            self.log.warning(
                f"SIGUSR1 ignored: the previous one was processed {now - last:.1f} s ago "
                f"(at most one per {self.timing.reconnect_min_interval:g} s)"
            )
            return False
        self._last_reconnect = now
        self._commands.put_nowait("reload")
        return True

    def dump_verbose_log(self) -> int:
        """What SIGHUP does: write the buffered below-LOG_LEVEL records to the log."""
        return self.log.dump_verbose()

    def status(self) -> NodeStatus:
        """This daemon's report to ``nvidia-imex-ctl``: its state and its view of every link."""
        now = time.monotonic()
        connections: list[ConnectionStatus] = []
        entries = self._map.entries if self._map is not None else ()
        for index, entry in enumerate(entries):
            if index == self._index:
                connections.append(
                    ConnectionStatus(
                        index=index, host=self._address, status=ConnectionState.CONNECTED
                    )
                )
                continue
            host = self._addresses.get(entry)
            history = self._history.get(entry, LinkHistory())
            refused = history.refused
            if refused is None and host is not None:
                refused = self._refused_incoming.get(host)
            connections.append(
                ConnectionStatus(
                    index=index,
                    host=host,
                    status=connection_state(
                        history, grace_time=self.config.node_disconnected_grace_time, now=now
                    ),
                    refused=refused,
                )
            )
        return NodeStatus(
            state=self.state,
            index=self._index,
            host=self._address,
            hostname=self.hostname,
            version=self.version,
            pid=os.getpid(),
            instance=self.instance,
            node_map_digest=self._map.digest if self._map is not None else "",
            connections=tuple(connections),
        )

    # -- start-up -------------------------------------------------------------------------

    def _log_name(self) -> str:
        return self.config.bind_interface_ip or str(id(self))

    async def _initialize(self) -> None:
        config = self.config
        for key in config.ignored_keys:
            self.log.warning(unknown_key_warning(key))
        self._map = load_node_map(config.node_config_file)
        resolved = await self._resolver.resolve_all(self._map)
        self._addresses = dict(zip(self._map.entries, resolved, strict=True))
        self._address, self._index = _locate_self(
            self._map, resolved, config.bind_interface_ip, source=config.node_config_file
        )
        self.log.info(
            f"node map {self._map.digest} from {config.node_config_file}: "
            f"{len(self._map)} nodes, this is node #{self._index} ({self._address})"
        )
        await self._start_command_service()
        if config.enable_auth_encryption:
            self.state = DaemonState.STARTING_AUTH_SERVER
            self._tls = load_tls(config)
            self.log.info("TLS credentials loaded; peer connections use mutual TLS")
        await self._start_peer_server()

    async def _start_command_service(self) -> None:
        config = self.config
        if not config.cmd_enabled:
            return
        try:
            if config.cmd_unix_domain_path:
                path = Path(config.cmd_unix_domain_path)
                # A stale socket file from a killed daemon would make the bind fail.
                _remove_file(path)
                server = await asyncio.start_unix_server(
                    self._accept(self._serve_command),
                    path=str(path),
                    limit=STREAM_LIMIT,
                    start_serving=False,
                )
                self._command_servers.append(server)
                await server.start_serving()
            # An empty IMEX_CMD_BIND_INTERFACE_IP binds every interface, as documented.
            host = config.cmd_bind_interface_ip or None
            server = await asyncio.start_server(
                self._accept(self._serve_command),
                host=host,
                port=config.cmd_port,
                limit=STREAM_LIMIT,
                start_serving=False,
            )
            self._command_servers.append(server)
            await server.start_serving()
        except OSError as exc:
            where = f"{config.cmd_bind_interface_ip or '*'}:{config.cmd_port}"
            raise ImexStartError(
                f"cannot start the command service on {where}: {_why(exc)}"
            ) from exc
        self.log.info(f"command service listening on {_listening(self._command_servers)}")

    async def _start_peer_server(self) -> None:
        try:
            self._peer_server = await asyncio.start_server(
                self._accept(self._serve_peer),
                host=self._address,
                port=self._port,
                ssl=self._tls.server if self._tls else None,
                limit=STREAM_LIMIT,
                start_serving=False,
            )
            await self._peer_server.start_serving()
        except OSError as exc:
            raise ImexStartError(
                f"cannot listen for peers on {self._address}:{self._port}: {_why(exc)}"
            ) from exc
        self.log.info(f"listening for peers on {self._address}:{self._port}")

    # A listener is created without serving and kept before it starts serving: asyncio's
    # start_server yields once after it began to listen, and a start cancelled there would lose
    # a listening socket that nothing closes any more.

    def _accept(
        self, serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
    ) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
        """A listener's callback: keeps each connection as asyncio makes it, then serves it."""

        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Awaitable[None]:
            if self.state is DaemonState.SHUTTING_DOWN:
                # Accepted as the daemon stops, possibly after it closed what it had accepted:
                # closed here, since the handler's task may never run before the loop ends.
                writer.close()
            else:
                self._accepted.add(writer)
            return self._served(serve, reader, writer)

        return accepted

    async def _served(
        self,
        serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        try:
            if self.state is not DaemonState.SHUTTING_DOWN:
                await serve(reader, writer)
        finally:
            self._accepted.discard(writer)
            writer.close()

    def _close_accepted(self, *, abort: bool) -> None:
        """Close every connection still open once the listeners are closed, as the end of a
        process closes its sockets (a killed one resets them): a command client that keeps its
        connection, or one accepted as the daemon stopped whose handler never ran."""
        accepted, self._accepted = self._accepted, set()
        for writer in accepted:
            if abort:
                writer.transport.abort()
            else:
                writer.close()

    async def _close_listeners(self) -> None:
        servers = [*self._command_servers]
        if self._peer_server is not None:
            servers.append(self._peer_server)
        for server in servers:
            server.close()
        for server in servers:
            await server.wait_closed()
        self._command_servers.clear()
        self._peer_server = None
        if self.config.cmd_enabled and self.config.cmd_unix_domain_path:
            _remove_file(Path(self.config.cmd_unix_domain_path))

    # -- supervision ----------------------------------------------------------------------

    async def _run(self) -> None:
        """Own every outgoing link task; apply reload requests until asked to stop."""
        async with asyncio.TaskGroup() as group:
            self._group = group
            self._spawn_links()
            while await self._commands.get() != "stop":
                await self._reload()
            await self._cancel_links()
        self._group = None

    def _spawn_links(self) -> None:
        assert self._group is not None
        assert self._map is not None
        for index, entry in enumerate(self._map.entries):
            if index != self._index:
                self._links[entry] = self._group.create_task(
                    self._link(index, entry), name=f"imex-link-{self._address}-{entry}"
                )

    async def _cancel_links(self) -> None:
        tasks = set(self._links.values())
        self._links.clear()
        # Cancelled until they are gone: a cancellation that lands in library code at the
        # wrong moment can be absorbed, and a lingering link would keep the old node map.
        while tasks:
            for task in tasks:
                task.cancel()
            _done, tasks = await asyncio.wait(tasks, timeout=self.timing.connect_timeout)

    async def _reload(self) -> None:
        self.log.info("SIGUSR1: restarting outgoing connections (names are resolved again)")
        if self._tls is not None:
            try:
                self._tls = load_tls(self.config)
            except ImexStartError as exc:
                # Documented: when the credentials do not reload, nothing else happens.
                self.log.error(f"{exc}; keeping the current credentials and connections")
                return
        self._warn_if_node_map_changed()
        await self._cancel_links()
        if self._tls is not None and self._peer_server is not None:
            self._peer_server.close()
            await self._peer_server.wait_closed()
            await self._start_peer_server()
        self._spawn_links()

    def _warn_if_node_map_changed(self) -> None:
        """Say so when nodes_config on disk is no longer the map this daemon started with."""
        assert self._map is not None
        try:
            on_disk = load_node_map(self.config.node_config_file)
        except ImexConfigError as exc:
            self.log.warning(f"{exc}; the daemon keeps the node map it started with")
            return
        if on_disk.digest != self._map.digest:
            self.log.warning(
                f"{self.config.node_config_file} changed on disk ({self._map.digest} -> "
                f"{on_disk.digest}); IMEX reads the node map only at start: this daemon keeps "
                "the one it started with until it is restarted"
            )

    async def _say_goodbye(self) -> None:
        writers = [*self._outgoing.values(), *self._incoming.values()]
        for writer in writers:
            with contextlib.suppress(OSError, RuntimeError):
                write_message(writer, Goodbye(instance=self.instance))
        for writer in writers:
            with contextlib.suppress(OSError, RuntimeError):
                async with asyncio.timeout(self.timing.connect_timeout):
                    await writer.drain()

    async def _close_incoming(self) -> None:
        """End every incoming connection by closing it; its handler then sees end-of-stream."""
        handlers = list(self._incoming.items())
        for _task, writer in handlers:
            writer.close()
        tasks = [task for task, _writer in handlers]
        if not tasks:
            return
        _done, pending = await asyncio.wait(tasks, timeout=self.timing.connect_timeout)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    # -- outgoing links (this daemon's view of each peer) ---------------------------------

    def _set_history(self, entry: str, history: LinkHistory) -> None:
        self._history[entry] = history

    def _peer_name(self, index: int, entry: str) -> str:
        address = self._addresses.get(entry)
        if address in (None, entry):
            return f"node #{index} ({entry})"
        return f"node #{index} ({entry} = {address})"

    async def _link(self, index: int, entry: str) -> None:
        """Keep one outgoing connection to the peer ``entry`` up, for as long as it runs."""
        delay = self.timing.reconnect_initial
        while self.state is not DaemonState.SHUTTING_DOWN:
            # Re-resolved on every attempt, as gRPC's DNS resolver does after a failure.
            address = await self._resolver.resolve(entry)
            self._addresses[entry] = address
            outcome: Literal["lost", "refused", "failed"] = "failed"
            if address is None:
                self.log.debug(f"{self._peer_name(index, entry)}: name does not resolve")
            else:
                outcome = await self._attempt(index, entry, address)
            self._maybe_expire_grace(index, entry)
            if outcome == "lost":
                delay = self.timing.reconnect_initial
            elif outcome == "refused":
                delay = self.timing.refused_retry
            await asyncio.sleep(delay)
            if outcome == "failed":
                delay = min(delay * 2, self.timing.reconnect_max)

    async def _attempt(
        self, index: int, entry: str, address: str
    ) -> Literal["lost", "refused", "failed"]:
        history = self._history.get(entry, LinkHistory())
        tls = self._tls
        try:
            async with asyncio.timeout(self.timing.connect_timeout):
                reader, writer = await asyncio.open_connection(
                    address,
                    self._port,
                    local_addr=(self._address, 0),
                    ssl=tls.client if tls else None,
                    server_hostname=(tls.target_override or address) if tls else None,
                    limit=STREAM_LIMIT,
                )
        except ssl.SSLError as exc:
            self._refuse_tls(index, entry, exc)
            return "refused"
        except (OSError, TimeoutError) as exc:
            self.log.debug(f"{self._peer_name(index, entry)}: connect failed: {exc}")
            self._set_history(entry, history.lost(time.monotonic()))
            return "failed"
        self._outgoing[entry] = writer
        try:
            return await self._session(index, entry, reader, writer)
        except ssl.SSLError as exc:
            # With TLS 1.3 a rejected client certificate surfaces on the first read.
            self._refuse_tls(index, entry, exc)
            return "refused"
        except (OSError, TimeoutError, msgspec.DecodeError) as exc:
            self.log.debug(f"{self._peer_name(index, entry)}: connection error: {exc!r}")
            return self._lose(index, entry)
        finally:
            self._outgoing.pop(entry, None)
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError, TimeoutError):
                async with asyncio.timeout(self.timing.connect_timeout):
                    await writer.wait_closed()

    def _refuse_tls(self, index: int, entry: str, exc: ssl.SSLError) -> None:
        history = self._history.get(entry, LinkHistory())
        # Retried every second until credentials change; said once, not every time.
        if history.refused is not RefusalReason.AUTHENTICATION_FAILED:
            self.log.warning(f"{self._peer_name(index, entry)}: TLS handshake failed: {exc}")
        self._set_history(
            entry, history.refused_by(RefusalReason.AUTHENTICATION_FAILED, time.monotonic())
        )

    def _lose(self, index: int, entry: str) -> Literal["lost", "failed"]:
        history = self._history.get(entry, LinkHistory())
        if not history.connected:
            self._set_history(entry, history.lost(time.monotonic()))
            return "failed"
        if self.state is not DaemonState.SHUTTING_DOWN:
            self.log.warning(f"lost connection to {self._peer_name(index, entry)}")
        self._set_history(entry, history.lost(time.monotonic()))
        return "lost"

    async def _session(
        self,
        index: int,
        entry: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> Literal["lost", "refused", "failed"]:
        assert self._map is not None
        write_message(
            writer,
            Hello(
                protocol=PROTOCOL_VERSION,
                digest=self._map.digest,
                index=self._index,
                host=self._address,
                instance=self.instance,
            ),
        )
        await writer.drain()
        async with asyncio.timeout(self.timing.connect_timeout):
            reply = await read_peer_message(reader)
        history = self._history.get(entry, LinkHistory())
        now = time.monotonic()
        if isinstance(reply, Refuse):
            if history.refused is not reply.reason:
                self.log.warning(
                    f"{self._peer_name(index, entry)} refused this node: {reply.detail}"
                )
            self._set_history(entry, history.refused_by(reply.reason, now))
            return "refused"
        if not isinstance(reply, Welcome):
            return self._lose(index, entry)
        if history.peer_instance is not None and history.peer_instance != reply.instance:
            self.log.info(
                f"{self._peer_name(index, entry)} is a new instance (restarted); "
                "cleaning up what the old one held"
            )
        self._set_history(entry, history.connected_to(reply.instance))
        self.log.info(f"connected to {self._peer_name(index, entry)}")
        return await self._watch(index, entry, reader)

    async def _watch(
        self, index: int, entry: str, reader: asyncio.StreamReader
    ) -> Literal["lost", "refused", "failed"]:
        """Follow an established link until it ends; the peer pings it while it is alive."""
        excused = False
        while True:
            # asyncio.timeout, not wait_for, here and throughout: no task per message (which
            # matters with thousands of links in one loop), and on Python 3.11 wait_for can
            # swallow a cancellation that races with its result, leaving a link task that
            # ignores SIGUSR1's restart.
            heartbeat = asyncio.timeout(self.timing.heartbeat_timeout)
            try:
                async with heartbeat:
                    message = await read_peer_message(reader)
            except TimeoutError:
                # One late timeout in a row is forgiven (the loop stalled; the pings may be
                # waiting in the buffer); a second means the peer is silent, busy loop or not.
                if not excused and self._loop_stalled(heartbeat):
                    excused = True
                    continue
                raise
            excused = False
            if message is None:
                return self._lose(index, entry)
            if isinstance(message, Goodbye):
                self.log.info(f"{self._peer_name(index, entry)} is shutting down; cleaned up")
                history = self._history.get(entry, LinkHistory())
                self._set_history(entry, history.peer_shut_down(time.monotonic()))
                return "lost"

    def _loop_stalled(self, heartbeat: asyncio.Timeout) -> bool:
        """Whether a heartbeat timeout fired well after its deadline: the event loop, not the
        peer, was stuck. Many daemons share one loop (the node host runs a whole cluster's);
        after a stall the expired timer runs before the read that would have found the
        peer's pings already buffered, so every link would be dropped at once."""
        deadline = heartbeat.when()
        late = asyncio.get_running_loop().time() - deadline if deadline is not None else 0.0
        return late > self.timing.heartbeat_interval

    def _maybe_expire_grace(self, index: int, entry: str) -> None:
        history = self._history.get(entry)
        grace = self.config.node_disconnected_grace_time
        if history is None or history.connected or history.cleaned_up or grace < 0:
            return
        lost_at = history.lost_at
        if history.ever_connected and lost_at is not None and time.monotonic() - lost_at >= grace:
            self.log.info(
                f"{self._peer_name(index, entry)}: disconnected grace time ({grace} s) "
                "expired; cleaned up"
            )
            self._set_history(entry, msgspec.structs.replace(history, cleaned_up=True))

    # -- incoming peers -------------------------------------------------------------------

    async def _serve_peer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._incoming[task] = writer
        peer = writer.get_extra_info("peername")
        host = str(peer[0]) if peer else "?"
        try:
            await self._admit(host, reader, writer)
        except (OSError, TimeoutError, msgspec.DecodeError, ssl.SSLError) as exc:
            self.log.debug(f"incoming connection from {host} ended: {exc!r}")
        except asyncio.CancelledError:
            # Only this daemon cancels its handlers (at shutdown, after closing them); asyncio's
            # server would report a handler task that ends cancelled as an error.
            self.log.debug(f"incoming connection from {host} cancelled")
        finally:
            self._incoming.pop(task, None)
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError, TimeoutError):
                async with asyncio.timeout(self.timing.connect_timeout):
                    await writer.wait_closed()

    async def _admit(
        self, host: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        async with asyncio.timeout(self.timing.connect_timeout):
            hello = await read_peer_message(reader)
        if not isinstance(hello, Hello) or self._map is None:
            return
        if hello.protocol != PROTOCOL_VERSION:
            write_message(
                writer,
                Refuse(
                    reason=RefusalReason.PROTOCOL_MISMATCH,
                    detail=f"protocol {hello.protocol}, this daemon speaks {PROTOCOL_VERSION}",
                ),
            )
            await writer.drain()
            return
        if hello.digest != self._map.digest:
            if self._refused_incoming.get(host) is not RefusalReason.NODE_MAP_MISMATCH:
                self.log.warning(
                    f"refusing {hello.host} (its node #{hello.index}): node map differs "
                    f"(this node {self._map.digest}, that node {hello.digest})"
                )
            self._refused_incoming[host] = RefusalReason.NODE_MAP_MISMATCH
            write_message(
                writer,
                Refuse(
                    reason=RefusalReason.NODE_MAP_MISMATCH,
                    detail=f"node map {hello.digest} differs from {self._map.digest} "
                    f"of {self._address}",
                ),
            )
            await writer.drain()
            return
        self._refused_incoming.pop(host, None)
        write_message(
            writer,
            Welcome(
                digest=self._map.digest,
                index=self._index,
                host=self._address,
                instance=self.instance,
            ),
        )
        await writer.drain()
        # The accepting side keeps the link's heartbeat: one ping per interval lets the
        # connecting side tell a hung peer from a quiet one, at one message per link. A timer
        # callback rather than a task keeps that cheap with thousands of links in one loop.
        loop = asyncio.get_running_loop()
        transport = writer.transport
        timer: asyncio.TimerHandle | None = None

        def ping() -> None:
            nonlocal timer
            if transport.is_closing():
                return
            if transport.get_write_buffer_size() > _PING_BACKLOG_LIMIT:
                # A client that stopped reading long ago (hung, not dead) is let go rather
                # than buffered for without end.
                transport.abort()
                return
            transport.write(PING_LINE)
            timer = loop.call_later(self.timing.heartbeat_interval, ping)

        timer = loop.call_later(self.timing.heartbeat_interval, ping)
        try:
            while True:
                message = await read_peer_message(reader)
                if message is None or isinstance(message, Goodbye):
                    return
        finally:
            if timer is not None:
                timer.cancel()

    # -- command service ------------------------------------------------------------------

    async def _serve_command(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            while (request := await read_command_message(reader)) is not None:
                if isinstance(request, StatusRequest):
                    write_message(writer, StatusReply(node=self.status()))
                else:
                    write_message(writer, ErrorReply(message="unsupported request"))
                await writer.drain()
        except (OSError, msgspec.DecodeError) as exc:
            self.log.debug(f"command connection ended: {exc!r}")
        except asyncio.CancelledError:
            # See _serve_peer: a handler that ends cancelled is reported as an error by asyncio.
            self.log.debug("command connection cancelled")
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


def _locate_self(
    node_map: NodeMap, resolved: tuple[str | None, ...], bind_ip: str, *, source: Path
) -> tuple[str, int]:
    """This node's address and index, found in its own node map.

    With BIND_INTERFACE_IP set, that address must be in the map. Without it, the real daemon
    picks the map entry that is one of the host's own addresses; here "own" means bindable,
    and since every 127/8 address is bindable on Linux, a loopback simulation must name it.
    """
    if bind_ip:
        for index, address in enumerate(resolved):
            if address == bind_ip:
                return bind_ip, index
        raise ImexConfigError(
            f"BIND_INTERFACE_IP {bind_ip} is not the address of any node in {source} "
            f"({', '.join(node_map.entries)})"
        )
    local = [(a, i) for i, a in enumerate(resolved) if a is not None and _bindable(a)]
    if len(local) == 1:
        return local[0]
    if not local:
        raise ImexConfigError(
            f"BIND_INTERFACE_IP is empty and no node in {source} has an address of this host"
        )
    raise ImexConfigError(
        f"BIND_INTERFACE_IP is empty and several nodes in {source} have addresses of this host "
        f"({', '.join(a for a, _ in local)}); set BIND_INTERFACE_IP to say which one this is"
    )


def _why(exc: OSError) -> str:
    # asyncio's bind errors repeat the address in their text; the errno says it plainly.
    return os.strerror(exc.errno) if exc.errno else str(exc)


def _remove_file(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _bindable(address: str) -> bool:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((address, 0))
        except OSError:
            return False
    return True


def _listening(servers: list[asyncio.Server]) -> str:
    names: list[str] = []
    for server in servers:
        for sock in server.sockets:
            name = sock.getsockname()
            names.append(name if isinstance(name, str) else f"{name[0]}:{name[1]}")
    return ", ".join(names)
