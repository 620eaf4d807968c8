"""cdo's per-node services for many simulated nodes, in one process.

    host = NodeHost(nodes=topology.nodes, client=client, nats=nats_settings, power=power,
                    layout=layout, services=ServiceSettings(), settings=HostSettings(),
                    tracers=Tracers.from_providers(...))
    supervisor.start("node host", host.run())
    host["rack-0-tray03"].nvml.raise_xid(1, 79)

Every hosted node has, as a GPU node of a real cluster would:

- its simulated NVML (:class:`sim.nvml.SimulatedNvml`), bound to every task of the node, so the
  services' pynvml calls reach this node's GPUs only;
- an IMEX agent (:class:`services.imex_agent.ImexAgent`) with the node's simulated IMEX daemon
  in this event loop (:mod:`sim.nodehost.imex`) and its DRA kubelet plugin in the simulated
  kubelet's directory of the node;
- a health monitor (:class:`services.health_monitor.HealthMonitor`), reading the time from the
  node's own wall clock, which may be set ahead or behind (:attr:`HostedNode.clock_offset_s`,
  ``cdo sim clock``) to show what clock skew between nodes does;
- NVIDIA's GPU software in the same session as the services (:mod:`sim.nodehost.gpuplugins`):
  its device plugin where the topology's ``gpu_api`` is ``device-plugin`` or ``both``
  (:class:`sim.deviceplugin.NvidiaDevicePlugin`), its GPU DRA driver's kubelet plugin where it
  is ``dra`` or ``both`` (:class:`sim.gpudriver.GpuKubeletPlugin`);
- one NATS connection per service, each with its own metrics registry, as two pods would have;
  with identities that include NATS (``cdo sim up --nats-auth``), each connects with a token of
  its own ServiceAccount bound to the node (``CDO_NATS_TOKEN_FILE``), so it may publish only
  its own node's subjects;
- with ``identities`` (:class:`sim.identities.NodeIdentities`), one Kubernetes client per
  service, acting as that service's ServiceAccount with a token bound to the node (issued
  afresh at every start of the node's services), as a DaemonSet pod's token is; without, the
  services share the host's ``client``. NVIDIA's plugins, standing for upstream software,
  always use the host's ``client``.

A node runs its services while it has power. Powering it off kills its IMEX daemon without a
goodbye and stops its services; powering it on again is a reboot: the GPUs come back healthy
(injected faults are cleared) and the services start afresh, from the API and their files.
A service that fails takes its node's services down with it; they start again after a backoff,
the way the kubelet restarts a crashed pod, and the failure is logged and counted
(:meth:`HostedNode.kill_services` makes one fail on purpose, as a SIGKILL of the pods would).
The node's IMEX daemon is not part of a session: an agent that goes leaves it running, and the
next agent of the node adopts it (:mod:`sim.nodehost.imex`), as on a real node.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

import msgspec
from opentelemetry.trace import Tracer

from services.health_monitor.monitor import HealthMonitor
from services.imex_agent import ImexAgent
from shared.bus import EventBus, NatsSettings
from shared.kube.client import KubeClient
from shared.kube.recorder import EventRecorder
from shared.kubeletapi.podresources import PodResourcesClient
from shared.metrics import Metrics
from shared.nvml import PynvmlNvml
from sim.identities import HEALTH_MONITOR_SA, IMEX_AGENT_SA, NodeIdentities
from sim.imex import Timing
from sim.nodehost.gpuplugins import GpuPlugins
from sim.nodehost.hoststate import HostState
from sim.nodehost.imex import DaemonDirectory, NodeImex
from sim.nodehost.power import PowerSource, PowerUnavailableError
from sim.nodehost.settings import (
    HostSettings,
    NodeLayout,
    ServiceSettings,
    agent_settings,
    proc_devices_text,
)
from sim.nvml import SimulatedNvml, bound_context
from sim.release import DeviceTaintSupport
from sim.topology import Node as TopologyNode

log = logging.getLogger("cdo.sim.nodehost")

AGENT = "imex-agent"
MONITOR = "health-monitor"
SERVICES = (AGENT, MONITOR)

NodeState = Literal["off", "starting", "running", "restarting"]

# Many daemons in one loop (two full racks or more): slower heartbeats keep the CPU they cost
# reasonable (docs/simulated-imex.md measures both).
_MANY_DAEMONS = 36
# Per node: the health monitor's NVML event wait and its readings, and the event waits of the
# node's device plugin and GPU DRA driver.
THREADS_PER_NODE = 4
"""Worker threads a hosted node's services may block at once (NVML event wait, NVML reads)."""
_RELAXED_TIMING = Timing(heartbeat_interval=1.0, heartbeat_timeout=3.0)


@dataclass(frozen=True)
class Tracers:
    """One tracer per hosted service kind (spans carry ``service.name`` of that kind)."""

    agent: Tracer
    monitor: Tracer


@dataclass(frozen=True)
class HostContext:
    """What every hosted node shares."""

    client: KubeClient
    nats: NatsSettings
    layout: NodeLayout
    services: ServiceSettings
    settings: HostSettings
    tracers: Tracers
    errors: Metrics
    """Where failed sessions are counted (``cdo_errors_total{component="nodehost-session"}``)."""
    daemons: DaemonDirectory = field(default_factory=DaemonDirectory)
    """Every hosted node's IMEX daemons, for ``nvidia-imex-ctl`` queries between them."""
    identities: NodeIdentities | None = None
    """Where each node's services get clients of their own ServiceAccounts (None: ``client``)."""
    device_taints: DeviceTaintSupport = field(default_factory=DeviceTaintSupport)
    """The cluster's release as the simulated GPU drivers follow it (:mod:`sim.release`)."""


class _PoweredOffError(Exception):
    """Ends a node's session when its power goes."""


class _SessionEndedError(Exception):
    """A node's services stopped although nothing asked them to."""


class ServicesKilledError(Exception):
    """A node's services were killed on purpose (:meth:`HostedNode.kill_services`)."""


class NodeStatus(msgspec.Struct, frozen=True, kw_only=True):
    """A hosted node as the control API reports it."""

    name: str
    address: str
    clique: str
    powered: bool | None
    state: NodeState
    restarts: int
    last_error: str
    imex_ready: bool
    plugin_registered: bool
    node_synced: bool
    nvml_available: bool
    gpu_plugin_registered: bool | None = None
    """NVIDIA's GPU DRA plugin is registered with the kubelet; None on a node without it."""
    device_plugin_registered: bool | None = None
    """NVIDIA's device plugin is registered with the kubelet; None on a node without it."""
    clock_offset_s: float = 0.0
    """How far the node's wall clock is ahead of true time (behind when negative)."""


class HostedNode:
    """One simulated node's NVML, IMEX and services; see the module docstring."""

    def __init__(self, node: TopologyNode, *, context: HostContext, timing: Timing) -> None:
        self.topology = node
        self.name = node.name
        self.nvml = SimulatedNvml(node)
        self._context = context
        self.imex = NodeImex(
            hosts_file=context.layout.node_dir(node.name) / "hosts",
            timing=timing,
            directory=context.daemons,
        )
        self.host = HostState(
            root=context.layout.host_root(node.name),
            address=node.address,
            ports=(context.services.imex.server_port, context.services.imex.cmd_port),
            imex=self.imex,
            timing=timing,
            on_runtime_change=self._runtime_changed,
        )
        """The node's machine: runtime configuration, IMEX programs, the host's IMEX service."""
        self.state: NodeState = "off"
        self.restarts = 0
        self.last_error = ""
        self.agent: ImexAgent | None = None
        self.monitor: HealthMonitor | None = None
        self.gpus = GpuPlugins(dra=None, device_plugin=None)
        """The session's GPU DRA driver and device plugin (none while no session runs)."""
        self.metrics: dict[str, Metrics] = {}
        self._powered: bool | None = None  # unknown until the power source answered
        self._power_changed = asyncio.Event()
        self._kill = asyncio.Event()
        self.sessions = 0
        """Sessions started (the services' starts after the first are restarts or reboots)."""
        self.clock_offset_s = 0.0
        """The node's wall clock runs this far ahead of true time (behind when negative); its
        services read it at once, without a restart."""

    def wall_clock(self) -> datetime:
        """The time as this node's clock tells it."""
        return datetime.now(UTC) + timedelta(seconds=self.clock_offset_s)

    @property
    def powered(self) -> bool | None:
        return self._powered

    def _runtime_changed(self) -> None:
        if self.agent is not None:
            self.agent.runtime.poke()

    def set_powered(self, powered: bool) -> None:
        if powered != self._powered:
            self._powered = powered
            self._power_changed.set()

    @property
    def ready(self) -> bool:
        """Its services run, its IMEX daemon is READY, its plugins registered, its Node seen."""
        return (
            self.state == "running"
            and self.agent is not None
            and self.agent.ready
            and self.monitor is not None
            and self.monitor.node_synced
            and self.gpus.registered
        )

    def status(self) -> NodeStatus:
        agent, monitor = self.agent, self.monitor
        return NodeStatus(
            name=self.name,
            address=self.topology.address,
            clique=self.topology.clique,
            powered=self._powered,
            state=self.state,
            restarts=self.restarts,
            last_error=self.last_error,
            # A node on no NVLink fabric runs no IMEX daemon: it is as ready as it gets.
            imex_ready=agent is not None and (agent.reporter.ready or not agent.nvlink),
            plugin_registered=agent is not None and agent.plugin.registered,
            node_synced=monitor is not None and monitor.node_synced,
            nvml_available=monitor is not None and monitor.nvml_available,
            gpu_plugin_registered=self._registered(self.topology.gpu_dra, self.gpus.dra_registered),
            device_plugin_registered=self._registered(
                self.topology.device_plugin, self.gpus.device_plugin_registered
            ),
            clock_offset_s=self.clock_offset_s,
        )

    @staticmethod
    def _registered(has: bool, registered: bool | None) -> bool | None:
        """None on a node without the plugin; False too while no session runs it."""
        return bool(registered) if has else None

    # -- power -------------------------------------------------------------------------------

    async def _until_power(self, powered: bool, *, timeout_s: float | None = None) -> bool:
        """Wait until the node's power is ``powered``; False when ``timeout_s`` ran out first."""
        try:
            async with asyncio.timeout(timeout_s):
                while self._powered is not powered:
                    self._power_changed.clear()
                    await self._power_changed.wait()
        except TimeoutError:
            return False
        return True

    def kill_services(self) -> None:
        """End the node's running services at once, as a crash (or a SIGKILL of the node's
        pods) would: counted as a failure, started again after the backoff. The IMEX daemon
        keeps running; the next agent adopts it."""
        self._kill.set()

    async def _watch_kill(self) -> None:
        await self._kill.wait()
        raise ServicesKilledError(f"the services of {self.name} were killed")

    async def _watch_power_loss(self) -> None:
        await self._until_power(False)
        log.info("node powered off; its services stop", extra={"node": self.name})
        # Before the services are cancelled, which would stop the daemon politely.
        await self.imex.power_loss()
        await self.host.stop_host_imex()
        raise _PoweredOffError

    # -- the node's life ---------------------------------------------------------------------

    async def run(self) -> None:
        """Run the node's services whenever it has power, until cancelled.

        Start this task in the node's NVML context (:func:`sim.nvml.bound_context`), so every
        task and thread of its services talks to this node's NVML.
        """
        self.host.prepare()
        try:
            await self._lifetime()
        finally:
            # The node host is stopping: its daemons go with it, politely.
            await self.host.stop_host_imex()
            await self.imex.close()

    async def _lifetime(self) -> None:
        settings = self._context.settings
        backoff = settings.restart_backoff_s
        booted = False
        while True:
            self.state = "off"
            if self._powered is False:
                # A power cut between two sessions takes the daemon the last agent left too.
                await self.imex.power_loss()
            await self._until_power(True)
            if booted:
                self.nvml.clear_faults()  # a power cycle resets the GPUs
            booted = True
            self.state = "starting"
            self.sessions += 1
            self._kill.clear()
            started = time.monotonic()
            powered_off = False
            try:
                async with asyncio.TaskGroup() as group:
                    group.create_task(self._session(), name=f"{self.name} services")
                    group.create_task(self._watch_power_loss(), name=f"{self.name} power")
                    group.create_task(self._watch_kill(), name=f"{self.name} kill")
            except* _PoweredOffError:
                powered_off = True
            except* Exception as failures:
                self._failed(failures.exceptions[0], pause_s=backoff)
            finally:
                self.agent = None
                self.monitor = None
                self.gpus = GpuPlugins(dra=None, device_plugin=None)
            if powered_off:
                backoff = settings.restart_backoff_s
                continue
            if time.monotonic() - started >= settings.stable_after_s:
                backoff = settings.restart_backoff_s
            self.state = "restarting"
            await self._until_power(False, timeout_s=backoff)
            backoff = min(backoff * 2, settings.restart_backoff_max_s)

    def _failed(self, error: BaseException, *, pause_s: float) -> None:
        self.restarts += 1
        self.last_error = f"{type(error).__name__}: {error}"
        self._context.errors.errors.labels("nodehost-session").inc()
        log.error(
            "a node's services failed; starting them again after a pause",
            extra={"node": self.name, "error": self.last_error, "pause_s": pause_s},
            exc_info=error,
        )

    async def _session(self) -> None:
        """The node's services, from connecting to NATS until cancelled."""
        context = self._context
        services = context.services
        metrics = {service: Metrics(service=service) for service in SERVICES}
        async with contextlib.AsyncExitStack() as stack:
            agent_client = await self._client(stack, IMEX_AGENT_SA, metrics[AGENT])
            monitor_client = await self._client(stack, HEALTH_MONITOR_SA, metrics[MONITOR])
            agent_bus = await self._bus(
                stack, AGENT, IMEX_AGENT_SA, metrics[AGENT], context.tracers.agent
            )
            monitor_bus = await self._bus(
                stack, MONITOR, HEALTH_MONITOR_SA, metrics[MONITOR], context.tracers.monitor
            )
            agent = ImexAgent(
                settings=agent_settings(self.topology, layout=context.layout, services=services),
                nvml=PynvmlNvml(),
                imex=self.imex,
                client=agent_client,
                bus=agent_bus,
                metrics=metrics[AGENT],
                tracer=context.tracers.agent,
            )
            recorder = (
                EventRecorder(
                    monitor_client, component=MONITOR, instance=self.name, metrics=metrics[MONITOR]
                )
                if services.monitor.kube_events
                else None
            )
            pod_resources = None
            if services.pod_resources:
                pod_resources = PodResourcesClient(
                    context.layout.kubelet_root(self.name) / "pod-resources" / "kubelet.sock"
                )
                stack.push_async_callback(pod_resources.close)
            monitor = HealthMonitor(
                node_name=self.name,
                nvml=PynvmlNvml(),
                client=monitor_client,
                publisher=monitor_bus,
                metrics=metrics[MONITOR],
                settings=services.monitor,
                classifier=services.classifier,
                tracer=context.tracers.monitor,
                recorder=recorder,
                pod_resources=pod_resources,
                wall_clock=self.wall_clock,
            )
            self.agent, self.monitor, self.metrics = agent, monitor, metrics
            self.gpus = GpuPlugins.for_node(
                self.topology,
                client=context.client,
                layout=context.layout,
                device_taints=context.device_taints,
            )
            async with asyncio.TaskGroup() as group:
                for what, run in self.gpus.runs().items():
                    group.create_task(run, name=f"{self.name} {what}")
                group.create_task(agent_bus.run(), name=f"{self.name} {AGENT} bus")
                group.create_task(monitor_bus.run(), name=f"{self.name} {MONITOR} bus")
                group.create_task(agent.run(), name=f"{self.name} {AGENT}")
                group.create_task(monitor.run(), name=f"{self.name} {MONITOR}")
                self.state = "running"
                log.info("node services running", extra={"node": self.name})
        raise _SessionEndedError(f"the services of {self.name} returned")

    async def _client(
        self, stack: contextlib.AsyncExitStack, account: str, metrics: Metrics
    ) -> KubeClient:
        """A client acting as ``account`` bound to this node, its requests counted in the
        service's ``metrics``; or the host's shared one (whose requests nobody counts: they
        are every node's)."""
        identities = self._context.identities
        if identities is None:
            return self._context.client
        client = await identities.client(account, self.name)
        client.count_requests(metrics)
        stack.push_async_callback(client.close)
        return client

    async def _bus(
        self,
        stack: contextlib.AsyncExitStack,
        service: str,
        account: str,
        metrics: Metrics,
        tracer: Tracer,
    ) -> EventBus:
        settings = self._context.nats
        identities = self._context.identities
        if identities is not None and identities.nats:
            # NATS identities: this service's own token, bound to this node, as its pod's.
            path = await identities.nats_token_file(account, self.name)
            settings = msgspec.structs.replace(settings, user="", password="", token_file=str(path))
        # Connected by its run() (in the node's task group), in the background: the node's
        # services start whether NATS is up or not, as their pods do.
        bus = EventBus(
            settings, service=service, instance=self.name, metrics=metrics, tracer=tracer
        )
        stack.push_async_callback(self._close_bus, bus)
        return bus

    async def _close_bus(self, bus: EventBus) -> None:
        try:
            async with asyncio.timeout(self._context.settings.bus_close_timeout_s):
                await bus.stop_intake()
                await bus.close()
        except Exception as exc:
            log.warning(
                "closing a node's NATS connection failed",
                extra={"node": self.name, "error": f"{type(exc).__name__}: {exc}"},
            )


class NodeHost:
    """Hosts every given node's per-node services; see the module docstring."""

    def __init__(
        self,
        *,
        nodes: Sequence[TopologyNode],
        client: KubeClient,
        nats: NatsSettings,
        power: PowerSource,
        layout: NodeLayout,
        tracers: Tracers,
        services: ServiceSettings | None = None,
        settings: HostSettings | None = None,
        metrics: Metrics | None = None,
        imex_timing: Timing | None = None,
        identities: NodeIdentities | None = None,
        device_taints: DeviceTaintSupport | None = None,
    ) -> None:
        if not nodes:
            raise ValueError("a node host needs at least one node")
        layout.check([node.name for node in nodes])
        self.settings = settings or HostSettings()
        self.layout = layout
        self._power = power
        # Each node's bus binds to the stream and the bucket the NATS bootstrap made.
        context = HostContext(
            client=client,
            nats=nats,
            layout=layout,
            services=services or ServiceSettings(),
            settings=self.settings,
            tracers=tracers,
            errors=metrics or Metrics(),
            identities=identities,
            device_taints=device_taints or DeviceTaintSupport(),
        )
        timing = imex_timing or (_RELAXED_TIMING if len(nodes) >= _MANY_DAEMONS else Timing())
        self._nodes = {
            node.name: HostedNode(node, context=context, timing=timing) for node in nodes
        }
        self._power_known = asyncio.Event()

    def __getitem__(self, name: str) -> HostedNode:
        return self._nodes[name]

    def __iter__(self) -> Iterator[HostedNode]:
        return iter(self._nodes.values())

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, name: object) -> bool:
        return name in self._nodes

    @property
    def ready(self) -> bool:
        """The power state is known and every powered node is ready."""
        return self._power_known.is_set() and all(
            node.ready for node in self._nodes.values() if node.powered
        )

    async def run(self) -> None:
        """Follow the power state and run every node's services, until cancelled."""
        # Each hosted service expects a process of its own: a health monitor keeps one thread
        # in NVML's event wait and reads NVML in another, and the node's device plugin and GPU
        # DRA driver each keep one in an event wait (THREADS_PER_NODE). With fewer threads, an
        # XID or a reading would wait for other nodes' event waits to time out first (asyncio's
        # default executor, min(32, cores + 4) threads, would give 72 nodes 6).
        asyncio.get_running_loop().set_default_executor(
            ThreadPoolExecutor(
                max_workers=THREADS_PER_NODE * len(self._nodes) + 4,
                thread_name_prefix="nodehost",
            )
        )
        self.layout.root.mkdir(parents=True, exist_ok=True)
        self.layout.proc_devices.write_text(proc_devices_text())
        async with asyncio.TaskGroup() as group:
            group.create_task(self._follow_power(), name="nodehost power")
            for node in self._nodes.values():
                group.create_task(
                    node.run(), name=f"nodehost {node.name}", context=bound_context(node.nvml)
                )

    async def _follow_power(self) -> None:
        answered = time.monotonic()
        complained = False
        while True:
            try:
                states = await self._power.powered()
            except PowerUnavailableError as exc:
                silent = time.monotonic() - answered
                if silent > self.settings.power_unreachable_s:
                    raise PowerUnavailableError(
                        f"no power state for {silent:.0f} s; the cluster is gone: {exc}"
                    ) from exc
                if not complained:
                    log.warning("cannot read the nodes' power state", extra={"error": str(exc)})
                    complained = True
            else:
                answered, complained = time.monotonic(), False
                for name, node in self._nodes.items():
                    if name in states:
                        node.set_powered(states[name])
                self._power_known.set()
            await asyncio.sleep(self.settings.power_poll_s)
