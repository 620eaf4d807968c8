"""What the node host reads: its own pacing (CDO_NODEHOST_*) and its services' settings.

The hosted services read the variables their own processes read, so one environment configures
both ways of running them: ``CDO_IMEX_AGENT_IMEX_*`` (the daemon's pacing and ports),
``CDO_IMEX_AGENT_INFORMER_*``, ``CDO_IMEX_AGENT_DRA_ATTACHMENTS`` and ``..._SLICE_RESYNC_S``
for the IMEX agents, ``CDO_HEALTH_*`` for the health monitors. Node identity and every path are
the node host's: each node gets its own directory under the state directory, and its kubelet
plugin goes into the simulated kubelet's directory of that node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import msgspec
from msgspec import Meta

from services.health_monitor.classification import DEFAULT_CLASSIFIER, Classifier
from services.health_monitor.settings import (
    MonitorSettings,
    load_classifier,
    load_monitor_settings,
)
from services.imex_agent import AgentSettings, DraSettings, ImexSettings
from services.imex_agent.settings import RuntimeCheckSettings
from shared.crds.names import DRIVER_NAME
from shared.errors import ConfigError
from shared.kube.informer import InformerSettings
from shared.kubeletapi import PluginPaths
from shared.settings import Settings, describe_table, load_settings
from sim.topology import Node as TopologyNode

ENV_PREFIX = "CDO_NODEHOST_"
# The longest path a unix socket can have on Linux (sun_path is 108 bytes with its NUL).
_MAX_SOCKET_PATH = 107


class HostSettings(Settings, frozen=True, kw_only=True):
    """The node host itself."""

    power_poll_s: Annotated[
        float, Meta(description="How often the cluster's power state of the nodes is read.", gt=0)
    ] = 0.25
    power_unreachable_s: Annotated[
        float,
        Meta(
            description="The cluster's control API may fail to answer this long before the "
            "node host gives up and exits (the cluster is gone).",
            gt=0,
        ),
    ] = 15.0
    restart_backoff_s: Annotated[
        float, Meta(description="First pause before a node's failed services start again.", gt=0)
    ] = 0.5
    restart_backoff_max_s: Annotated[
        float, Meta(description="Longest pause between restarts of a node's services.", gt=0)
    ] = 30.0
    stable_after_s: Annotated[
        float,
        Meta(description="Services that ran this long reset the restart backoff.", gt=0),
    ] = 60.0
    bus_close_timeout_s: Annotated[
        float, Meta(description="Longest wait for one node's NATS connection to close.", gt=0)
    ] = 5.0
    control_host: Annotated[str, Meta(description="Address of the control API.")] = "127.0.0.1"
    control_port: Annotated[
        int, Meta(description="Port of the control API (0: any free port).", ge=0, le=65535)
    ] = 0


@dataclass(frozen=True)
class ServiceSettings:
    """Settings every hosted IMEX agent and health monitor shares (identity and paths aside)."""

    imex: ImexSettings = field(default_factory=ImexSettings)
    agent_informer: InformerSettings = field(default_factory=InformerSettings)
    attachments: int = 0
    slice_resync_s: float = 300.0
    monitor: MonitorSettings = field(default_factory=MonitorSettings)
    classifier: Classifier = field(default_factory=lambda: DEFAULT_CLASSIFIER)
    pod_resources: bool = True
    """Give each health monitor its kubelet's PodResources socket, so that a fault of one
    device-plugin GPU evicts only the pods holding it (the node's device plugin takes the GPU
    out of allocatable). Off: every fault of a device-plugin GPU taints the whole node."""

    def with_imex(self, **changes: object) -> ServiceSettings:
        """These settings with some IMEX settings replaced (ports, pacing)."""
        return dataclasses.replace(self, imex=msgspec.structs.replace(self.imex, **changes))


def load_host_settings(environ: Mapping[str, str] | None = None) -> HostSettings:
    return load_settings(HostSettings, prefix=ENV_PREFIX, environ=environ)


def load_service_settings(environ: Mapping[str, str] | None = None) -> ServiceSettings:
    """The hosted services' settings from the variables their own processes read."""
    dra = load_settings(DraSettings, prefix="CDO_IMEX_AGENT_DRA_", environ=environ)
    return ServiceSettings(
        imex=load_settings(ImexSettings, prefix="CDO_IMEX_AGENT_IMEX_", environ=environ),
        agent_informer=load_settings(
            InformerSettings, prefix="CDO_IMEX_AGENT_INFORMER_", environ=environ
        ),
        attachments=dra.attachments,
        slice_resync_s=dra.slice_resync_s,
        monitor=load_monitor_settings(environ),
        classifier=load_classifier(environ),
    )


def describe() -> str:
    """Every CDO_NODEHOST_* variable with its default and meaning, one per line."""
    return describe_table(HostSettings, prefix=ENV_PREFIX, default_width=12, empty="")


@dataclass(frozen=True)
class NodeLayout:
    """Where each hosted node keeps its files.

    ``root/<node>/`` holds the node's IMEX config directory, hosts file, CDI specs and channel
    devices; ``kubelet_root(node)`` is the simulated kubelet's directory of the node, where the
    agent's DRA plugin registers.
    """

    root: Path
    kubelet_root: Callable[[str], Path]

    def node_dir(self, node: str) -> Path:
        return self.root / node

    def host_root(self, node: str) -> Path:
        """The node's machine as the agent sees the host's root: ``etc/containerd`` and the
        host's own ``etc/nvidia-imex`` (:mod:`sim.nodehost.hoststate`)."""
        return self.node_dir(node) / "host"

    @property
    def proc_devices(self) -> Path:
        """A /proc/devices stand-in naming the IMEX channel device's major number."""
        return self.root / "proc-devices"

    def check(self, nodes: list[str]) -> None:
        """ConfigError when a node's plugin socket path would be too long for a unix socket."""
        for node in nodes:
            paths = PluginPaths.for_driver(DRIVER_NAME, kubelet_root=self.kubelet_root(node))
            for path in (paths.plugin_socket, paths.registration_socket):
                if len(str(path)) > _MAX_SOCKET_PATH:
                    raise ConfigError(
                        f"{path}: {len(str(path))} characters, but a unix socket path may have "
                        f"at most {_MAX_SOCKET_PATH}; use a shorter state directory"
                    )


CHANNEL_DEVICE_MAJOR = 234
"""The major number the simulated nodes' /proc/devices gives nvidia-caps-imex-channels."""


def proc_devices_text() -> str:
    return (
        f"Character devices:\n  1 mem\n{CHANNEL_DEVICE_MAJOR} nvidia-caps-imex-channels\n\n"
        "Block devices:\n  8 sd\n"
    )


def agent_settings(
    node: TopologyNode, *, layout: NodeLayout, services: ServiceSettings
) -> AgentSettings:
    """The IMEX agent settings of one hosted node."""
    home = layout.node_dir(node.name)
    imex = msgspec.structs.replace(
        services.imex, config_dir=str(home / "imex"), hosts_file=str(home / "hosts")
    )
    dra = DraSettings(
        kubelet_root=str(layout.kubelet_root(node.name)),
        cdi_root=str(home / "cdi"),
        device_root=str(home / "dev"),
        device_mode="placeholder",
        proc_devices=str(layout.proc_devices),
        attachments=services.attachments,
        slice_resync_s=services.slice_resync_s,
    )
    return AgentSettings(
        node_name=node.name,
        address=node.address,
        imex=imex,
        dra=dra,
        runtime=RuntimeCheckSettings(config_root=str(layout.host_root(node.name))),
        informer=services.agent_informer,
    )
