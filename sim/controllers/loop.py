"""The shell every simulated controller shares: a work queue of keys and its reconcile runner.

A controller builds one :class:`Loop` per root kind it reconciles, connects informer events to
it with :meth:`Loop.on_change` and a key mapper, and lets the manager run and drain it.
"""

from __future__ import annotations

from typing import TypeVar

from shared.kube.informer import Handler
from shared.kube.keys import ObjectKey
from shared.kube.mapping import KeyMapper
from shared.kube.meta import KubeObject
from shared.kube.ratelimit import RateLimitSettings
from shared.kube.reconcile import Reconcile, ReconcileRunner, RunnerSettings
from shared.kube.workqueue import WorkQueue
from shared.metrics import Metrics

T = TypeVar("T", bound=KubeObject)


class Loop:
    """One root kind's queue and workers."""

    def __init__(
        self,
        *,
        name: str,
        reconcile: Reconcile[ObjectKey],
        metrics: Metrics,
        workers: int,
        rate_limit: RateLimitSettings,
    ) -> None:
        self.name = name
        self.queue = WorkQueue[ObjectKey](name=name, metrics=metrics, rate_limit=rate_limit)
        self.runner = ReconcileRunner(
            name=name,
            queue=self.queue,
            reconcile=reconcile,
            metrics=metrics,
            settings=RunnerSettings(workers=workers),
        )

    def on_change(self, mapper: KeyMapper) -> Handler[T]:
        """An informer handler queueing the keys ``mapper`` finds in the old and new object."""
        queue = self.queue

        def handle(old: T | None, new: T | None) -> None:
            for obj in (old, new):
                if obj is not None:
                    for key in mapper(obj):
                        queue.add(key)

        return handle

    async def run(self) -> None:
        await self.runner.run()

    async def drain(self) -> None:
        await self.runner.drain()
