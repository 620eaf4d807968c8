"""Wire messages: the peer protocol between daemons and the command protocol of the ctl.

Both are newline-delimited JSON over TCP (or a unix socket for the command service), one
msgspec Struct per line, tagged by ``type``. The real daemon speaks gRPC; what the simulator
keeps is the behaviour that matters to its users: a handshake that compares node-map digests
and refuses a mismatch, heartbeats that notice a hung peer, a goodbye on clean shutdown, and a
status query the ctl turns into ``-q`` / ``-N`` output.
"""

from __future__ import annotations

import asyncio

import msgspec

from sim.imex.states import ConnectionState, DaemonState, RefusalReason

__all__ = [
    "PING_LINE",
    "PROTOCOL_VERSION",
    "STREAM_LIMIT",
    "CommandMessage",
    "ConnectionStatus",
    "ErrorReply",
    "Goodbye",
    "Hello",
    "NodeStatus",
    "PeerMessage",
    "Ping",
    "Refuse",
    "StatusReply",
    "StatusRequest",
    "Welcome",
    "read_command_message",
    "read_peer_message",
    "write_message",
]

PROTOCOL_VERSION = 1
# A status reply of a large domain is one line; asyncio's default 64 KiB line limit is too low.
STREAM_LIMIT = 16 * 1024 * 1024


class Hello(msgspec.Struct, frozen=True, kw_only=True, tag="hello", tag_field="type"):
    """First message of a peer connection, from the connecting daemon."""

    protocol: int
    digest: str
    index: int
    host: str
    instance: str


class Welcome(msgspec.Struct, frozen=True, kw_only=True, tag="welcome", tag_field="type"):
    """The accepting daemon agrees: same node map."""

    digest: str
    index: int
    host: str
    instance: str


class Refuse(msgspec.Struct, frozen=True, kw_only=True, tag="refuse", tag_field="type"):
    """The accepting daemon turns the handshake down and closes the connection."""

    reason: RefusalReason
    detail: str


class Ping(msgspec.Struct, frozen=True, kw_only=True, tag="ping", tag_field="type"):
    """Heartbeat from the accepting daemon, once per interval."""


class Goodbye(msgspec.Struct, frozen=True, kw_only=True, tag="goodbye", tag_field="type"):
    """Sent on every connection by a daemon that is shutting down cleanly."""

    instance: str


PeerMessage = Hello | Welcome | Refuse | Ping | Goodbye


class ConnectionStatus(msgspec.Struct, frozen=True, kw_only=True):
    """One daemon's view of its link to one node of its map."""

    index: int
    host: str | None
    status: ConnectionState
    refused: RefusalReason | None = None


class NodeStatus(msgspec.Struct, frozen=True, kw_only=True):
    """Everything one daemon reports about itself to the ctl."""

    state: DaemonState
    index: int
    host: str
    hostname: str
    version: str
    pid: int
    instance: str
    node_map_digest: str
    connections: tuple[ConnectionStatus, ...]


class StatusRequest(msgspec.Struct, frozen=True, kw_only=True, tag="status", tag_field="type"):
    pass


class StatusReply(msgspec.Struct, frozen=True, kw_only=True, tag="status_reply", tag_field="type"):
    node: NodeStatus


class ErrorReply(msgspec.Struct, frozen=True, kw_only=True, tag="error", tag_field="type"):
    message: str


CommandMessage = StatusRequest | StatusReply | ErrorReply

_encoder = msgspec.json.Encoder()
# Heartbeats are the bulk of the traffic; they are encoded once.
PING_LINE = _encoder.encode(Ping()) + b"\n"
_peer_decoder = msgspec.json.Decoder(PeerMessage)
_command_decoder = msgspec.json.Decoder(CommandMessage)


def write_message(writer: asyncio.StreamWriter, message: PeerMessage | CommandMessage) -> None:
    """Queue one message on ``writer`` (the caller drains)."""
    writer.write(_encoder.encode(message) + b"\n")


async def read_peer_message(reader: asyncio.StreamReader) -> PeerMessage | None:
    """Read one peer message; None at end of stream. Raises msgspec.DecodeError on garbage."""
    line = await reader.readline()
    return _peer_decoder.decode(line) if line else None


async def read_command_message(reader: asyncio.StreamReader) -> CommandMessage | None:
    """Read one command message; None at end of stream. Raises msgspec.DecodeError on garbage."""
    line = await reader.readline()
    return _command_decoder.decode(line) if line else None
