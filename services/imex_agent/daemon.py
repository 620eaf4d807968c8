"""Supervising the node's IMEX daemon: files, start, restart, reload, stop.

One loop converges the running daemon to the target (the node's clique and the clique's roster):

- **Not running.** Stop a daemon a previous agent left behind (pid file), check that no other
  IMEX daemon holds the node's ports (:mod:`preflight`), write the hosts block,
  ``nodes_config.cfg`` and ``config.cfg``, start the daemon as a child process.
- **Died.** Restart after a backoff that doubles with each quick death (from
  ``restart_backoff_initial_s`` up to ``restart_backoff_max_s``) and resets once a daemon ran for
  ``stable_after_s``. Every restart is counted.
- **A member's address changed, slots unchanged** (a node replaced in its slot, or readdressed):
  rewrite the hosts block and send SIGUSR1, which makes IMEX re-resolve the names and reconnect.
  No restart. IMEX processes at most one SIGUSR1 per ``reload_min_interval_s``; a second change
  inside that window is applied when the window ends.
- **The set of slots changed** (a node joined or left): the node map itself differs, and IMEX
  reads it only at start, so the daemon is restarted with the new map, but only once the change
  has held for ``map_settle_s``: a node that leaves and a replacement that takes its slot within
  that time look like a readdress, not two restarts.
- **config.cfg changed** (settings, the node's address): restart at once.
- **No clique, or not a member**: no daemon (a member's label can go away on a fault; its
  daemon stops after the same settle time).

``nodes_config.cfg`` on disk is always the map the running daemon was started with; the hosts
block keeps the last address of a slot that emptied until the daemon restarts without it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from services.imex_agent.binaries import Imex, ImexProcess, ImexStartError
from services.imex_agent.files import remove, write_if_changed, write_in_place_if_changed
from services.imex_agent.hostsfile import merge
from services.imex_agent.imexconfig import ImexPaths, render_config
from services.imex_agent.metrics import AgentMetrics
from services.imex_agent.preflight import answering_ports, stop_leftover, write_pid_file
from services.imex_agent.roster import Roster, render_nodes_config
from services.imex_agent.settings import ImexSettings
from services.imex_agent.status import ControlState, Phase

log = logging.getLogger("cdo.imex_agent.daemon")


class Target(msgspec.Struct, frozen=True, kw_only=True):
    """What the daemon should serve: the node's clique and its roster (None while unknown)."""

    clique: str | None
    roster: Roster | None = None
    detail: str = ""


class _Running(msgspec.Struct, frozen=True, kw_only=True):
    """What the running daemon was started with (and the hosts mapping it was last told)."""

    roster: Roster
    entries: tuple[str, ...]
    hosts: dict[str, str]
    config: str
    digest: str
    started_at: float


def map_digest(nodes_config: str) -> str:
    return hashlib.sha256(nodes_config.encode()).hexdigest()[:16]


class DaemonController:
    """Keeps one node's IMEX daemon as the target says; see the module docstring."""

    def __init__(
        self,
        *,
        node: str,
        address: str,
        settings: ImexSettings,
        imex: Imex,
        target: Callable[[], Target],
        metrics: AgentMetrics,
        on_change: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._node = node
        self._address = address
        self._settings = settings
        self._imex = imex
        self._target = target
        self._metrics = metrics
        self._on_change = on_change
        self._clock = clock
        self.paths = ImexPaths(directory=settings.directory)
        self.hosts_file = Path(settings.hosts_file)
        self._wake = asyncio.Event()
        self._process: ImexProcess | None = None
        self._running: _Running | None = None
        self._group: asyncio.TaskGroup | None = None
        self._leftovers_checked = False
        self._next_start = 0.0
        self._failures = 0
        self._start_reason = "initial"
        self._map_change_since: float | None = None
        self._last_reload = 0.0
        self._reload_pending = False
        self._state = ControlState(phase=Phase.NO_CLIQUE, detail="starting")
        self.restarts = 0
        self.reloads = 0

    # -- what others read -----------------------------------------------------------------------

    @property
    def state(self) -> ControlState:
        return self._state

    @property
    def running(self) -> bool:
        return self._process is not None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def roster(self) -> Roster | None:
        """The roster the running daemon serves (None when none runs)."""
        return self._running.roster if self._running is not None else None

    @property
    def map_change_pending(self) -> bool:
        """The set of slots differs from the running map; a restart follows if it holds."""
        return self._map_change_since is not None

    def wake(self) -> None:
        self._wake.set()

    # -- the loop ---------------------------------------------------------------------------------

    async def run(self) -> None:
        """Converge until cancelled; the daemon is stopped on the way out."""
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                await self._loop()
        finally:
            self._group = None
            await self._stop("shutdown")

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            delay = await self._step()
            if delay is not None and delay <= 0:
                continue
            try:
                async with asyncio.timeout(delay):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def _step(self) -> float | None:
        """One convergence step; seconds until the next is due (None: only when woken)."""
        now = self._clock()
        target = self._target()
        if target.clique is None or target.roster is None:
            await self._stop("roster")
            phase = Phase.NO_CLIQUE if target.clique is None else Phase.NOT_IN_ROSTER
            self._set_state(phase, clique=target.clique or "", detail=target.detail)
            return None
        roster = target.roster
        if roster.member(self._node) is None:
            if self._process is not None:
                waited = self._settled(now)
                if waited is not None:
                    return waited
                await self._stop("roster")
            self._set_state(Phase.NOT_IN_ROSTER, clique=roster.clique, detail=target.detail)
            return None
        config = render_config(settings=self._settings, address=self._address, paths=self.paths)
        if self._process is None:
            return await self._start(roster, config, now)
        running = self._running
        assert running is not None
        if config != running.config:
            await self._stop("config")
            return 0
        due: float | None = None
        if roster.entries != running.entries:
            waited = self._settled(now)
            if waited is None:
                await self._stop("node_map")
                return 0
            due = waited
        else:
            self._map_change_since = None
        hosts = {**{h: a for h, a in running.hosts.items() if h in running.entries}, **roster.hosts}
        if hosts != running.hosts:
            self._write_hosts(hosts)
            self._running = msgspec.structs.replace(running, hosts=hosts, roster=roster)
            self._reload_pending = True
        elif roster != running.roster and roster.entries == running.entries:
            self._running = msgspec.structs.replace(running, roster=roster)
        if self._reload_pending and due is None:
            # (With a map change pending, the restart will apply the hosts file anyway.)
            ready_at = self._last_reload + self._settings.reload_min_interval_s
            if now >= ready_at:
                self._reload(now)
            else:
                due = ready_at - now if due is None else min(due, ready_at - now)
        return due

    def _settled(self, now: float) -> float | None:
        """None once a map change has held for map_settle_s; else the seconds still to wait."""
        if self._map_change_since is None:
            self._map_change_since = now
            log.info(
                "node map changed; restarting the daemon if it holds",
                extra={"settle_s": self._settings.map_settle_s},
            )
        remaining = self._map_change_since + self._settings.map_settle_s - now
        return remaining if remaining > 0 else None

    # -- actions ----------------------------------------------------------------------------------

    async def _start(self, roster: Roster, config: str, now: float) -> float | None:
        if now < self._next_start:
            return self._next_start - now
        settings = self._settings
        if not self._leftovers_checked:
            await asyncio.to_thread(
                stop_leftover, self.paths.pid_file, timeout_s=settings.stop_timeout_s
            )
            self._leftovers_checked = True
        if settings.foreign_check:
            answering = await answering_ports(
                self._address, (settings.server_port, settings.cmd_port)
            )
            if answering:
                detail = (
                    f"ports {', '.join(map(str, answering))} on {self._address} already answer; "
                    "stop the host's nvidia-imex (e.g. its systemd unit) to let the agent run IMEX"
                )
                if self._state.phase is not Phase.FOREIGN:
                    log.error(
                        "another IMEX daemon runs on this node; not starting one",
                        extra={"address": self._address, "ports": answering},
                    )
                self._set_state(Phase.FOREIGN, clique=roster.clique, detail=detail)
                return settings.poll_interval_s
        nodes_config = render_nodes_config(roster)
        hosts = roster.hosts
        self._write_hosts(hosts)
        write_if_changed(self.paths.nodes_config, nodes_config)
        write_if_changed(self.paths.config, config)
        try:
            process = await self._imex.start(self.paths.config, output=self.paths.output)
        except ImexStartError as exc:
            log.error("cannot start nvidia-imex", extra={"error": str(exc)})
            self._metrics.errors.labels("imex_start").inc()
            self._schedule_restart(now, detail=str(exc))
            return self._next_start - now
        if process.pid is not None:
            write_pid_file(self.paths.pid_file, process.pid)
        self._process = process
        self._running = _Running(
            roster=roster,
            entries=roster.entries,
            hosts=hosts,
            config=config,
            digest=map_digest(nodes_config),
            started_at=now,
        )
        reason = self._start_reason
        if reason != "initial":
            self.restarts += 1
        self._metrics.daemon_starts.labels(reason).inc()
        self._map_change_since = None
        # IMEX may count its SIGUSR1 window from start-up; the hosts file is current anyway.
        self._last_reload = now
        self._reload_pending = False
        log.info(
            "nvidia-imex started",
            extra={
                "pid": process.pid,
                "reason": reason,
                "nodes": len(roster.members),
                "digest": self._running.digest,
                "restarts": self.restarts,
            },
        )
        assert self._group is not None
        self._group.create_task(self._watch(process), name=f"nvidia-imex {process.pid}")
        self._set_state(Phase.RUNNING, clique=roster.clique)
        return None

    async def _watch(self, process: ImexProcess) -> None:
        code = await process.wait()
        if process is not self._process:
            return  # stopped on purpose
        now = self._clock()
        running = self._running
        self._process = None
        self._running = None
        remove(self.paths.pid_file)
        if running is not None and now - running.started_at >= self._settings.stable_after_s:
            self._failures = 0
        self._start_reason = "exited"
        self._schedule_restart(now, detail=f"exited with code {code}")
        log.warning(
            "nvidia-imex exited; restarting it",
            extra={"exit_code": code, "restart_in_s": round(self._next_start - now, 3)},
        )
        self._wake.set()

    def _schedule_restart(self, now: float, *, detail: str) -> None:
        self._failures += 1
        settings = self._settings
        delay = min(
            settings.restart_backoff_initial_s * 2 ** (self._failures - 1),
            settings.restart_backoff_max_s,
        )
        self._next_start = now + delay
        self._set_state(
            Phase.WAITING,
            clique=self._state.clique,
            detail=f"{detail}; restarting in {delay:.1f} s",
        )

    def _reload(self, now: float) -> None:
        assert self._process is not None
        self._process.reload()
        self._last_reload = now
        self._reload_pending = False
        self.reloads += 1
        self._metrics.daemon_reloads.inc()
        log.info("sent SIGUSR1 to nvidia-imex: hosts mapping changed", extra={"pid": self.pid})
        self._on_change()

    async def _stop(self, reason: str) -> None:
        process = self._process
        if process is None:
            return
        self._process = None
        self._running = None
        self._map_change_since = None
        self._start_reason = reason
        code = await process.stop(timeout_s=self._settings.stop_timeout_s)
        remove(self.paths.pid_file)
        log.info("nvidia-imex stopped", extra={"reason": reason, "exit_code": code})
        self._on_change()

    def _write_hosts(self, hosts: dict[str, str]) -> None:
        try:
            existing = self.hosts_file.read_text()
        except FileNotFoundError:
            existing = ""
        write_in_place_if_changed(self.hosts_file, merge(existing, hosts))

    def _set_state(self, phase: Phase, *, clique: str, detail: str = "") -> None:
        running = self._running
        state = ControlState(
            phase=phase,
            clique=clique,
            detail=detail,
            restarts=self.restarts,
            config_digest=running.digest if running is not None else "",
        )
        if state != self._state:
            self._state = state
            self._on_change()
