"""The domain controller assembled: informers on every replica, reconciling on the leader only.

Every replica lists and watches (so a standby takes over with warm caches) and is ready once its
caches are synced. Only the holder of the Lease reconciles and writes. When it becomes leader it
reads the membership snapshots of the KV bucket (what was last published), collects orphans,
queues every domain and the DeviceClass, and runs the two reconcile loops. Losing the Lease
raises LeadershipLostError, which ends the process: a replaced leader must never write again.
"""

from __future__ import annotations

import asyncio
import logging

from services.domain_controller.caches import Caches
from services.domain_controller.deviceclass import DeviceClassReconciler
from services.domain_controller.membership import Ledger
from services.domain_controller.orphans import collect_orphans
from services.domain_controller.reconciler import DomainReconciler
from services.domain_controller.routing import DEVICE_CLASS_KEY, connect
from services.domain_controller.settings import DomainControllerSettings
from services.domain_controller.writes import DomainWrites
from shared.crds.computedomain import ComputeDomain
from shared.events.subjects import DOMAIN_SNAPSHOT
from shared.kube.client import KubeClient
from shared.kube.keys import ObjectKey, key_of
from shared.kube.leader import LeaderElector
from shared.kube.ownwrites import OwnWrites
from shared.kube.reconcile import ReconcileRunner, RunnerSettings
from shared.kube.recorder import EventRecorder
from shared.kube.workqueue import WorkQueue
from shared.runtime import ServiceContext

log = logging.getLogger("cdo.domain_controller")

COMPONENT = "domain-controller"


class DomainController:
    """Informers, queues, reconcilers and leader election of one replica."""

    def __init__(
        self, ctx: ServiceContext, *, client: KubeClient, settings: DomainControllerSettings
    ) -> None:
        self._ctx = ctx
        self._client = client
        self._settings = settings
        self.caches = Caches(client, settings=settings, metrics=ctx.metrics)
        self.domains = WorkQueue[ObjectKey](
            name="computedomains", metrics=ctx.metrics, rate_limit=settings.retries
        )
        self.device_classes = WorkQueue[ObjectKey](
            name="deviceclasses", metrics=ctx.metrics, rate_limit=settings.retries
        )
        self.ledger = Ledger()
        own = OwnWrites[ComputeDomain]()
        connect(self.caches, domains=self.domains, device_classes=self.device_classes, own=own)
        self.writes = DomainWrites(client, field_manager=settings.api.field_manager, own=own)
        self.reconciler = DomainReconciler(
            caches=self.caches,
            writes=self.writes,
            own_writes=own,
            bus=ctx.bus,
            recorder=EventRecorder(
                client, component=COMPONENT, instance=ctx.instance, metrics=ctx.metrics
            ),
            ledger=self.ledger,
            tracer=ctx.tracer,
            resync_s=settings.loop.resync_s,
        )
        self.domain_runner = ReconcileRunner(
            name="computedomains",
            queue=self.domains,
            reconcile=self.reconciler.reconcile,
            metrics=ctx.metrics,
            settings=settings.loop,
        )
        self.device_class_runner = ReconcileRunner(
            name="deviceclasses",
            queue=self.device_classes,
            reconcile=DeviceClassReconciler(caches=self.caches, writes=self.writes).reconcile,
            metrics=ctx.metrics,
            settings=RunnerSettings(workers=1),
        )
        self.elector = LeaderElector(
            client,
            namespace=settings.lease.namespace,
            name=settings.lease.name,
            identity=ctx.instance,
            settings=settings.leader_election,
        )

    def start(self) -> None:
        """Register the root tasks and shutdown steps with the service's supervisor."""
        supervisor = self._ctx.supervisor
        self.caches.start(supervisor=supervisor, readiness=self._ctx.readiness)
        supervisor.start("leader election", self.elector.run(self._lead))
        supervisor.on_shutdown("drain domains", self.domain_runner.drain, phase="intake")
        supervisor.on_shutdown("drain device class", self.device_class_runner.drain, phase="intake")
        supervisor.on_shutdown("close kube client", self._client.close, phase="final")

    async def _lead(self) -> None:
        await self.caches.wait_synced()
        pattern = DOMAIN_SNAPSHOT.wildcard(
            **({"namespace": self._settings.namespace} if self._settings.namespace else {})
        )
        self.ledger.load(await self._ctx.bus.snapshots(pattern))
        collected = await collect_orphans(
            caches=self.caches, writes=self.writes, ledger=self.ledger, reconciler=self.reconciler
        )
        domains = self.caches.domains.cache.objects()
        log.info(
            "leading",
            extra={
                "domains": len(domains),
                "published": len(self.ledger),
                "orphan_templates": collected.templates,
                "final_events": collected.final_events,
            },
        )
        for domain in domains:
            self.domains.add(key_of(domain))
        self.device_classes.add(DEVICE_CLASS_KEY)
        async with asyncio.TaskGroup() as loops:
            loops.create_task(self.domain_runner.run(), name="computedomains reconcile")
            loops.create_task(self.device_class_runner.run(), name="deviceclasses reconcile")
