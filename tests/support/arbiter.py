"""The circuit breaker's arbiter in a test, as the clique allocator's leader runs it.

Health monitors claim NoExecute and the arbiter answers (docs/health-monitor.md, "Circuit
breaker"); a test that runs monitors without the clique allocator runs this beside them:

    arbiter = Arbiter(client)
    await arbiter.start(BreakerSettings(clique_share=0.25))   # or ensure(): the defaults
    ...
    await arbiter.stop()
"""

from __future__ import annotations

import asyncio
import contextlib

from services.clique_allocator.breaker import BreakerArbiter, BreakerSettings
from services.clique_allocator.metrics import AllocatorMetrics
from shared.kube.client import KubeClient
from shared.kube.informer import Informer, InformerSettings
from shared.kube.models import Node
from shared.kube.resources import NODES
from shared.metrics import Metrics


class Arbiter:
    """One arbiter of a test, with the caps the test chooses (``ensure`` starts one with the
    defaults when the test has not)."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self._task: asyncio.Task[None] | None = None
        self._none = False
        self.metrics = Metrics()
        self._rulings = AllocatorMetrics(self.metrics).breaker_rulings

    @property
    def running(self) -> bool:
        return self._task is not None

    async def start(self, settings: BreakerSettings | None = None) -> None:
        assert self._task is None, "one arbiter per test: two would both answer"
        nodes = Informer(
            self._client, NODES, Node, settings=InformerSettings(backoff_initial_s=0.05)
        )
        arbiter = BreakerArbiter(
            nodes=nodes,
            reader=self._client,
            writer=self._client,
            settings=settings or BreakerSettings(),
            rulings=self._rulings,
        )

        async def run() -> None:
            async with asyncio.TaskGroup() as group:
                group.create_task(nodes.run())
                group.create_task(arbiter.run())

        self._task = asyncio.create_task(run())

    def start_none(self) -> None:
        """This test runs without an arbiter until it starts one."""
        self._none = True

    async def ensure(self) -> None:
        if self._task is None and not self._none:
            await self.start()

    def count(self, result: str) -> float:
        """Rulings of ``result`` (granted, refused, offered) so far."""
        value = self.metrics.registry.get_sample_value(
            "cdo_breaker_rulings_total", {"result": result}
        )
        return 0.0 if value is None else float(value)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
