"""The domain controller assembled: informers on every replica, reconciling on the leader only.

Every replica lists and watches (so a standby takes over with warm caches) and is ready once its
caches are synced. Only the holder of the Lease reconciles and writes. When it becomes leader it
reads the membership snapshots of the KV bucket (what was last published), collects orphans,
queues every domain and the DeviceClass, and runs the two reconcile loops. Losing the Lease
raises LeadershipLostError, which ends the process: a replaced leader must never write again.

NATS is not needed to lead: with NATS down the snapshots are skipped (every domain's membership
is then published, into the outbox), and every time the bus connects while this replica leads
the snapshots are read and every domain queued again, so the bucket is brought up to date from
the domains' state in Kubernetes (and a domain that vanished meanwhile gets its final event).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

from services.domain_controller.caches import Caches
from services.domain_controller.deviceclass import DeviceClassReconciler
from services.domain_controller.gauges import DomainGauges
from services.domain_controller.imexsigner import ImexSigner
from services.domain_controller.membership import Ledger
from services.domain_controller.orphans import collect_orphans
from services.domain_controller.reconciler import DomainReconciler
from services.domain_controller.routing import DEVICE_CLASS_KEY, connect
from services.domain_controller.settings import DomainControllerSettings
from services.domain_controller.writes import DomainWrites
from shared.crds.computedomain import ComputeDomain
from shared.crds.names import service_account_user
from shared.errors import BusUnavailableError
from shared.events.subjects import DOMAIN_SNAPSHOT
from shared.kube.client import KubeClient
from shared.kube.controller import LeaderElectedController
from shared.kube.keys import key_of
from shared.kube.ownwrites import OwnWrites
from shared.kube.reconcile import RunnerSettings
from shared.runtime import ServiceContext

log = logging.getLogger("cdo.domain_controller")

COMPONENT = "domain-controller"
FEED_WAIT_S = 3.0
"""How long a new leader waits for NATS (a process that just started is connecting) before it
leads without the snapshots."""


class DomainController(LeaderElectedController):
    """Informers, queues, reconcilers and leader election of one replica."""

    def __init__(
        self, ctx: ServiceContext, *, client: KubeClient, settings: DomainControllerSettings
    ) -> None:
        self.caches = Caches(client, settings=settings, metrics=ctx.metrics)
        super().__init__(ctx, client=client, settings=settings, caches=self.caches)
        ctx.metrics.registry.register(DomainGauges(self.caches.domains.cache.objects))
        self._bus = ctx.bus
        self._leading = False
        ctx.bus.when_connected("membership snapshots", self._catch_up)
        self._namespace = settings.namespace
        self.domains = self.work_queue("computedomains")
        self.device_classes = self.work_queue("deviceclasses")
        self.ledger = Ledger()
        own = OwnWrites[ComputeDomain]()
        connect(self.caches, domains=self.domains, device_classes=self.device_classes, own=own)
        self.writes = DomainWrites(
            self.leader_client, field_manager=settings.api.field_manager, own=own
        )
        self.reconciler = DomainReconciler(
            caches=self.caches,
            writes=self.writes,
            own_writes=own,
            bus=ctx.bus,
            recorder=self.event_recorder(COMPONENT),
            ledger=self.ledger,
            tracer=ctx.tracer,
            resync_s=settings.loop.resync_s,
        )
        self.domain_runner = self.reconcile_runner(
            "computedomains", self.domains, self.reconciler.reconcile
        )
        self.imex_signer = (
            ImexSigner(
                self.leader_client,
                namespace=settings.lease.namespace,
                agent_user=service_account_user(
                    settings.lease.namespace, settings.imex_signer.agent_service_account
                ),
                lifetime=dt.timedelta(seconds=settings.imex_signer.lifetime_s),
                recorder=self.event_recorder(COMPONENT),
                metrics=ctx.metrics,
            )
            if settings.imex_signer.enabled
            else None
        )
        self.device_class_runner = self.reconcile_runner(
            "deviceclasses",
            self.device_classes,
            DeviceClassReconciler(caches=self.caches, writes=self.writes).reconcile,
            settings=RunnerSettings(workers=1),
        )

    async def _load_published(self) -> bool:
        """Fill the ledger from the bucket; False (and nothing read) while NATS is down."""
        pattern = DOMAIN_SNAPSHOT.wildcard(
            **({"namespace": self._namespace} if self._namespace else {})
        )
        try:
            self.ledger.load(await self._bus.snapshots(pattern))
        except BusUnavailableError:
            log.warning("NATS is down: leading without the membership snapshots")
            return False
        return True

    async def _catch_up(self) -> None:
        """The bus (re)connected: bring the bucket up to date, if this replica leads."""
        if not self._leading:
            return
        await self.caches.wait_synced()
        if not await self._load_published():
            return
        collected = await collect_orphans(
            caches=self.caches, writes=self.writes, ledger=self.ledger, reconciler=self.reconciler
        )
        domains = self.caches.domains.cache.objects()
        log.info(
            "catching up the membership snapshots",
            extra={"domains": len(domains), "final_events": collected.final_events},
        )
        for domain in domains:
            self.domains.add(key_of(domain))

    async def _lead(self) -> None:
        await self.caches.wait_synced()
        self._leading = True
        await self._bus.up_within(FEED_WAIT_S)
        await self._load_published()
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
            if self.imex_signer is not None:
                loops.create_task(self.imex_signer.run(), name="imex certificate signer")
