"""The IMEX programs as the agent sees them: one daemon process and the control tool.

:class:`Imex` is the handle an agent gets for its node, :class:`ImexProcess` the daemon it
holds. The implementations:

- :class:`~services.imex_agent.programs.CommandImex` starts ``nvidia-imex`` itself, in a session
  of its own (so neither the agent's death nor a signal to the agent's process group reaches
  it) and asks ``nvidia-imex-ctl``; outside a container the daemon outlives the agent;
- :class:`~services.imex_agent.programs.LauncherImex` asks the IMEX launcher
  (:mod:`services.imex_agent.launcher`, the daemon's own container in the agent's pod) to start
  it, so that it outlives the agent's container too; everything else is as with ``CommandImex``.

Either way the daemon is a :class:`~services.imex_agent.pidprocess.PidProcess` held through a
pidfd (Linux 5.4 or later): the agent waits for it, signals it and stops it by that handle,
whether it started it, the launcher did, or an earlier agent did and this one adopted it
(``Imex.adopt``, checked as :mod:`preflight` describes). A pidfd names one process for good, so
a signal can never reach a process that got the pid later.

The simulator points both commands at ``python -m sim.imex.daemon`` / ``python -m sim.imex.ctl``,
or passes an in-process implementation of the same Protocol to host many nodes in one process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from services.imex_agent.preflight import DaemonRecord, ProcessIdentity
from services.imex_agent.report import DomainReport
from shared.errors import CdoError

__all__ = ["Imex", "ImexProcess", "ImexStartError", "NotAdoptableError"]


class ImexStartError(CdoError):
    """The daemon program could not be started at all (missing, not executable)."""


class NotAdoptableError(CdoError):
    """The daemon a record names is not there to adopt; the message says why."""


class ImexProcess(Protocol):
    """One running daemon."""

    @property
    def pid(self) -> int | None: ...

    @property
    def identity(self) -> ProcessIdentity:
        """What a later agent needs to find this very daemon again (the daemon record)."""
        ...

    async def wait(self) -> int | None:
        """Wait until the daemon exits; its exit code (negative: killed by that signal; None:
        unknown, because this agent is not its parent)."""
        ...

    def reload(self) -> None:
        """SIGUSR1: reload credentials, re-resolve node names, restart outgoing connections."""
        ...

    def takes_reload(self) -> bool:
        """Whether a SIGUSR1 sent now reaches the daemon's handler. False while a daemon that is
        still starting has not installed it: the default action would end the process."""
        ...

    async def stop(self, *, timeout_s: float) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout_s``; the exit code as :meth:`wait` says it."""
        ...

    def release(self) -> None:
        """Stop watching the daemon and leave it running (for the next agent to adopt)."""
        ...


class Imex(Protocol):
    """Starting the node's daemon, finding a running one again, asking the control tool."""

    async def start(self, config: Path, *, output: Path) -> ImexProcess:
        """Start a daemon with ``config``; its console output goes to ``output``."""
        ...

    def adopt(self, record: DaemonRecord, *, config: Path) -> ImexProcess:
        """The running daemon ``record`` names, a daemon of ``config``; NotAdoptableError when
        there is no such daemon (the message says why)."""
        ...

    async def query_state(self, config: Path) -> str:
        """What ``nvidia-imex-ctl -c config -q`` prints (UNAVAILABLE when unreachable)."""
        ...

    async def query_domain(self, config: Path) -> DomainReport:
        """``nvidia-imex-ctl -c config -N -j``, read; ReportError when it cannot be."""
        ...

    def missing_programs(self) -> tuple[str, ...]:
        """The programs (``nvidia-imex``, ``nvidia-imex-ctl``) that cannot be found, as their
        commands name them; empty when both are there. Asked before each start."""
        ...
