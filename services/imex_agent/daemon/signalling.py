"""Telling a running daemon of a new mapping: the hosts block it resolves, and SIGUSR1.

IMEX re-resolves a peer's hostname on every reconnect attempt and restarts its outgoing
connections on SIGUSR1, but processes at most one SIGUSR1 per ``reload_min_interval_s``
(counted from the daemon's start too). :class:`HostsSignal` writes the changed mapping at once
and sends the SIGUSR1 it owes when the window allows, and once the daemon has installed its
SIGUSR1 handler (``ImexProcess.takes_reload``): a daemon still starting would be ended by the
signal's default action, and it has resolved no name yet anyway. The hosts block is read and
written here (in place where the file is a bind mount, as a container's ``/etc/hosts`` is).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import msgspec

from services.imex_agent.binaries import ImexProcess
from services.imex_agent.daemon.rules import Running, reload_wait, served_hosts
from services.imex_agent.files import write_in_place_if_changed
from services.imex_agent.hostsfile import merge, parse_block
from services.imex_agent.metrics import AgentMetrics
from services.imex_agent.roster import Roster

# The controller's logger: signalling is one of its steps.
log = logging.getLogger("cdo.imex_agent.daemon")

STARTING_RECHECK_S = 0.05
"""How soon a SIGUSR1 owed to a daemon that is still starting is tried again."""


class HostsSignal:
    """The running daemon's hosts mapping, and the SIGUSR1 a changed one owes it."""

    def __init__(
        self,
        *,
        hosts_file: Path,
        interval_s: float,
        empty_address: str,
        own_address: str,
        metrics: AgentMetrics,
        on_change: Callable[[], None],
    ) -> None:
        self._hosts_file = hosts_file
        self._interval_s = interval_s
        self._empty = empty_address
        self._own_address = own_address
        self._metrics = metrics
        self._on_change = on_change
        self._last_reload = 0.0
        self._pending = False
        self.count = 0
        """SIGUSR1s sent."""

    def opened(self, now: float) -> None:
        """A window starts at ``now`` with nothing owed (a daemon started: its hosts file is
        current; or one was adopted, whose last signal is not known)."""
        self._last_reload = now
        self._pending = False

    def apply(self, running: Running, roster: Roster) -> Running:
        """Point the slots' names at the roster's members (and empty slots at the sentinel);
        ``running`` as it is after that."""
        hosts = served_hosts(
            roster,
            empty=self._empty,
            own_slot=running.serving.slot,
            own_address=self._own_address,
        )
        if hosts != running.hosts:
            write_hosts(self._hosts_file, hosts)
            self._pending = True
            log.info(
                "hosts mapping changed",
                extra={"members": len(roster.members), "slots": roster.slots},
            )
        return msgspec.structs.replace(running, hosts=hosts, roster=roster)

    def owe(self) -> None:
        """The daemon's TLS credentials were replaced: a SIGUSR1 is owed (IMEX reloads them)."""
        self._pending = True

    def signal_if_due(self, process: ImexProcess | None, now: float) -> float | None:
        """SIGUSR1 for a pending hosts change when IMEX takes one; seconds until then, or None."""
        if not self._pending:
            return None
        wait = reload_wait(last_reload=self._last_reload, interval_s=self._interval_s, now=now)
        if wait > 0:
            return wait
        assert process is not None
        if not process.takes_reload():
            # Still starting (no SIGUSR1 handler yet): the signal would end it. It resolves
            # the names of the new mapping when it first connects; the signal waits anyway.
            return STARTING_RECHECK_S
        process.reload()
        self._last_reload = now
        self._pending = False
        self.count += 1
        self._metrics.daemon_reloads.inc()
        log.info(
            "sent SIGUSR1 to nvidia-imex: hosts mapping or credentials changed",
            extra={"pid": process.pid},
        )
        self._on_change()
        return None


def read_hosts(path: Path) -> dict[str, str]:
    """The mapping in the agent's block of the hosts file (empty when there is no file)."""
    try:
        return parse_block(path.read_text())
    except FileNotFoundError:
        return {}


def write_hosts(path: Path, hosts: dict[str, str]) -> None:
    """Replace the agent's block of the hosts file with ``hosts``, leaving the rest as it is."""
    try:
        existing = path.read_text()
    except FileNotFoundError:
        existing = ""
    write_in_place_if_changed(path, merge(existing, hosts))
