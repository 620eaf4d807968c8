"""Talking to daemons' command services: what ``nvidia-imex-ctl`` does, as async functions.

``query_status`` asks one daemon for its ``NodeStatus`` (what ``-q`` prints the state of);
``query_domain`` asks every node of a config's node map, as ``-N`` does, and returns the
assembled ``DomainView``. In-process users (tests, a large simulation) call these directly
instead of spawning the ctl.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Awaitable, Callable

import msgspec

from sim.imex.config import ImexConfig
from sim.imex.errors import CommandError, ImexConfigError
from sim.imex.nodemap import Resolver, load_node_map
from sim.imex.protocol import (
    STREAM_LIMIT,
    ErrorReply,
    NodeStatus,
    StatusReply,
    StatusRequest,
    read_command_message,
    write_message,
)
from sim.imex.report import DomainView, build_domain_view

__all__ = ["DEFAULT_TIMEOUT", "Endpoint", "local_endpoint", "query_domain", "query_status"]

DEFAULT_TIMEOUT = 2.0

StatusSource = Callable[["Endpoint", float], Awaitable[NodeStatus]]
"""Asks the command service at an endpoint for its status within a number of seconds; raises
CommandError when it cannot. :func:`query_status` is the one that goes over the network."""


class Endpoint(msgspec.Struct, frozen=True, kw_only=True):
    """Where a command service listens: a TCP address and port, or a unix socket path."""

    host: str | None = None
    port: int | None = None
    unix_path: str | None = None

    def __str__(self) -> str:
        return self.unix_path if self.unix_path else f"{self.host}:{self.port}"


def local_endpoint(config: ImexConfig) -> Endpoint:
    """The command service of the daemon that runs with ``config`` (``-c`` with ``-q``).

    A daemon whose IMEX_CMD_BIND_INTERFACE_IP is empty listens on every interface, so the ctl
    reaches it on the loopback address.
    """
    if not config.cmd_enabled:
        source = config.source or "config.cfg"
        raise ImexConfigError(f"{source}: IMEX_CMD_ENABLED is not 1: no command service to ask")
    if config.cmd_unix_domain_path:
        return Endpoint(unix_path=config.cmd_unix_domain_path)
    return Endpoint(host=config.cmd_bind_interface_ip or "127.0.0.1", port=config.cmd_port)


async def query_status(endpoint: Endpoint, reply_within: float = DEFAULT_TIMEOUT) -> NodeStatus:
    """Ask one daemon for its status; CommandError when it cannot be reached or misanswers."""
    try:
        async with asyncio.timeout(reply_within):
            return await _exchange(endpoint)
    except TimeoutError:
        raise CommandError(f"{endpoint}: no answer within {reply_within:g} s") from None
    except ConnectionRefusedError:
        raise CommandError(
            f"{endpoint}: connection refused (is nvidia-imex running, with IMEX_CMD_ENABLED=1?)"
        ) from None
    except OSError as exc:
        raise CommandError(f"{endpoint}: {exc.strerror or exc}") from None
    except msgspec.DecodeError as exc:
        raise CommandError(f"{endpoint}: answer does not decode: {exc}") from None


async def _exchange(endpoint: Endpoint) -> NodeStatus:
    if endpoint.unix_path:
        reader, writer = await asyncio.open_unix_connection(endpoint.unix_path, limit=STREAM_LIMIT)
    else:
        reader, writer = await asyncio.open_connection(
            endpoint.host, endpoint.port, limit=STREAM_LIMIT
        )
    try:
        write_message(writer, StatusRequest())
        await writer.drain()
        reply = await read_command_message(reader)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    if isinstance(reply, StatusReply):
        return reply.node
    if isinstance(reply, ErrorReply):
        raise CommandError(f"{endpoint}: {reply.message}")
    raise CommandError(f"{endpoint}: connection closed without an answer")


async def query_domain(
    config: ImexConfig,
    *,
    resolver: Resolver | None = None,
    reply_within: float = DEFAULT_TIMEOUT,
    ask_status: StatusSource = query_status,
) -> DomainView:
    """Ask every node of ``config``'s node map for its status, as ``nvidia-imex-ctl -N`` does.

    Raises ImexConfigError when the node map cannot be read; unreachable nodes are reported
    UNAVAILABLE in the view, not raised. ``ask_status`` asks each node (over TCP unless the
    caller knows a shorter way to the same command service).
    """
    if not config.cmd_enabled:
        source = config.source or "config.cfg"
        raise ImexConfigError(f"{source}: IMEX_CMD_ENABLED is not 1: no command service to ask")
    node_map = load_node_map(config.node_config_file)
    resolver = resolver or Resolver.from_environment()
    addresses = await resolver.resolve_all(node_map)

    async def ask(address: str | None) -> NodeStatus | None:
        if address is None:
            return None
        try:
            return await ask_status(Endpoint(host=address, port=config.cmd_port), reply_within)
        except CommandError:
            return None

    reports = await asyncio.gather(*(ask(address) for address in addresses))
    return build_domain_view(
        node_map.entries, addresses, reports, taken_at=dt.datetime.now().astimezone()
    )
