"""The daemon controller: the loop that keeps one node's IMEX daemon as its target says.

Each step asks :func:`~services.imex_agent.daemon.rules.decide` what to do and carries it out:
writing the daemon's files, starting it through the :class:`Imex` handle, watching it, sending
SIGUSR1 (:mod:`.signalling`), stopping it; :mod:`.adoption` finds a daemon an earlier agent
left running. The package docstring describes the actions.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

from services.imex_agent.binaries import Imex, ImexProcess, ImexStartError
from services.imex_agent.daemon.adoption import find_recorded
from services.imex_agent.daemon.backoff import RestartBackoff
from services.imex_agent.daemon.rules import (
    Action,
    Decision,
    Running,
    Target,
    decide,
    foreign_detail,
    hold_detail,
    programs_detail,
    record_of,
    served_hosts,
    serving_for,
    serving_of,
    wanted_files,
)
from services.imex_agent.daemon.signalling import HostsSignal, read_hosts, write_hosts
from services.imex_agent.files import remove, write_if_changed
from services.imex_agent.imexconfig import ImexPaths
from services.imex_agent.metrics import AgentMetrics
from services.imex_agent.preflight import answering_ports, write_record
from services.imex_agent.roster import Member, Roster
from services.imex_agent.settings import ImexSettings
from services.imex_agent.status import ControlState, Phase

log = logging.getLogger("cdo.imex_agent.daemon")


class DaemonController:
    """Keeps one node's IMEX daemon as the target says; see the package docstring."""

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
        credentials_ready: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._node = node
        self._address = address
        self._settings = settings
        self._imex = imex
        self._target = target
        self._metrics = metrics
        self._on_change = on_change
        self._credentials_ready = credentials_ready
        self._clock = clock
        self.paths = ImexPaths(directory=settings.directory)
        self.hosts_file = Path(settings.hosts_file)
        self._wake = asyncio.Event()
        self._process: ImexProcess | None = None
        self._running: Running | None = None
        self._group: asyncio.TaskGroup | None = None
        self._backoff = RestartBackoff(
            initial_s=settings.restart_backoff_initial_s,
            max_s=settings.restart_backoff_max_s,
            stable_after_s=settings.stable_after_s,
        )
        self._start_reason = "initial"
        self._left_since: float | None = None
        self._signal = HostsSignal(
            hosts_file=self.hosts_file,
            interval_s=settings.reload_min_interval_s,
            empty_address=settings.empty_slot_address,
            own_address=address,
            metrics=metrics,
            on_change=on_change,
        )
        self._state = ControlState(phase=Phase.NO_CLIQUE, detail="starting")
        self.restarts = 0
        self.adopted = False
        """This controller took over a daemon an earlier agent left running."""

    # -- what others read -----------------------------------------------------------------------

    @property
    def state(self) -> ControlState:
        return self._state

    @property
    def reloads(self) -> int:
        """SIGUSR1s sent for a changed hosts mapping."""
        return self._signal.count

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

    def credentials_renewed(self) -> None:
        """The node's IMEX key and certificate were replaced: a running daemon owes a SIGUSR1
        (it reloads them), a daemon waiting for them may start."""
        if self._running is not None:
            self._signal.owe()
        self._wake.set()

    # -- adoption ---------------------------------------------------------------------------------

    def adopt(self) -> bool:
        """Take over the daemon an earlier agent left running, if its record names one.

        Call once, before :meth:`run` (and before anything reports on the daemon, so that the
        node's condition never sees the agent without its daemon). True when adopted.
        """
        found = find_recorded(paths=self.paths, imex=self._imex, metrics=self._metrics)
        if found is None:
            return False
        process, record = found
        now = self._clock()
        self._process = process
        self._running = Running(
            serving=serving_of(record),
            roster=Roster(clique=record.clique, slots=self._settings.max_nodes_per_domain),
            # What the daemon was last told: an unchanged roster needs no SIGUSR1.
            hosts=read_hosts(self.hosts_file),
            started_at=now,
        )
        self.adopted = True
        # When the previous agent last signalled is not known: a SIGUSR1 waits one window.
        self._signal.opened(now)
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
        config, nodes_config = wanted_files(
            settings, address=self._address, paths=self.paths, clique=target.clique
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
                return self._hold(target, running, decision, now)
            case Action.KEEP:
                assert target.roster is not None and running is not None
                self._apply_hosts(target.roster)
                self._set_state(Phase.RUNNING, clique=running.serving.clique)
                return self._signal_if_due(now)
            case Action.WAIT:
                assert running is not None
                self._set_state(Phase.RUNNING, clique=running.serving.clique)
                return None

    def _hold(self, target: Target, running: Running, decision: Decision, now: float) -> float:
        """Keep the daemon of a node that left its clique through the leave grace."""
        grace_s = self._settings.leave_grace_s
        if self._left_since is None:
            self._left_since = now
            log.warning(
                "this node left its clique; keeping its IMEX daemon for the leave grace",
                extra={"detail": target.detail, "grace_s": grace_s},
            )
        if target.roster is not None and target.clique == running.serving.clique:
            self._apply_hosts(target.roster)
        wait = decision.wait_s if decision.wait_s is not None else 0.0
        clique = running.serving.clique
        detail = hold_detail(clique=clique, why=target.detail, grace_s=grace_s)
        self._set_state(Phase.RUNNING, clique=clique, detail=detail)
        due = self._signal_if_due(now)
        return wait if due is None else min(wait, due)

    def _apply_hosts(self, roster: Roster) -> None:
        assert self._running is not None
        self._running = self._signal.apply(self._running, roster)

    def _signal_if_due(self, now: float) -> float | None:
        return self._signal.signal_if_due(self._process, now)

    # -- actions ----------------------------------------------------------------------------------

    async def _start(
        self, roster: Roster, member: Member, config: str, nodes_config: str, now: float
    ) -> float | None:
        wait = self._backoff.wait(now)
        if wait > 0:
            return wait
        settings = self._settings
        if self._programs_missing(roster.clique):
            return settings.poll_interval_s
        if settings.foreign_check and await self._foreign(roster.clique):
            return settings.poll_interval_s
        if not self._credentials_ready():
            self._set_state(
                Phase.WAITING,
                clique=roster.clique,
                detail="waiting for this node's IMEX certificate (CertificateSigningRequest "
                "for the cdo signer)",
            )
            return None
        hosts = served_hosts(
            roster,
            empty=settings.empty_slot_address,
            own_slot=member.slot,
            own_address=self._address,
        )
        write_hosts(self.hosts_file, hosts)
        write_if_changed(self.paths.nodes_config, nodes_config)
        write_if_changed(self.paths.config, config)
        try:
            process = await self._imex.start(self.paths.config, output=self.paths.output)
        except ImexStartError as exc:
            log.error("cannot start nvidia-imex", extra={"error": str(exc)})
            self._metrics.errors.labels("imex_start").inc()
            self._schedule_restart(now, detail=str(exc))
            return self._backoff.wait(now)
        serving = serving_for(roster.clique, member.slot, config=config, nodes_config=nodes_config)
        self._started(process, Running(serving=serving, roster=roster, hosts=hosts, started_at=now))
        return None

    def _programs_missing(self, clique: str) -> bool:
        """Whether nvidia-imex or nvidia-imex-ctl cannot be found (then none is started)."""
        missing = self._imex.missing_programs()
        if not missing:
            return False
        if self._state.phase is not Phase.PROGRAMS_MISSING:
            log.error(
                "the IMEX programs are missing; not starting a daemon",
                extra={"missing": list(missing)},
            )
        self._set_state(Phase.PROGRAMS_MISSING, clique=clique, detail=programs_detail(missing))
        return True

    async def _foreign(self, clique: str) -> bool:
        """Whether another IMEX daemon answers on this node's ports (then none is started)."""
        settings = self._settings
        answering = await answering_ports(self._address, (settings.server_port, settings.cmd_port))
        if not answering:
            return False
        if self._state.phase is not Phase.FOREIGN:
            log.error(
                "another IMEX daemon runs on this node; not starting one",
                extra={"address": self._address, "ports": answering},
            )
        self._set_state(
            Phase.FOREIGN, clique=clique, detail=foreign_detail(self._address, answering)
        )
        return True

    def _started(self, process: ImexProcess, running: Running) -> None:
        """Record, count and watch a daemon just started."""
        serving = running.serving
        self._process = process
        self._running = running
        reason = self._start_reason
        if reason != "initial":
            self.restarts += 1
        write_record(self.paths.pid_file, record_of(process, serving))
        self._metrics.daemon_starts.labels(reason).inc()
        # IMEX may count its SIGUSR1 window from start-up; the hosts file is current anyway.
        self._signal.opened(running.started_at)
        log.info(
            "nvidia-imex started",
            extra={
                "pid": process.pid,
                "reason": reason,
                "slot": serving.slot,
                "members": len(running.roster.members),
                "digest": serving.map_digest,
                "restarts": self.restarts,
            },
        )
        assert self._group is not None
        self._group.create_task(self._watch(process), name=f"nvidia-imex {process.pid}")
        self._set_state(Phase.RUNNING, clique=serving.clique)

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
        if running is not None:
            self._backoff.ran(now - running.started_at)
        self._start_reason = "exited"
        how = f"exited with code {code}" if code is not None else "exited"
        self._schedule_restart(now, detail=how)
        log.warning(
            "nvidia-imex exited; restarting it",
            extra={"exit_code": code, "restart_in_s": round(self._backoff.wait(now), 3)},
        )
        self._wake.set()

    def _schedule_restart(self, now: float, *, detail: str) -> None:
        delay = self._backoff.failed(now)
        self._set_state(
            Phase.WAITING,
            clique=self._state.clique,
            detail=f"{detail}; restarting in {delay:.1f} s",
        )

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
