"""What the agent and the IMEX launcher say to each other: one JSON line each way over the
launcher's unix socket (:mod:`services.imex_agent.launcher` answers,
:class:`~services.imex_agent.programs.LauncherImex` asks)."""

from __future__ import annotations

import msgspec


class LaunchRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One line to the launcher: start the daemon with this config, output to this file."""

    config: str
    output: str


class LaunchReply(msgspec.Struct, frozen=True, kw_only=True):
    """The launcher's answer: the daemon's pid and start time, or why it could not start it."""

    pid: int = 0
    start_time: int | None = None
    error: str = ""
