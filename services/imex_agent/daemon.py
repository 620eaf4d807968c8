"""Supervising the node's IMEX daemon: its static node map, the hosts mapping, start, reload, stop.

The node map does not follow membership. ``nodes_config.cfg`` lists every slot of the clique
(``max_nodes_per_domain`` stable names, :func:`roster.render_nodes_config`); it is the same
bytes on every node of the clique and is written before the daemon's first start. Membership is
only the name -> address mapping in the agent's block of the hosts file: a member's slot
resolves to its address, an empty slot to ``empty_slot_address`` (a loopback address nothing
listens on: IMEX sees a peer that is down). IMEX keeps each peer's hostname as its target and
re-resolves it on every reconnect attempt; SIGUSR1 makes it restart its outgoing connections
at once.

What the controller does, decided by the pure :func:`decide` and carried out by
:class:`DaemonController`:

- **adopt** (once, before anything else): an earlier agent of this node left its daemon
  running (it crashed, was killed, or its container was restarted for an upgrade). The daemon
  record (``nvidia-imex.pid``) names it; if that process is still that daemon
  (:mod:`preflight`), the controller takes it over as if it had started it: no new daemon, no
  restart, and no SIGUSR1 unless the hosts mapping has to change. Then the rules below apply to
  what the record says it serves, so a daemon of another ``config.cfg`` or node map is
  restarted once. Until the clique's Node list is known the adopted daemon is left as it is
  (**wait**).
- **start**: nothing runs and the node is a member of its clique's roster. Check that no other
  IMEX daemon holds the node's ports (:mod:`preflight`), write the hosts block,
  ``nodes_config.cfg`` and ``config.cfg``, start the daemon (in a session of its own, or
  through the launcher: :mod:`binaries`) and write its record.
- **keep**: membership changed (a node joined, left, faulted, recovered, was powered off or on,
  got a new address): rewrite the hosts block and send SIGUSR1. No restart. IMEX processes at
  most one SIGUSR1 per ``reload_min_interval_s`` (IMEX_MINIMUM_SSL_RELOAD_INTERVAL, also counted
  from the daemon's start); a change inside that window is signalled when the window ends.
- **restart**: only when the daemon's own files change: ``config.cfg`` (settings, the node's
  address), or the node map itself (the node now belongs to another clique, or its claimed slot
  went to a rival). Restarts are counted.
- **hold**: this node left its clique (NVML reports no clique, or the node is out of the roster:
  its label went away on a fault, its slot is contested). Its daemon keeps running for
  ``leave_grace_s``, so a label or fabric that comes back within it costs nothing; the other
  members already map its slot to the sentinel. A rival that holds this node's slot stops the
  daemon at once.
- **stop**: the grace ran out, or the slot is someone else's: no daemon.
- **died**: restart after a backoff that doubles with each quick death (from
  ``restart_backoff_initial_s`` up to ``restart_backoff_max_s``) and resets once a daemon ran for
  ``stable_after_s``.

When the agent shuts down (SIGTERM, or its task is cancelled) the daemon is **left running**
with its record, for the next agent to adopt: an agent restart or upgrade never restarts IMEX.
With ``stop_on_exit`` it is stopped instead (for an agent run outside a container that should
take its daemon along).
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import logging
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from services.imex_agent.binaries import Imex, ImexProcess, ImexStartError, NotAdoptableError
from services.imex_agent.files import remove, write_if_changed, write_in_place_if_changed
from services.imex_agent.hostsfile import merge, parse_block
from services.imex_agent.imexconfig import ImexPaths, render_config
from services.imex_agent.metrics import AgentMetrics
from services.imex_agent.preflight import DaemonRecord, answering_ports, read_record, write_record
from services.imex_agent.roster import Member, Roster, render_nodes_config, slot_hostname
from services.imex_agent.settings import ImexSettings
from services.imex_agent.status import ControlState, Phase

log = logging.getLogger("cdo.imex_agent.daemon")


class Target(msgspec.Struct, frozen=True, kw_only=True):
    """What the daemon should serve: the node's clique and its roster (None while unknown)."""

    clique: str | None
    roster: Roster | None = None
    detail: str = ""


class Serving(msgspec.Struct, frozen=True, kw_only=True):
    """What the running daemon was started with, as far as :func:`decide` needs it."""

    clique: str
    slot: int
    config_digest: str
    """:func:`digest` of its ``config.cfg``."""
    map_digest: str
    """:func:`digest` of its ``nodes_config.cfg``."""


class Action(enum.StrEnum):
    IDLE = "idle"
    """Nothing runs and nothing should."""
    START = "start"
    """Nothing runs; start a daemon (once a restart backoff has passed)."""
    KEEP = "keep"
    """The running daemon serves the target: apply the hosts mapping (SIGUSR1 when it changed)."""
    WAIT = "wait"
    """The daemon serves the node's clique, whose roster is not known yet (an agent that has just
    adopted it): leave it as it is."""
    HOLD = "hold"
    """The node left its clique: keep the daemon until the leave grace ends."""
    STOP = "stop"
    """Stop the daemon and run none."""
    RESTART = "restart"
    """Stop the daemon; the next step starts one with the new files."""


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    action: Action
    phase: Phase = Phase.RUNNING
    """What to report while (or after) the action is taken."""
    reason: str = ""
    """Why a daemon stops (the ``reason`` label of the next start)."""
    wait_s: float | None = None
    """HOLD: seconds of the leave grace still to run."""


def decide(
    *,
    node: str,
    target: Target,
    serving: Serving | None,
    config: str,
    nodes_config: str | None,
    left_since: float | None,
    now: float,
    grace_s: float,
) -> Decision:
    """What to do with the node's daemon now (pure; see the module docstring).

    ``config`` and ``nodes_config`` are the files the target calls for (``nodes_config`` None
    without a clique); ``left_since`` is when the node was first seen out of its clique while its
    daemon ran (None: it was a member at the last step).
    """
    roster = target.roster
    member = roster.member(node) if roster is not None else None
    out = Phase.NO_CLIQUE if target.clique is None else Phase.NOT_IN_ROSTER
    if serving is None:
        if member is None:
            return Decision(action=Action.IDLE, phase=out)
        return Decision(action=Action.START)
    if roster is None and target.clique == serving.clique:
        return Decision(action=Action.WAIT)
    if member is not None:
        wanted_map = digest(nodes_config) if nodes_config is not None else ""
        if member.slot != serving.slot or wanted_map != serving.map_digest:
            return Decision(action=Action.RESTART, reason="node_map")
        if digest(config) != serving.config_digest:
            return Decision(action=Action.RESTART, reason="config")
        return Decision(action=Action.KEEP)
    if target.clique is not None and target.clique != serving.clique:
        return Decision(action=Action.STOP, phase=out, reason="node_map")
    rival = roster.at(serving.slot) if roster is not None else None
    if rival is not None:
        return Decision(action=Action.STOP, phase=out, reason="roster")
    remaining = (now if left_since is None else left_since) + grace_s - now
    if remaining > 0:
        return Decision(action=Action.HOLD, wait_s=remaining)
    return Decision(action=Action.STOP, phase=out, reason="roster")


def reload_wait(*, last_reload: float, interval_s: float, now: float) -> float:
    """Seconds until the next SIGUSR1 may be sent (0: now)."""
    return max(0.0, last_reload + interval_s - now)


def served_hosts(roster: Roster, *, empty: str, own_slot: int, own_address: str) -> dict[str, str]:
    """The hosts mapping of a daemon that serves ``roster`` from ``own_slot`` (pure).

    Every slot's name: its member's address or the sentinel ``empty``; this node's own slot is
    always its own address, even while the node is out of the roster (its daemon is held).
    """
    hosts = roster.hosts(empty=empty)
    hosts[slot_hostname(roster.clique, own_slot)] = own_address
    return hosts


class _Running(msgspec.Struct, frozen=True, kw_only=True):
    """What the running daemon was started with (and the hosts mapping it was last told)."""

    serving: Serving
    roster: Roster
    hosts: dict[str, str]
    started_at: float


def digest(text: str) -> str:
    """The digest of a daemon file the events and the daemon record carry (pure)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def map_digest(nodes_config: str) -> str:
    """The digest of a node map (``config_digest`` in the events; equal across a clique)."""
    return digest(nodes_config)


def record_of(process: ImexProcess, serving: Serving) -> DaemonRecord:
    """The daemon record of ``process`` serving ``serving`` (pure)."""
    return DaemonRecord(
        process=process.identity,
        clique=serving.clique,
        slot=serving.slot,
        config_digest=serving.config_digest,
        map_digest=serving.map_digest,
    )


def serving_of(record: DaemonRecord) -> Serving:
    """What an adopted daemon serves, as its record says (pure)."""
    return Serving(
        clique=record.clique,
        slot=record.slot,
        config_digest=record.config_digest,
        map_digest=record.map_digest,
    )


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
        self._next_start = 0.0
        self._failures = 0
        self._start_reason = "initial"
        self._left_since: float | None = None
        self._last_reload = 0.0
        self._reload_pending = False
        self._state = ControlState(phase=Phase.NO_CLIQUE, detail="starting")
        self.restarts = 0
        self.reloads = 0
        self.adopted = False
        """This controller took over a daemon an earlier agent left running."""

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
        """The roster the running daemon's hosts mapping was last written for (None: none runs)."""
        return self._running.roster if self._running is not None else None

    @property
    def slot(self) -> int | None:
        """The running daemon's slot in the node map (None when none runs)."""
        return self._running.serving.slot if self._running is not None else None

    @property
    def holding(self) -> bool:
        """The node left its clique and its daemon runs out the leave grace."""
        return self._left_since is not None

    def wake(self) -> None:
        self._wake.set()

    # -- adoption ---------------------------------------------------------------------------------

    def adopt(self) -> bool:
        """Take over the daemon an earlier agent left running, if its record names one.

        Call once, before :meth:`run` (and before anything reports on the daemon, so that the
        node's condition never sees the agent without its daemon). True when adopted.
        """
        record = read_record(self.paths.pid_file)
        if record is None:
            return False
        try:
            process = self._imex.adopt(record, config=self.paths.config)
        except NotAdoptableError as exc:
            log.info(
                "not adopting the daemon the record names; it is left alone",
                extra={"reason": str(exc), "pid": record.process.pid},
            )
            remove(self.paths.pid_file)
            self._metrics.daemon_adoptions.labels("stale").inc()
            return False
        now = self._clock()
        self._process = process
        self._running = _Running(
            serving=serving_of(record),
            roster=Roster(clique=record.clique, slots=self._settings.max_nodes_per_domain),
            # What the daemon was last told: an unchanged roster needs no SIGUSR1.
            hosts=self._read_hosts(),
            started_at=now,
        )
        self.adopted = True
        # When the previous agent last signalled is not known: a SIGUSR1 waits one window.
        self._last_reload = now
        self._metrics.daemon_adoptions.labels("adopted").inc()
        log.info(
            "adopted the running nvidia-imex",
            extra={
                "pid": process.pid,
                "clique": record.clique,
                "slot": record.slot,
                "digest": record.map_digest,
            },
        )
        self._set_state(Phase.RUNNING, clique=record.clique)
        return True

    # -- the loop ---------------------------------------------------------------------------------

    async def run(self) -> None:
        """Converge until cancelled; then leave the daemon running (or stop it: stop_on_exit)."""
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                if self._process is not None:  # adopted
                    group.create_task(
                        self._watch(self._process), name=f"nvidia-imex {self._process.pid}"
                    )
                await self._loop()
        finally:
            self._group = None
            if self._settings.stop_on_exit:
                await self._stop("shutdown")
            else:
                self._leave_running()

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
        settings = self._settings
        config = render_config(settings=settings, address=self._address, paths=self.paths)
        nodes_config = (
            render_nodes_config(target.clique, slots=settings.max_nodes_per_domain)
            if target.clique is not None
            else None
        )
        running = self._running
        decision = decide(
            node=self._node,
            target=target,
            serving=running.serving if running is not None else None,
            config=config,
            nodes_config=nodes_config,
            left_since=self._left_since,
            now=now,
            grace_s=settings.leave_grace_s,
        )
        if decision.action is not Action.HOLD:
            self._left_since = None
        match decision.action:
            case Action.IDLE:
                self._set_state(decision.phase, clique=target.clique or "", detail=target.detail)
                return None
            case Action.STOP | Action.RESTART:
                await self._stop(decision.reason)
                return 0
            case Action.START:
                assert target.roster is not None and target.clique is not None
                assert nodes_config is not None
                member = target.roster.member(self._node)
                assert member is not None
                return await self._start(target.roster, member, config, nodes_config, now)
            case Action.HOLD:
                assert running is not None
                if self._left_since is None:
                    self._left_since = now
                    log.warning(
                        "this node left its clique; keeping its IMEX daemon for the leave grace",
                        extra={"detail": target.detail, "grace_s": settings.leave_grace_s},
                    )
                if target.roster is not None and target.clique == running.serving.clique:
                    self._apply_hosts(target.roster)
                wait = decision.wait_s if decision.wait_s is not None else 0.0
                detail = (
                    f"left clique {running.serving.clique}"
                    + (f" ({target.detail})" if target.detail else "")
                    + f"; the daemon stops {settings.leave_grace_s:g} s after that unless the "
                    "node rejoins"
                )
                self._set_state(Phase.RUNNING, clique=running.serving.clique, detail=detail)
                due = self._signal_if_due(now)
                return wait if due is None else min(wait, due)
            case Action.KEEP:
                assert target.roster is not None and running is not None
                self._apply_hosts(target.roster)
                self._set_state(Phase.RUNNING, clique=running.serving.clique)
                return self._signal_if_due(now)
            case Action.WAIT:
                assert running is not None
                self._set_state(Phase.RUNNING, clique=running.serving.clique)
                return None

    def _apply_hosts(self, roster: Roster) -> None:
        """Point the slots' names at the roster's members (and empty slots at the sentinel)."""
        running = self._running
        assert running is not None
        hosts = served_hosts(
            roster,
            empty=self._settings.empty_slot_address,
            own_slot=running.serving.slot,
            own_address=self._address,
        )
        if hosts != running.hosts:
            self._write_hosts(hosts)
            self._reload_pending = True
            log.info(
                "hosts mapping changed",
                extra={"members": len(roster.members), "slots": roster.slots},
            )
        self._running = msgspec.structs.replace(running, hosts=hosts, roster=roster)

    def _signal_if_due(self, now: float) -> float | None:
        """SIGUSR1 for a pending hosts change when IMEX takes one; seconds until then, or None."""
        if not self._reload_pending:
            return None
        wait = reload_wait(
            last_reload=self._last_reload,
            interval_s=self._settings.reload_min_interval_s,
            now=now,
        )
        if wait > 0:
            return wait
        self._reload(now)
        return None

    # -- actions ----------------------------------------------------------------------------------

    async def _start(
        self, roster: Roster, member: Member, config: str, nodes_config: str, now: float
    ) -> float | None:
        if now < self._next_start:
            return self._next_start - now
        settings = self._settings
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
        hosts = served_hosts(
            roster,
            empty=settings.empty_slot_address,
            own_slot=member.slot,
            own_address=self._address,
        )
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
        serving = Serving(
            clique=roster.clique,
            slot=member.slot,
            config_digest=digest(config),
            map_digest=map_digest(nodes_config),
        )
        self._process = process
        self._running = _Running(serving=serving, roster=roster, hosts=hosts, started_at=now)
        reason = self._start_reason
        if reason != "initial":
            self.restarts += 1
        write_record(self.paths.pid_file, record_of(process, serving))
        self._metrics.daemon_starts.labels(reason).inc()
        # IMEX may count its SIGUSR1 window from start-up; the hosts file is current anyway.
        self._last_reload = now
        self._reload_pending = False
        log.info(
            "nvidia-imex started",
            extra={
                "pid": process.pid,
                "reason": reason,
                "slot": member.slot,
                "members": len(roster.members),
                "digest": serving.map_digest,
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
        self._left_since = None
        remove(self.paths.pid_file)
        if running is not None and now - running.started_at >= self._settings.stable_after_s:
            self._failures = 0
        self._start_reason = "exited"
        how = f"exited with code {code}" if code is not None else "exited"
        self._schedule_restart(now, detail=how)
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
        self._left_since = None
        self._start_reason = reason
        code = await process.stop(timeout_s=self._settings.stop_timeout_s)
        remove(self.paths.pid_file)
        log.info("nvidia-imex stopped", extra={"reason": reason, "exit_code": code})
        self._on_change()

    def _leave_running(self) -> None:
        """The agent goes; its daemon and its record stay for the next agent to adopt."""
        process = self._process
        if process is None:
            return
        self._process = None
        self._running = None
        process.release()
        log.info("leaving nvidia-imex running for the next agent", extra={"pid": process.pid})

    def _read_hosts(self) -> dict[str, str]:
        try:
            return parse_block(self.hosts_file.read_text())
        except FileNotFoundError:
            return {}

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
            config_digest=running.serving.map_digest if running is not None else "",
        )
        if state != self._state:
            self._state = state
            self._on_change()
