"""What every leader-elected controller is built from: work queues, reconcile runners, an event
recorder and the leader elector, made from its :class:`ControllerSettings` and started the same
way.

A controller derives from :class:`LeaderElectedController`, builds its caches, queues, runners
and reconcilers in ``__init__`` with the helpers here, and implements ``_lead``: what the Lease
holder runs (it returns only when cancelled). Its writes go through ``leader_client``, which
refuses them once the Lease's renew deadline has passed::

    class DomainController(LeaderElectedController):
        def __init__(self, ctx, *, client, settings):
            super().__init__(ctx, client=client, settings=settings,
                             caches=Caches(client, settings=settings, metrics=ctx.metrics))
            self.domains = self.work_queue("computedomains")
            self.runner = self.reconcile_runner("computedomains", self.domains, reconcile)

        async def _lead(self) -> None:
            ...

:meth:`start` runs the caches on every replica (so a standby takes over warm), then leader
election; at shutdown every runner made here drains in the intake phase and the client closes
last. Losing the Lease raises LeadershipLostError from the elector, which ends the process.
Before it leads, a replica checks that NVIDIA's DRA driver for ComputeDomains is not installed
(shared/crds/coexistence.py): beside it the process ends with the reason and writes nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal, Protocol

from shared.crds.coexistence import refuse_beside_nvidia
from shared.kube.client import KubeClient
from shared.kube.informers import ReadinessChecks, RootTasks
from shared.kube.keys import ObjectKey
from shared.kube.leader import LeaderElector
from shared.kube.reconcile import ReconcileRunner, Result, RunnerSettings
from shared.kube.recorder import EventRecorder
from shared.kube.settings import ControllerSettings
from shared.kube.workqueue import WorkQueue
from shared.metrics import Metrics

ShutdownPhase = Literal["intake", "drain", "final"]
Reconcile = Callable[[ObjectKey], Awaitable[Result]]


class Lifecycle(RootTasks, Protocol):
    """Root tasks and shutdown steps (the runtime's Supervisor)."""

    def on_shutdown(
        self, name: str, action: Callable[[], Awaitable[None] | None], *, phase: ShutdownPhase
    ) -> None: ...


class ControllerContext(Protocol):
    """What a controller takes from its service (the runtime's ServiceContext)."""

    @property
    def instance(self) -> str: ...

    @property
    def metrics(self) -> Metrics: ...

    @property
    def readiness(self) -> ReadinessChecks: ...

    @property
    def supervisor(self) -> Lifecycle: ...


class Caches(Protocol):
    """A controller's informers (an InformerSet)."""

    def start(self, *, supervisor: RootTasks, readiness: ReadinessChecks) -> None: ...

    async def wait_synced(self) -> None: ...


class LeaderElectedController:
    """The parts every controller shares; subclasses add theirs and implement ``_lead``."""

    def __init__(
        self,
        ctx: ControllerContext,
        *,
        client: KubeClient,
        settings: ControllerSettings,
        caches: Caches,
    ) -> None:
        self._ctx = ctx
        self._client = client
        self._settings = settings
        self._caches = caches
        self._runners: list[ReconcileRunner[ObjectKey]] = []
        self.elector = LeaderElector(
            client,
            namespace=settings.lease.namespace,
            name=settings.lease.name,
            identity=ctx.instance,
            settings=settings.leader_election,
            metrics=ctx.metrics,
        )
        self.leader_client = client.fenced(self.elector.lease_left)
        """The client every write of the leader goes through: none is applied once the Lease's
        renew deadline has passed (shared/kube/leader.py)."""

    def work_queue(self, name: str) -> WorkQueue[ObjectKey]:
        """A rate-limited queue of object keys, with the controller's retry settings."""
        return WorkQueue[ObjectKey](
            name=name, metrics=self._ctx.metrics, rate_limit=self._settings.retries
        )

    def reconcile_runner(
        self,
        name: str,
        queue: WorkQueue[ObjectKey],
        reconcile: Reconcile,
        *,
        settings: RunnerSettings | None = None,
    ) -> ReconcileRunner[ObjectKey]:
        """A runner of ``reconcile`` over ``queue`` (the controller's loop settings unless
        ``settings`` is given); it drains at shutdown."""
        runner = ReconcileRunner(
            name=name,
            queue=queue,
            reconcile=reconcile,
            metrics=self._ctx.metrics,
            settings=self._settings.loop if settings is None else settings,
        )
        self._runners.append(runner)
        return runner

    def event_recorder(self, component: str) -> EventRecorder:
        """Kubernetes Events reported as ``component`` by this replica."""
        return EventRecorder(
            self.leader_client,
            component=component,
            instance=self._ctx.instance,
            metrics=self._ctx.metrics,
        )

    def start(self) -> None:
        """Register the root tasks and shutdown steps with the service's supervisor."""
        supervisor = self._ctx.supervisor
        self._caches.start(supervisor=supervisor, readiness=self._ctx.readiness)
        self._start_serving()
        supervisor.start("leader election", self.elector.run(self._lead_alone))
        for runner in self._runners:
            supervisor.on_shutdown(f"drain {runner.name}", runner.drain, phase="intake")
        supervisor.on_shutdown("close kube client", self._client.close, phase="final")

    def _start_serving(self) -> None:
        """What every replica serves besides its caches (a webhook); nothing by default."""

    async def _lead_alone(self) -> None:
        await refuse_beside_nvidia(self._client)
        await self._lead()

    async def _lead(self) -> None:
        raise NotImplementedError
