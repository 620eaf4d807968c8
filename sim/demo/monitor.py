"""The live view: polls the API a few times a second for one target (the objects an act's
manifests create), prints the progress line whenever it changes, keeps the fewest IMEX-ready
nodes it saw since the story asked (:meth:`Monitor.watch_imex`), and lets the story wait, with
a deadline, for what it expects to see. :func:`following` runs one for the length of an act."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TypeVar

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from sim.demo.observe import ClusterView, Target, observe
from sim.demo.progress import progress_line
from sim.demo.screen import Screen

T = TypeVar("T")

POLL_INTERVAL_S = 0.2


class StoryError(Exception):
    """A step of the story failed; ``logs`` are the logs that say why."""

    def __init__(self, message: str, *, logs: Sequence[Path] = ()) -> None:
        super().__init__(message)
        self.logs = tuple(logs)


class Monitor:
    def __init__(self, client: KubeClient, target: Target, screen: Screen) -> None:
        self._client = client
        self._target = target
        self._screen = screen
        self._polled = asyncio.Condition()
        self._line: str | None = None
        self.latest = ClusterView()
        self.last_error: str | None = None
        self.imex_low: int | None = None
        """The fewest IMEX-ready nodes seen since :meth:`watch_imex` (None: none seen yet)."""

    def watch_imex(self) -> None:
        """Start counting the fewest IMEX-ready nodes afresh (:attr:`imex_low`)."""
        self.imex_low = None

    async def run(self) -> None:
        while True:
            try:
                view = await observe(self._client, self._target)
            except (KubeApiError, OSError, TimeoutError) as exc:
                # The API emulator is a separate process: a slow answer on a busy machine is
                # no reason to stop watching; a lasting failure shows up as a step's timeout.
                self.last_error = str(exc) or type(exc).__name__
            else:
                self.last_error = None
                line = progress_line(view)
                if line != self._line:
                    self._line = line
                    self._screen.live(line)
                async with self._polled:
                    self.latest = view
                    self.imex_low = (
                        view.imex_ready
                        if self.imex_low is None
                        else min(self.imex_low, view.imex_ready)
                    )
                    self._polled.notify_all()
            await asyncio.sleep(POLL_INTERVAL_S)

    async def until(
        self,
        check: Callable[[ClusterView], T | None],
        *,
        what: str,
        timeout_s: float,
        logs: Sequence[Path] = (),
    ) -> T:
        """The first non-None, non-False result of ``check`` on a new observation."""
        found: list[T] = []

        def holds() -> bool:
            result = check(self.latest)
            if result is None or result is False:
                return False
            found.append(result)
            return True

        try:
            async with asyncio.timeout(timeout_s), self._polled:
                await self._polled.wait_for(holds)
        except TimeoutError:
            detail = f" (last API error: {self.last_error})" if self.last_error else ""
            raise StoryError(
                f"{what} did not happen within {timeout_s:.0f} s{detail}", logs=logs
            ) from None
        return found[-1]


@contextlib.asynccontextmanager
async def following(client: KubeClient, target: Target, screen: Screen) -> AsyncIterator[Monitor]:
    """A :class:`Monitor` of ``target`` polling until the block ends (one at a time on screen)."""
    monitor = Monitor(client, target, screen)
    task = asyncio.create_task(monitor.run(), name=f"demo-monitor-{target.domain}")
    try:
        yield monitor
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
