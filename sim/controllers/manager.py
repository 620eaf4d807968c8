"""Runs the simulated workload controllers against one API server.

    manager = ControllerManager(client)            # every controller
    supervisor.start("controllers", manager.run())
    supervisor.on_shutdown("drain controllers", manager.drain, phase="intake")

or, where something else owns the task (a test, an embedding script)::

    async with manager.running():                  # returns once every cache has synced
        ...

:meth:`ControllerManager.run` starts the informers the chosen controllers need, waits until each
has listed, then starts every controller's workers, all in one task group: the first failure
stops everything and propagates; cancelling ``run`` stops everything. ``drain`` lets reconciles
in flight finish and makes ``run`` return.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Annotated, Any, Literal

from msgspec import Meta

from shared.kube.client import KubeClient
from shared.kube.informer import InformerSettings
from shared.kube.ratelimit import RateLimitSettings
from shared.kube.recorder import EventRecorder
from shared.metrics import Metrics
from shared.runtime.supervisor import Supervisor
from shared.settings import Settings
from sim.controllers.crds import install_workload_crds
from sim.controllers.deployment import DeploymentController
from sim.controllers.devicetaint import DeviceTaintEvictionController
from sim.controllers.disruption import DisruptionController
from sim.controllers.informers import SharedInformers
from sim.controllers.job import JobController
from sim.controllers.jobset import JobSetController
from sim.controllers.leaderworkerset import LeaderWorkerSetController
from sim.controllers.loop import Loop
from sim.controllers.replicaset import ReplicaSetController
from sim.controllers.resourceclaim import ResourceClaimController
from sim.controllers.statefulset import StatefulSetController
from sim.release import DeviceTaintSupport

ControllerName = Literal[
    "deployment",
    "replicaset",
    "job",
    "resourceclaim",
    "devicetaint",
    "disruption",
    "statefulset",
    "jobset",
    "leaderworkerset",
]
ALL_CONTROLLERS: tuple[ControllerName, ...] = (
    "deployment",
    "replicaset",
    "job",
    "resourceclaim",
    "devicetaint",
    "disruption",
    "statefulset",
    "jobset",
    "leaderworkerset",
)
CRD_CONTROLLERS: frozenset[ControllerName] = frozenset({"jobset", "leaderworkerset"})
"""Controllers of kinds a CRD defines: the manager installs those CRDs before it starts them."""


class ControllerSettings(Settings, frozen=True, kw_only=True):
    """Which simulated controllers run and how."""

    controllers: Annotated[
        tuple[ControllerName, ...],
        Meta(
            description="Controllers to run: deployment, replicaset, job, resourceclaim, "
            "devicetaint (device taint eviction), disruption (PodDisruptionBudget status), "
            "statefulset, jobset, leaderworkerset."
        ),
    ] = ALL_CONTROLLERS
    workers: Annotated[
        int, Meta(description="Concurrent reconciles per controller loop.", ge=1)
    ] = 4
    burst_replicas: Annotated[
        int, Meta(description="Most pods one ReplicaSet reconcile creates or deletes.", ge=1)
    ] = 500
    expectations_ttl_s: Annotated[
        float,
        Meta(description="Longest a controller waits to see its own writes in its cache.", gt=0),
    ] = 60.0
    record_events: Annotated[
        bool, Meta(description="Record Kubernetes Events as the real controllers do.")
    ] = True
    informer: InformerSettings = InformerSettings()
    rate_limit: RateLimitSettings = RateLimitSettings()


class ControllerManager:
    """The chosen controllers over one API server, sharing one set of informers."""

    def __init__(
        self,
        client: KubeClient,
        *,
        settings: ControllerSettings | None = None,
        metrics: Metrics | None = None,
        device_taints: DeviceTaintSupport | None = None,
    ) -> None:
        self.settings = settings or ControllerSettings()
        self.device_taints = device_taints or DeviceTaintSupport()
        """The simulated release's device taints: kube-controller-manager starts the device
        taint eviction controller only while DRADeviceTaints is on (:mod:`sim.release`)."""
        self.client = client
        self.metrics = metrics or Metrics()
        self.informers = SharedInformers(
            client, settings=self.settings.informer, metrics=self.metrics
        )
        self._synced = asyncio.Event()
        self._loops: list[Loop] = []
        for name in ALL_CONTROLLERS:
            if name in self.settings.controllers:
                self._loops.extend(_BUILDERS[name](self))

    def common(self) -> dict[str, Any]:
        """The arguments every controller takes, as keywords."""
        settings = self.settings
        return {
            "metrics": self.metrics,
            "workers": settings.workers,
            "rate_limit": settings.rate_limit,
        }

    def expecting(self) -> dict[str, Any]:
        """:meth:`common` and the expectations' TTL, for controllers that create pods."""
        return {**self.common(), "expectations_ttl_s": self.settings.expectations_ttl_s}

    def recorder(self, component: str) -> EventRecorder | None:
        """The Event recorder of ``component`` (None when Events are not recorded)."""
        if not self.settings.record_events:
            return None
        return EventRecorder(
            self.client, component=component, instance=socket.gethostname(), metrics=self.metrics
        )

    @property
    def synced(self) -> bool:
        """True once every informer has listed and the controllers have started."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    @property
    def loop_names(self) -> list[str]:
        """The loops that run, by name (e.g. ``device-taint-eviction``)."""
        return [loop.name for loop in self._loops]

    @property
    def idle(self) -> bool:
        """No key waiting, held back for a retry or a timed look, or being reconciled."""
        return all(
            not loop.queue and not loop.queue.in_flight and not loop.queue.held
            for loop in self._loops
        )

    async def run(self) -> None:
        """Run informers and controllers until cancelled or drained; see the module docstring."""
        if CRD_CONTROLLERS & set(self.settings.controllers):
            # As installing JobSet and LWS does: their CRDs come with their controllers.
            await install_workload_crds(self.client)
        async with asyncio.TaskGroup() as group:
            watchers = [
                group.create_task(informer.run(), name=f"informer {informer.resource.plural}")
                for informer in self.informers.created()
            ]
            for informer in self.informers.created():
                await informer.wait_synced()
            loops = [group.create_task(loop.run(), name=loop.name) for loop in self._loops]
            self._synced.set()
            # Drained loops return; the informers then have no one left to feed.
            await asyncio.gather(*loops)
            for watcher in watchers:
                watcher.cancel()

    async def drain(self) -> None:
        """Stop taking keys and let reconciles in flight finish; ``run`` then returns."""
        await asyncio.gather(*(loop.drain() for loop in self._loops))

    def start(self, supervisor: Supervisor, *, name: str = "sim controllers") -> None:
        """Run under ``supervisor``: a root task, drained when shutdown begins."""
        supervisor.start(name, self.run())
        supervisor.on_shutdown(f"drain {name}", self.drain, phase="intake")

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[ControllerManager]:
        """Run in a task of its own for the ``async with`` body, after the caches synced."""
        task = asyncio.create_task(self.run(), name="sim controllers")
        synced = asyncio.create_task(self.wait_synced())
        try:
            await asyncio.wait({task, synced}, return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                task.result()  # raises why it stopped
                raise RuntimeError("the controllers stopped before their caches synced")
            yield self
        finally:
            synced.cancel()
            task.cancel()
            results = await asyncio.gather(task, synced, return_exceptions=True)
        for result in results:
            if isinstance(result, Exception):
                raise result


def _loops(*found: Loop | Sequence[Loop]) -> list[Loop]:
    return [loop for item in found for loop in (item if isinstance(item, Sequence) else (item,))]


_BUILDERS: dict[ControllerName, Callable[[ControllerManager], list[Loop]]] = {
    "deployment": lambda m: _loops(
        DeploymentController(
            m.client, m.informers, recorder=m.recorder("deployment-controller"), **m.common()
        ).loop
    ),
    "replicaset": lambda m: _loops(
        ReplicaSetController(
            m.client,
            m.informers,
            recorder=m.recorder("replicaset-controller"),
            burst=m.settings.burst_replicas,
            **m.expecting(),
        ).loop
    ),
    "job": lambda m: _loops(
        JobController(
            m.client, m.informers, recorder=m.recorder("job-controller"), **m.expecting()
        ).loop
    ),
    "resourceclaim": lambda m: _loops(
        ResourceClaimController(m.client, m.informers, **m.expecting()).loops
    ),
    "devicetaint": lambda m: _loops(
        *(
            DeviceTaintEvictionController(
                m.client, m.informers, support=m.device_taints, **m.common()
            ).loops
            if m.device_taints.taints
            else ()
        )
    ),
    "disruption": lambda m: _loops(DisruptionController(m.client, m.informers, **m.common()).loops),
    "statefulset": lambda m: _loops(
        StatefulSetController(
            m.client, m.informers, recorder=m.recorder("statefulset-controller"), **m.expecting()
        ).loop
    ),
    "jobset": lambda m: _loops(JobSetController(m.client, m.informers, **m.expecting()).loop),
    "leaderworkerset": lambda m: _loops(
        LeaderWorkerSetController(m.client, m.informers, **m.common()).loop
    ),
}
"""How each controller is made: its loops, from the manager's shared parts."""
