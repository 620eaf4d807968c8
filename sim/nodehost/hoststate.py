"""What a hosted node's machine (not its GPUs) can be set to: the broken states a platform team
meets on real GPU nodes, each presented as the IMEX agent would meet it there.

- ``host_imex``: the host's own ``nvidia-imex`` service (the driver package's systemd unit)
  runs. The node's daemons are killed, as a reboot into a host with the unit enabled would, and
  a simulated daemon started from the host's own configuration (``<node>/host/etc/nvidia-imex``)
  binds the node's IMEX ports before the agent can start its own; the agent's port probe then
  finds it (``ForeignImexDaemon``). Turned off, the host daemon stops and the agent starts its
  own at its next look.
- ``cdi``: containerd's configuration (``<node>/host/etc/containerd/config.toml``, which the
  agent reads as the host's ``/etc/containerd/config.toml``) sets ``enable_cdi = false``, or
  leaves it at the runtime's default again; the agent is asked to look at once.
- ``imex_programs``: the node has no ``nvidia-imex`` and ``nvidia-imex-ctl`` (its ``NodeImex``
  says so to the agent before each start), or has them again. Taking them away kills the
  node's daemons too, as a node booted without the driver's IMEX package has none running.

Each is a tagged msgspec Struct, as the control API receives it (``{"kind": "cdi", "enabled":
false}``). The simulated kubelet and runtime do not read this configuration: pods get their CDI
devices whatever it says; only the agent's check sees it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec

from sim.imex import ImexDaemon, Resolver, Timing, load_config
from sim.nodehost.imex import NodeImex

CONTAINERD_DEFAULT = (
    "# The simulated node's containerd (containerd://2.1.4): CDI as 2.x has it by default.\n"
    "version = 2\n"
)
CONTAINERD_CDI_OFF = (
    CONTAINERD_DEFAULT + '\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = false\n'
)


class HostImexService(msgspec.Struct, frozen=True, kw_only=True, tag="host_imex", tag_field="kind"):
    """The host's own nvidia-imex service runs (or stops)."""

    running: bool = True


class RuntimeCdi(msgspec.Struct, frozen=True, kw_only=True, tag="cdi", tag_field="kind"):
    """CDI on or off in the node's container runtime configuration."""

    enabled: bool = True


class ImexPrograms(
    msgspec.Struct, frozen=True, kw_only=True, tag="imex_programs", tag_field="kind"
):
    """The IMEX programs installed on the node, or missing."""

    installed: bool = True


HostFault = HostImexService | RuntimeCdi | ImexPrograms


class HostState:
    """One hosted node's machine: its runtime configuration, programs and host IMEX service."""

    def __init__(
        self,
        *,
        root: Path,
        address: str,
        ports: tuple[int, int],
        imex: NodeImex,
        timing: Timing,
        on_runtime_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.root = root
        self._address = address
        self._ports = ports
        self._imex = imex
        self._timing = timing
        self._on_runtime_change = on_runtime_change
        self._host_daemon: ImexDaemon | None = None

    @property
    def containerd_config(self) -> Path:
        return self.root / "etc" / "containerd" / "config.toml"

    def prepare(self) -> None:
        """The machine as installed: containerd's default configuration (kept if present)."""
        if not self.containerd_config.exists():
            self.containerd_config.parent.mkdir(parents=True, exist_ok=True)
            self.containerd_config.write_text(CONTAINERD_DEFAULT)

    @property
    def host_imex_running(self) -> bool:
        return self._host_daemon is not None

    async def apply(self, fault: HostFault) -> str:
        """Set the machine as ``fault`` says; a short description of what changed."""
        match fault:
            case HostImexService(running=True):
                await self._start_host_imex()
                return "the host's nvidia-imex service runs on the node's IMEX ports"
            case HostImexService(running=False):
                await self.stop_host_imex()
                return "the host's nvidia-imex service stopped"
            case RuntimeCdi(enabled=enabled):
                self.prepare()
                self.containerd_config.write_text(
                    CONTAINERD_DEFAULT if enabled else CONTAINERD_CDI_OFF
                )
                self._on_runtime_change()
                return f"containerd: CDI {'as by default (on)' if enabled else 'off'}"
            case ImexPrograms(installed=installed):
                self._imex.programs_installed = installed
                if not installed:
                    await self._imex.power_loss()
                return f"IMEX programs {'installed' if installed else 'missing'}"
        raise ValueError(f"unknown host fault {fault!r}")

    async def _start_host_imex(self) -> None:
        if self._host_daemon is not None:
            return
        directory = self.root / "etc" / "nvidia-imex"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "nodes_config.cfg").write_text(f"{self._address}\n")
        server, command = self._ports
        (directory / "config.cfg").write_text(
            "DAEMONIZE=0\n"
            f"BIND_INTERFACE_IP={self._address}\nSERVER_PORT={server}\n"
            f"IMEX_CMD_ENABLED=1\nIMEX_CMD_BIND_INTERFACE_IP={self._address}\n"
            f"IMEX_CMD_PORT={command}\nIMEX_NODE_CONFIG_FILE=nodes_config.cfg\n"
        )
        hosts = directory / "hosts"
        hosts.write_text("")
        # The agent's daemon goes, as at a reboot; the host's unit comes up first.
        await self._imex.power_loss()
        daemon = ImexDaemon(
            load_config(directory / "config.cfg"),
            resolver=Resolver(hosts, system=False),
            timing=self._timing,
        )
        await daemon.start()
        self._host_daemon = daemon

    async def stop_host_imex(self) -> None:
        daemon, self._host_daemon = self._host_daemon, None
        if daemon is not None:
            await daemon.stop()
