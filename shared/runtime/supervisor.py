"""Supervision of a service's root tasks, and its ordered shutdown.

Root tasks run until the service stops. The first one that fails (raises, or returns although it
should run until shutdown) stops the others and makes the process exit non-zero; SIGTERM or
SIGINT stops them with exit code 0. Shutdown then runs in phases:

1. ``intake`` steps: stop taking new work (unready, unsubscribe, stop watches);
2. root tasks are cancelled and awaited;
3. ``drain`` steps: finish what is in flight (flush publishes, close connections);
4. ``final`` steps: flush traces, stop the probe server.

Every step has a timeout and a failing step does not stop the ones after it. Finally any task
still alive is reported (``leftover_tasks`` in the last log record) and cancelled.

The exit code of a failure is 1, or the failed root's exception's own ``exit_code`` where it has
one (:class:`shared.errors.UnsuitableClusterError`: 2, the cluster or a setting must change).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

Phase = Literal["intake", "drain", "final"]
_PHASES: tuple[Phase, ...] = ("intake", "drain", "final")

LEFTOVER_GRACE_S = 0.5
"""How long tasks already on their way out get before the rest count as leftovers."""
EXIT_OK = 0
EXIT_FATAL = 1

log = logging.getLogger("cdo.runtime")


@dataclass
class _Root:
    name: str
    until_stop: bool


@dataclass
class _Step:
    name: str
    action: Callable[[], Awaitable[None] | None]


@dataclass
class Supervisor:
    """Runs root tasks; see the module docstring for the rules."""

    step_timeout_s: float = 10.0
    _roots: dict[asyncio.Task[Any], _Root] = field(default_factory=dict)
    _steps: dict[Phase, list[_Step]] = field(
        default_factory=lambda: {phase: [] for phase in _PHASES}
    )
    _wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    _stop_reason: str | None = None

    def start(
        self, name: str, coro: Coroutine[Any, Any, Any], *, until_stop: bool = True
    ) -> asyncio.Task[Any]:
        """Run ``coro`` as a root task.

        ``until_stop`` roots must run until shutdown; one that returns counts as a failure.
        Others (start-up work) may finish; only an exception from them is a failure.
        """
        task = asyncio.create_task(coro, name=name)
        self._roots[task] = _Root(name=name, until_stop=until_stop)
        task.add_done_callback(lambda _task: self._wakeup.set())
        return task

    def on_shutdown(
        self, name: str, action: Callable[[], Awaitable[None] | None], *, phase: Phase
    ) -> None:
        """Run ``action`` during shutdown in ``phase``, after the steps added before it."""
        self._steps[phase].append(_Step(name=name, action=action))

    def request_stop(self, reason: str) -> None:
        """Begin an orderly shutdown with exit code 0."""
        if self._stop_reason is None:
            self._stop_reason = reason
        self._wakeup.set()

    def _failure(self) -> tuple[str, int] | None:
        """A description of the first failed root and the exit code it asks for, dropping
        roots that finished cleanly."""
        for task, root in list(self._roots.items()):
            if not task.done():
                continue
            if task.cancelled():
                return f"root task {root.name} was cancelled", EXIT_FATAL
            exc = task.exception()
            if exc is not None:
                error = describe_failure(exc)
                log.error(
                    "root task failed", extra={"task": root.name, "error": error}, exc_info=exc
                )
                code = getattr(exc, "exit_code", EXIT_FATAL)
                return f"root task {root.name} failed: {error}", int(code)
            if root.until_stop:
                return f"root task {root.name} returned before shutdown", EXIT_FATAL
            del self._roots[task]
        return None

    async def run(self) -> int:
        """Wait for a stop request or a failure, shut down, return the exit code."""
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT)
        for signum in signals:
            loop.add_signal_handler(signum, self.request_stop, signal.Signals(signum).name)
        try:
            code = await self._wait()
            await self._shutdown()
        finally:
            for signum in signals:
                loop.remove_signal_handler(signum)
        await self._reap_leftovers(code)
        return code

    async def _wait(self) -> int:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            if self._stop_reason is not None:
                log.info("stopping", extra={"reason": self._stop_reason})
                return EXIT_OK
            failure = self._failure()
            if failure is not None:
                reason, code = failure
                log.error("stopping after a fatal error", extra={"reason": reason})
                return code

    async def _run_steps(self, phase: Phase) -> None:
        for step in self._steps[phase]:
            try:
                result = step.action()
                if result is not None:
                    await asyncio.wait_for(result, self.step_timeout_s)
            except Exception as exc:
                log.warning(
                    "shutdown step failed",
                    extra={
                        "step": step.name,
                        "phase": phase,
                        "error": f"{type(exc).__name__}: {exc}",
                    },
                )

    async def _shutdown(self) -> None:
        await self._run_steps("intake")
        roots = [task for task in self._roots if not task.done()]
        for task in roots:
            task.cancel()
        if roots:
            await asyncio.wait(roots, timeout=self.step_timeout_s)
        await self._run_steps("drain")
        await self._run_steps("final")

    async def _reap_leftovers(self, code: int) -> None:
        current = asyncio.current_task()
        leftovers = [task for task in asyncio.all_tasks() if task is not current]
        if leftovers:
            # Tasks their owners cancelled in the last steps without awaiting them (a client
            # library's reader, say) end within a moment; count only what nobody stopped.
            await asyncio.wait(leftovers, timeout=LEFTOVER_GRACE_S)
            leftovers = [task for task in leftovers if not task.done()]
        log.info(
            "shutdown complete",
            extra={
                "exit_code": code,
                "leftover_tasks": len(leftovers),
                "leftover_names": sorted(task.get_name() for task in leftovers),
            },
        )
        for task in leftovers:
            task.cancel()
        if leftovers:
            await asyncio.wait(leftovers, timeout=self.step_timeout_s)


def describe_failure(exc: BaseException) -> str:
    """``Type: message`` of what failed; a task group's errors by their own, not as "unhandled
    errors in a TaskGroup", so that the reason names the cause."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe_failure(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"
