"""The IMEX agent of one node, assembled from its parts.

``ImexAgent`` takes the node's identity and settings and its handles (NVML, the IMEX programs,
the Kubernetes client, the event bus) as arguments, so a simulator can run many in one process.
``run()`` runs it until cancelled:

- NVML is read at start and every ``clique_refresh_s``: the clique (fabric info), the tray index
  (platform info) and the GPU count;
- the clique's membership (:mod:`membership`): a Node informer selected by the clique label
  feeds the roster, and the node's own address and slot are published on its Node, a slot
  claimed when the platform has none; the node map is static (every slot of the clique), so
  the roster only re-points names;
- the daemon controller and the status reporter (:mod:`daemon`, :mod:`reporter`); a daemon an
  earlier agent of the node left running is adopted before either starts;
- the ResourceSlice publisher and the DRA kubelet plugin with the channel driver;
- peers' NodeImexState events make the reporter look again at once;
- the node's container runtime is looked at for CDI (:mod:`runtimecheck`): the node condition
  ``cdo.dev/CdiEnabled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

import msgspec
from opentelemetry.trace import Tracer

from services.imex_agent.binaries import Imex
from services.imex_agent.cdi import CdiStore
from services.imex_agent.channels import ChannelDevices, resolve_major
from services.imex_agent.checkpoint import CheckpointStore
from services.imex_agent.claims import ClaimResolver
from services.imex_agent.daemon import DaemonController
from services.imex_agent.driver import ChannelDriver
from services.imex_agent.imexconfig import ImexPaths
from services.imex_agent.membership import CliqueMembership
from services.imex_agent.metrics import AgentMetrics
from services.imex_agent.nodecert import NodeCertificates
from services.imex_agent.readiness import ReadinessSignal, readiness_of
from services.imex_agent.reporter import StatusReporter
from services.imex_agent.resourceslice import SlicePublisher
from services.imex_agent.runtimecheck import RuntimeCheck
from services.imex_agent.settings import AgentSettings
from shared.bus import EventBus
from shared.crds.names import DRIVER_NAME, IMEX_READY_CONDITION
from shared.events import Event, NodeImexState
from shared.kube.client import KubeClient
from shared.kube.ownnode import own_node
from shared.kubeletapi import KubeletPlugin, PluginPaths
from shared.metrics import Metrics
from shared.nvml import (
    CliqueStatus,
    NodeClique,
    NodePlacement,
    Nvml,
    NvmlError,
    node_clique,
    node_placement,
)

log = logging.getLogger("cdo.imex_agent")


class NvmlSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    clique: NodeClique
    placement: NodePlacement | None
    gpus: int


def read_nvml(nvml: Nvml) -> NvmlSnapshot:
    """Blocking: the node's clique, placement and GPU count."""
    nvml.init()
    count = nvml.device_count()
    fabric = [nvml.fabric_info(gpu) for gpu in range(count)]
    platforms = [nvml.platform_info(gpu) for gpu in range(count)]
    return NvmlSnapshot(clique=node_clique(fabric), placement=node_placement(platforms), gpus=count)


class ImexAgent:
    """Everything the agent does for one node; see the module docstring."""

    def __init__(
        self,
        *,
        settings: AgentSettings,
        nvml: Nvml,
        imex: Imex,
        client: KubeClient,
        bus: EventBus | None,
        metrics: Metrics,
        tracer: Tracer | None = None,
    ) -> None:
        self.settings = settings
        self.node = settings.node_name
        self.address = settings.address
        self._nvml = nvml
        self._client = client
        self._bus = bus
        self.metrics = AgentMetrics(metrics)
        self._gpus = 0
        self.nvlink = True
        """False once NVML said that no GPU of the node is on an NVLink fabric."""
        self.membership = CliqueMembership(
            node=self.node,
            address=self.address,
            slots=settings.imex.max_nodes_per_domain,
            client=client,
            informer_settings=settings.informer,
            metrics=self.metrics,
            base_metrics=metrics,
            on_change=self._members_changed,
        )
        # The node's own IMEX certificate, when a signer issues it (nodecert.py).
        self.certificates = (
            NodeCertificates(
                client,
                node=self.node,
                directory=ImexPaths(directory=settings.imex.directory).tls_dir,
                signer=settings.imex.cert_signer,
                on_renewed=lambda: self.controller.credentials_renewed(),
            )
            if settings.imex.cert_signer
            else None
        )
        certificates = self.certificates
        self.controller = DaemonController(
            node=self.node,
            address=self.address,
            settings=settings.imex,
            imex=imex,
            target=self.membership.target,
            metrics=self.metrics,
            on_change=self._controller_changed,
            credentials_ready=certificates.ready if certificates is not None else lambda: True,
        )
        # What prepare waits on: told of every controller change and every new report.
        self.readiness = ReadinessSignal(
            lambda: readiness_of(self.controller.state, self.reporter.event)
        )
        self.reporter = StatusReporter(
            node=self.node,
            address=self.address,
            settings=settings.imex,
            imex=imex,
            controller=self.controller,
            client=client,
            publish=self._imex_state_changed,
            metrics=self.metrics,
        )
        if bus is not None:
            # After a NATS outage the node's IMEX snapshot is brought up to date.
            bus.when_connected(f"{self.node} imex state", self.reporter.republish)
        self.metrics.imex_ready.set_function(lambda: float(self.reporter.ready or not self.nvlink))
        self.devices, self.driver, self.plugin = self._dra(client, tracer)
        self.slices: SlicePublisher | None = None
        self.runtime = RuntimeCheck(node=self.node, client=client, settings=settings.runtime)

    def _dra(
        self, client: KubeClient, tracer: Tracer | None
    ) -> tuple[ChannelDevices, ChannelDriver, KubeletPlugin]:
        """The DRA side: the channel devices, the driver that prepares claims (once the local
        daemon is ready), and the kubelet plugin that serves it."""
        dra = self.settings.dra
        kubelet_root = Path(dra.kubelet_root)
        checkpoint = dra.checkpoint_file or str(
            kubelet_root / "plugins" / DRIVER_NAME / "checkpoint.json"
        )
        devices = ChannelDevices(
            root=Path(dra.device_root), major=resolve_major(dra), mode=dra.device_mode
        )
        driver = ChannelDriver(
            node=self.node,
            resolver=ClaimResolver(
                client,
                node=self.node,
                driver=DRIVER_NAME,
                clique=lambda: self.clique,
                writer=self.settings.placement_writer,
            ),
            checkpoint=CheckpointStore(Path(checkpoint)),
            devices=devices,
            cdi=CdiStore(Path(dra.cdi_root)),
            metrics=self.metrics,
            readiness=self.readiness,
            ready_wait_s=dra.ready_wait_s,
            tracer=tracer,
        )
        plugin = KubeletPlugin(
            driver_name=DRIVER_NAME,
            handler=driver,
            paths=PluginPaths.for_driver(DRIVER_NAME, kubelet_root=kubelet_root),
        )
        return devices, driver, plugin

    def _slice_clique(self) -> str | None:
        """The clique the ResourceSlice is for: "" on a node on no NVLink fabric."""
        return "" if self.clique is None and not self.nvlink else self.clique

    @property
    def clique(self) -> str | None:
        """The clique NVML reported last (None: the node has none now)."""
        return self.membership.clique

    @property
    def ready(self) -> bool:
        """IMEX is READY on this node (or the node is on no NVLink fabric, so it runs none) and
        the kubelet registered the plugin."""
        return (self.reporter.ready or not self.nvlink) and self.plugin.registered

    # -- running ------------------------------------------------------------------------------

    async def run(self) -> None:
        node = await own_node(self._client, self.node)
        seeded = node.condition(IMEX_READY_CONDITION)
        if seeded is not None:
            self.reporter.seed_condition(seeded.status, seeded.last_transition_time)
        await self._refresh_nvml()
        dra = self.settings.dra
        self.slices = SlicePublisher(
            self._client,
            node=self.node,
            node_uid=node.metadata.uid,
            attachments=dra.attachments or max(1, 2 * self._gpus),
            resync_s=dra.slice_resync_s,
        )
        self.slices.set_clique(self._slice_clique())
        self.driver.recover()
        # Before the reporter's first look: a daemon an earlier agent left running is this
        # agent's from the start, so the node's condition never sees the agent without it.
        self.controller.adopt()
        async with contextlib.AsyncExitStack() as stack:
            if self._bus is not None:
                subscription = await self._bus.subscribe(
                    NodeImexState.subject_template.wildcard(), self._on_peer_event
                )
                stack.push_async_callback(subscription.unsubscribe)
            async with asyncio.TaskGroup() as group:
                group.create_task(self._nvml_loop(), name=f"{self.node} nvml")
                group.create_task(self.membership.run(group), name=f"{self.node} roster")
                group.create_task(self.controller.run(), name=f"{self.node} imex daemon")
                if self.certificates is not None:
                    group.create_task(self.certificates.run(), name=f"{self.node} imex certificate")
                group.create_task(self.reporter.run(), name=f"{self.node} imex status")
                group.create_task(self.slices.run(), name=f"{self.node} resourceslice")
                group.create_task(self.plugin.run(), name=f"{self.node} kubelet plugin")
                group.create_task(self.runtime.run(), name=f"{self.node} runtime check")

    # -- NVML ---------------------------------------------------------------------------------

    async def _nvml_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.imex.clique_refresh_s)
            await self._refresh_nvml()

    async def _refresh_nvml(self) -> None:
        try:
            snapshot = await asyncio.to_thread(read_nvml, self._nvml)
        except NvmlError as exc:
            self.metrics.errors.labels("nvml").inc()
            if self.clique is not None:
                # A read that fails says nothing about the fabric: keep serving the clique.
                log.warning("cannot read NVML; keeping the clique", extra={"error": str(exc)})
                return
            clique, detail, slot = None, f"NVML: {exc}", None
        else:
            clique = snapshot.clique.clique
            detail = snapshot.clique.reason if clique is None else ""
            self.nvlink = snapshot.clique.status is not CliqueStatus.NOT_SUPPORTED
            slot = snapshot.placement.tray_index if snapshot.placement is not None else None
            self._gpus = snapshot.gpus
        if self.membership.set_clique(clique, detail=detail, platform_slot=slot):
            log.info("NVML read", extra={"clique": clique, "tray_index": slot, "detail": detail})
            self.controller.wake()
        if self.slices is not None:
            self.slices.set_clique(self._slice_clique())

    # -- events -----------------------------------------------------------------------------------

    def _members_changed(self) -> None:
        self.controller.wake()
        self.reporter.poke()

    def _controller_changed(self) -> None:
        self.readiness.notify()
        self.reporter.poke()

    async def _imex_state_changed(self, event: NodeImexState) -> None:
        """The reporter has a new NodeImexState (already its ``event``): publish it."""
        self.readiness.notify()
        if self._bus is not None:
            await self._bus.publish(event)

    async def _on_peer_event(self, event: Event) -> None:
        if (
            isinstance(event, NodeImexState)
            and event.node != self.node
            and self.clique is not None
            and event.clique == self.clique
        ):
            self.reporter.poke()
