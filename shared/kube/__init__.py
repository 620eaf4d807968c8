"""Controller core: keys, the work queue, the reconcile loop, mapping secondary kinds to keys.

    queue = WorkQueue[ObjectKey](name="domains", metrics=ctx.metrics)
    runner = ReconcileRunner(name="domains", queue=queue, reconcile=reconcile, metrics=ctx.metrics)
    on_template = enqueue_mapped(queue, map_by_owner(group=GROUP, kind="ComputeDomain"))
    ctx.supervisor.start("domains", runner.run())
    ctx.supervisor.on_shutdown("drain domains", runner.drain, phase="intake")

The rules are in docs/controller-runtime.md and in each module's docstring.
"""

from shared.errors import QueueShutDownError, TerminalError
from shared.kube.clock import Clock, ManualClock, MonotonicClock, Timer
from shared.kube.keys import ObjectKey, key_of
from shared.kube.mapping import (
    KeyMapper,
    enqueue_mapped,
    map_by_index,
    map_by_label,
    map_by_owner,
    own_key,
    union,
)
from shared.kube.ratelimit import RateLimitSettings
from shared.kube.reconcile import Reconcile, ReconcileRunner, Result, RunnerSettings
from shared.kube.workqueue import WorkQueue

__all__ = [
    "Clock",
    "KeyMapper",
    "ManualClock",
    "MonotonicClock",
    "ObjectKey",
    "QueueShutDownError",
    "RateLimitSettings",
    "Reconcile",
    "ReconcileRunner",
    "Result",
    "RunnerSettings",
    "TerminalError",
    "Timer",
    "WorkQueue",
    "enqueue_mapped",
    "key_of",
    "map_by_index",
    "map_by_label",
    "map_by_owner",
    "own_key",
    "union",
]
