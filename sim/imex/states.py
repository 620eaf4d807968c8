"""The states ``nvidia-imex`` reports and the pure rules that derive them.

Names are the real ones: the daemon states ``nvidia-imex-ctl -q`` prints, the per-connection
states of the ``-N`` connectivity table (one letter each in text, the full name in JSON) and the
domain states UP / DEGRADED / DOWN.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import msgspec

__all__ = [
    "ConnectionState",
    "DaemonState",
    "DomainState",
    "LinkHistory",
    "RefusalReason",
    "connection_state",
    "domain_state",
]


class DaemonState(enum.StrEnum):
    """What ``nvidia-imex-ctl -q`` prints for one daemon."""

    INITIALIZING = "INITIALIZING"
    STARTING_AUTH_SERVER = "STARTING_AUTH_SERVER"
    WAITING_FOR_PEERS = "WAITING_FOR_PEERS"
    WAITING_FOR_RECOVERY = "WAITING_FOR_RECOVERY"
    INIT_GPU = "INIT_GPU"
    READY = "READY"
    SHUTTING_DOWN = "SHUTTING_DOWN"
    # Never reported by a daemon about itself: the ctl's word for a daemon it cannot reach.
    UNAVAILABLE = "UNAVAILABLE"


class ConnectionState(enum.StrEnum):
    """One cell of the ``-N`` connectivity table: how node *From* sees its link to node *To*."""

    INVALID = "INVALID"
    NEVER_CONNECTED = "NEVER_CONNECTED"
    RECOVERING = "RECOVERING"
    DISCONNECTED = "DISCONNECTED"
    AUTHENTICATING = "AUTHENTICATING"
    CONNECTED = "CONNECTED"

    @property
    def letter(self) -> str:
        """The one-letter code of the text table."""
        return _LETTERS[self]


_LETTERS = {
    ConnectionState.INVALID: "I",
    ConnectionState.NEVER_CONNECTED: "N",
    ConnectionState.RECOVERING: "R",
    ConnectionState.DISCONNECTED: "D",
    ConnectionState.AUTHENTICATING: "A",
    ConnectionState.CONNECTED: "C",
}


class DomainState(enum.StrEnum):
    """The last line of ``nvidia-imex-ctl -N``: ``Domain State: UP``."""

    UP = "UP"
    DEGRADED = "DEGRADED"
    DOWN = "DOWN"


class RefusalReason(enum.StrEnum):
    """Why a peer handshake was turned down (a simulator addition to the JSON report)."""

    NODE_MAP_MISMATCH = "NODE_MAP_MISMATCH"
    AUTHENTICATION_FAILED = "AUTHENTICATION_FAILED"
    PROTOCOL_MISMATCH = "PROTOCOL_MISMATCH"


class LinkHistory(msgspec.Struct, frozen=True, kw_only=True):
    """What one daemon remembers about its outgoing connection to one peer.

    The daemon's view of a peer is its own outgoing (client) connection to that peer, which is
    what SIGUSR1 restarts; the peer's connection back is the peer's view.
    """

    connected: bool = False
    ever_connected: bool = False
    # Monotonic time the last connection was lost; starts the disconnected grace period.
    lost_at: float | None = None
    # The peer announced a clean shutdown or the grace period ran out: its imports and exports
    # have been cleaned up, so a reconnect is a fresh start rather than a recovery.
    cleaned_up: bool = False
    refused: RefusalReason | None = None
    # The peer's instance id from its last handshake; a new one means the peer was restarted.
    peer_instance: str | None = None

    def connected_to(self, instance: str) -> LinkHistory:
        """The handshake with instance ``instance`` of the peer succeeded."""
        return LinkHistory(connected=True, ever_connected=True, peer_instance=instance)

    def lost(self, now: float) -> LinkHistory:
        """An established connection broke (EOF, reset, or missed heartbeats)."""
        if not self.connected:
            return self
        return msgspec.structs.replace(self, connected=False, lost_at=now)

    def peer_shut_down(self, now: float) -> LinkHistory:
        """The peer said goodbye: it is shutting down and has dropped what it shared."""
        return msgspec.structs.replace(
            self, connected=False, lost_at=self.lost_at or now, cleaned_up=True
        )

    def refused_by(self, reason: RefusalReason, now: float) -> LinkHistory:
        """The peer (or this daemon) turned the handshake down."""
        return msgspec.structs.replace(self.lost(now), refused=reason)


def connection_state(history: LinkHistory, *, grace_time: int, now: float) -> ConnectionState:
    """The connectivity-table state of one link.

    ``grace_time`` is IMEX_NODE_DISCONNECTED_GRACE_TIME: -1 waits forever before cleaning up a
    lost peer (it stays RECOVERING), 0 cleans up at once, N waits N seconds.
    """
    if history.connected:
        return ConnectionState.CONNECTED
    if not history.ever_connected:
        return ConnectionState.NEVER_CONNECTED
    if history.cleaned_up:
        return ConnectionState.DISCONNECTED
    if grace_time < 0 or history.lost_at is None:
        return ConnectionState.RECOVERING
    if now - history.lost_at >= grace_time:
        return ConnectionState.DISCONNECTED
    return ConnectionState.RECOVERING


def domain_state(
    node_states: Iterable[DaemonState], links: Iterable[ConnectionState]
) -> DomainState:
    """UP when every node is READY and every link CONNECTED; DOWN when no node is READY.

    Anything in between (a node unreachable or not ready, a link down or refused) is DEGRADED.
    """
    states = list(node_states)
    ready = [state is DaemonState.READY for state in states]
    if not any(ready):
        return DomainState.DOWN
    if all(ready) and all(link is ConnectionState.CONNECTED for link in links):
        return DomainState.UP
    return DomainState.DEGRADED
