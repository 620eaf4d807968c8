"""Whether the API server serves one optional API now: asked through discovery, kept current.

    presence = ApiPresence(client, DEVICE_TAINT_RULES_API, recheck_s=300, metrics=metrics,
                           on_change=wake)
    supervisor.start("devicetaintrules presence", presence.run())
    await presence.wait_known()
    if presence.served: ...

A service asks once at start and again every ``recheck_s``, so an API that appears with an
upgrade is used without a restart, and one that goes (a downgrade, a runtime-config change) is
done without. An informer of the API that gets a 404 says so at once (:meth:`ApiPresence.gone`)
instead of waiting for the next look. Each change is said once: a log line (a warning when the
API is not served, with what cdo does without it), the ``cdo_optional_api_served`` gauge, and
``on_change`` for whoever decides differently with and without it.

An unreachable server is not a server without the API: while discovery fails, what was known
stays, and the first answer is awaited (with the informer's backoff) before anything is known.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable

from shared.kube.apis import OptionalApi, serves
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.metrics import Metrics

log = logging.getLogger("cdo.kube.presence")


class ApiPresence:
    """One optional API's presence on the server; see the module docstring."""

    def __init__(
        self,
        client: KubeClient,
        api: OptionalApi,
        *,
        recheck_s: float,
        metrics: Metrics,
        on_change: Callable[[], None] | None = None,
        retry_s: float = 1.0,
    ) -> None:
        self.api = api
        self._client = client
        self._recheck_s = recheck_s
        self._retry_s = retry_s
        self._gauge = metrics.optional_api_served.labels(api.name)
        self._listeners: list[Callable[[], None]] = [on_change] if on_change else []
        self._served: bool | None = None
        self._changed = asyncio.Event()
        self._look_again = asyncio.Event()

    @property
    def served(self) -> bool:
        """Whether the server serves the API, as last seen (False until first known)."""
        return bool(self._served)

    @property
    def known(self) -> bool:
        return self._served is not None

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every change of :attr:`served`."""
        self._listeners.append(listener)

    async def wait_known(self) -> None:
        while self._served is None:
            await self._wait_change()

    async def wait_served(self) -> None:
        while not self._served:
            await self._wait_change()

    async def _wait_change(self) -> None:
        self._changed.clear()
        await self._changed.wait()

    def gone(self) -> None:
        """An informer of the API was told 404: look again now."""
        self._look_again.set()

    async def run(self) -> None:
        """Ask discovery now and every ``recheck_s`` until cancelled."""
        pause = self._retry_s
        while True:
            self._look_again.clear()
            try:
                self._record(await serves(self._client, self.api.resource))
                pause = self._retry_s
                wait = self._recheck_s
            except KubeApiError as exc:
                log.warning(
                    "could not ask the API server which APIs it serves; retrying",
                    extra={"api": self.api.name, "error": str(exc), "pause_s": pause},
                )
                wait = pause * random.uniform(0.8, 1.2)
                pause = min(pause * 2, self._recheck_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._look_again.wait(), timeout=wait)

    def _record(self, served: bool) -> None:
        if served == self._served:
            return
        first = self._served is None
        self._served = served
        self._gauge.set(1 if served else 0)
        if served:
            log.info(
                "optional API served; using it" if first else "optional API now served; using it",
                extra={"api": self.api.name},
            )
        else:
            log.warning(
                "optional API not served; doing without it",
                extra={"api": self.api.name, "without": self.api.without},
            )
        self._changed.set()
        for listener in self._listeners:
            listener()
