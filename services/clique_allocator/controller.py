"""The clique allocator assembled: informers and webhook on every replica, placing on the leader.

Every replica lists and watches and serves the pod webhook (a replica is ready once its caches
are synced and the webhook listens). Only the holder of the Lease reconciles, writes Placements,
pins pods, publishes capacity events and answers the health monitors' claims for NoExecute
(the circuit breaker's arbiter, ``breaker``). When it becomes leader it reads the capacity snapshots
of the KV bucket, queues every domain and every Placement, and runs the reconcile loop and the
capacity publisher. Losing the Lease raises LeadershipLostError, which ends the process.

Neither the webhook nor placing needs NATS: with NATS down the leader starts without the
capacity snapshots (and publishes every clique's capacity, into the outbox); every time the bus
connects while it leads, it reads them again and publishes what differs from the capacity it
computes from Kubernetes now.

Which changes queue which domains, and which change capacity, is ``routing.py``'s.
"""

from __future__ import annotations

import asyncio
import logging

from services.clique_allocator.breaker import BreakerArbiter
from services.clique_allocator.caches import Caches
from services.clique_allocator.gauges import CapacityGauges
from services.clique_allocator.metrics import AllocatorMetrics
from services.clique_allocator.publisher import CapacityPublisher
from services.clique_allocator.reconciler import AllocatorReconciler
from services.clique_allocator.routing import connect
from services.clique_allocator.settings import CliqueAllocatorSettings
from services.clique_allocator.state import ClusterState
from services.clique_allocator.webhook.allocation_review import AllocationReview
from services.clique_allocator.webhook.server import WebhookServer
from services.clique_allocator.webhook.templates import TemplateClassifier
from services.clique_allocator.writes import AllocatorWrites
from shared.crds.placement import Placement
from shared.kube.client import KubeClient
from shared.kube.controller import LeaderElectedController
from shared.kube.keys import ObjectKey, key_of
from shared.kube.models import Node
from shared.kube.ownwrites import OwnWrites
from shared.kube.resources import NODES
from shared.runtime import ServiceContext

log = logging.getLogger("cdo.clique_allocator")

COMPONENT = "clique-allocator"
FEED_WAIT_S = 3.0
"""How long a new leader waits for NATS (a process that just started is connecting) before it
leads without the snapshots."""
QUEUE = "placements"


class CliqueAllocator(LeaderElectedController):
    """Informers, webhook, queue, reconciler, publisher and leader election of one replica."""

    def __init__(
        self, ctx: ServiceContext, *, client: KubeClient, settings: CliqueAllocatorSettings
    ) -> None:
        self.caches = Caches(client, settings=settings, metrics=ctx.metrics)
        super().__init__(ctx, client=client, settings=settings, caches=self.caches)
        metrics = AllocatorMetrics(ctx.metrics)
        self.book = OwnWrites[Placement]()
        self.state = ClusterState(self.caches, self.book)
        self.queue = self.work_queue(QUEUE)
        self.publisher = CapacityPublisher(
            bus=ctx.bus, state=self.state, interval_s=settings.capacity_interval_s
        )
        ctx.metrics.registry.register(CapacityGauges(lambda: self.publisher.latest.values()))
        self.reconciler = AllocatorReconciler(
            caches=self.caches,
            state=self.state,
            book=self.book,
            writes=AllocatorWrites(
                self.leader_client, field_manager=settings.api.field_manager, user=settings.user
            ),
            recorder=self.event_recorder(COMPONENT),
            metrics=metrics,
            tracer=ctx.tracer,
            on_capacity_change=self.publisher.poke,
            pod_writes=settings.pod_writes,
            resync_s=settings.loop.resync_s,
            retry_waiting_s=settings.retry_waiting_s,
        )
        self.reconciler.wake_waiting = self.wake_waiting
        self.runner = self.reconcile_runner(QUEUE, self.queue, self.reconciler.reconcile)
        self.webhook: WebhookServer | None = None
        if settings.webhook.enabled:
            self.webhook = WebhookServer(
                settings=settings.webhook,
                classifier=TemplateClassifier(
                    self.caches, client, timeout_s=settings.webhook.lookup_timeout_s
                ),
                synced=lambda: self.caches.webhook_synced,
                metrics=metrics,
                allocations=AllocationReview(
                    self.caches,
                    self.book,
                    synced=lambda: self.caches.allocation_synced,
                    metrics=metrics,
                ),
            )
        connect(
            self.caches,
            queue=self.queue,
            book=self.book,
            on_capacity=self._capacity_changed,
            on_usage=self._usage_changed,
        )
        selector = settings.breaker.node_selector
        self.breaker = BreakerArbiter(
            nodes=self.caches.informer(NODES, Node, namespace="", label_selector=selector)
            if selector
            else self.caches.nodes,
            reader=client,
            writer=self.leader_client,
            settings=settings.breaker,
            rulings=metrics.breaker_rulings,
        )
        self._readiness = ctx.readiness
        self._supervisor = ctx.supervisor
        self._bus = ctx.bus
        self._leading = False
        ctx.bus.when_connected("capacity snapshots", self._catch_up)

    def _start_serving(self) -> None:
        if self.webhook is not None:
            webhook = self.webhook
            self._supervisor.start("webhook", webhook.run())
            self._readiness.add("webhook serving", lambda: webhook.serving)

    async def _catch_up(self) -> None:
        """The bus (re)connected: bring the capacity snapshots up to date, if leading."""
        if self._leading and await self.publisher.load():
            self.publisher.poke()

    async def _lead(self) -> None:
        await self.caches.wait_synced()
        self.state.invalidate()
        self._leading = True
        await self._bus.up_within(FEED_WAIT_S)
        await self.publisher.load()
        keys = {key_of(domain) for domain in self.caches.domains.cache.objects()}
        keys |= {key_of(placement) for placement in self.caches.placements.cache.objects()}
        log.info("leading", extra={"domains": len(keys), "nodes": len(self.caches.nodes.cache)})
        for key in sorted(keys):
            self.queue.add(key)
        async with asyncio.TaskGroup() as loops:
            loops.create_task(self.runner.run(), name="placements reconcile")
            loops.create_task(self.publisher.run(), name="capacity publisher")
            loops.create_task(self.breaker.run(), name="circuit breaker arbiter")

    # -- capacity changes -------------------------------------------------------------

    def wake_waiting(self) -> None:
        """Queue every domain that waits for capacity, oldest first."""
        self.reconciler.wakes += 1

        def created(key: ObjectKey) -> str:
            domain = self.caches.domain(key)
            stamp = domain.metadata.creation_timestamp if domain is not None else None
            return stamp.isoformat() if stamp is not None else ""

        for key in sorted(self.reconciler.waiting, key=lambda k: (created(k), str(k))):
            self.queue.add(key)

    def _usage_changed(self, freed: bool) -> None:
        self.state.usage_changed()
        if freed:
            self.wake_waiting()

    def _capacity_changed(self, grew: bool) -> None:
        self.state.invalidate()
        self.publisher.poke()
        if grew:
            self.wake_waiting()
