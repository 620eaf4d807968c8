"""What the agent and the IMEX launcher say to each other: one JSON line each way over the
launcher's unix socket (:mod:`services.imex_agent.launcher` answers,
:class:`~services.imex_agent.programs.LauncherImex` asks), and the probe the ``imex-daemon``
container's readiness is (:mod:`services.imex_agent.launchprobe` asks).

A launch request's encoding never changes: in the DaemonSet the launcher keeps the image its
container started with while the agent's container is updated in place, so an agent of a newer
release asks a launcher of an older one. A probe is a line of its own shape, ``{"probe": true}``,
answered like a launch request with the daemon the launcher holds (pid 0 when none); the probe
runs in the launcher's own container, so the two are always of one release.
"""

from __future__ import annotations

import socket
from pathlib import Path

import msgspec

SOCKET_VARIABLE = "CDO_IMEX_AGENT_IMEX_LAUNCHER_SOCKET"
"""Where the launcher serves (ImexSettings.launcher_socket, as its environment names it)."""


class LaunchRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One line to the launcher: start the daemon with this config, output to this file."""

    config: str
    output: str


class ProbeRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One line to the launcher: say that you serve, and which daemon you hold."""

    probe: bool = True


class LaunchReply(msgspec.Struct, frozen=True, kw_only=True):
    """The launcher's answer: the daemon's pid and start time, or why it could not start it."""

    pid: int = 0
    start_time: int | None = None
    error: str = ""


def decode_request(line: bytes) -> LaunchRequest | ProbeRequest:
    """A request line, either shape; raises msgspec's DecodeError or ValidationError."""
    raw = msgspec.json.decode(line)
    if isinstance(raw, dict) and raw.get("probe") is True:
        return ProbeRequest()
    return msgspec.convert(raw, LaunchRequest)


def ask(path: Path, request: LaunchRequest | ProbeRequest, *, timeout_s: float) -> LaunchReply:
    """Send one request and read the reply, blocking for at most ``timeout_s`` per step;
    raises OSError (no launcher, no answer in time) or msgspec's errors (not a reply)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout_s)
        conn.connect(str(path))
        conn.sendall(msgspec.json.encode(request) + b"\n")
        with conn.makefile("rb") as answer:
            line = answer.readline()
    if not line:
        raise ConnectionError(f"the launcher at {path} closed the connection without an answer")
    return msgspec.json.decode(line, type=LaunchReply)
