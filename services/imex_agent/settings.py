"""Settings of the IMEX agent, from CDO_IMEX_AGENT_* environment variables.

    python -m services.imex_agent --settings     # every variable, default and meaning

The runtime's own CDO_* settings (NATS, probes, logging, tracing) come on top; see
docs/runtime.md. The defaults are the paths and ports of a GPU node; the simulator and the tests
point them at temporary directories, per-node loopback addresses and the simulated programs.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from msgspec import Meta

from shared.crds.names import ALLOCATOR_USER
from shared.errors import ConfigError
from shared.kube.informer import InformerSettings
from shared.kube.settings import ApiSettings, KubeAccessSettings
from shared.settings import INLINE, Settings, describe_table, load_settings

ENV_PREFIX = "CDO_IMEX_AGENT_"

DeviceMode = Literal["mknod", "placeholder"]


class ImexSettings(Settings, frozen=True, kw_only=True):
    """The node's IMEX daemon: programs, files, ports and pacing."""

    daemon_command: Annotated[
        str,
        Meta(
            description="The IMEX daemon program and leading arguments (shell words); the agent "
            "appends -c <config.cfg>.",
            min_length=1,
        ),
    ] = "nvidia-imex"
    ctl_command: Annotated[
        str,
        Meta(
            description="The IMEX control program and leading arguments (shell words); the agent "
            "appends -c <config.cfg> and -q or -N -j.",
            min_length=1,
        ),
    ] = "nvidia-imex-ctl"
    config_dir: Annotated[
        str,
        Meta(
            description="Directory of config.cfg, nodes_config.cfg, the daemon record "
            "(nvidia-imex.pid) and output (owned by the agent).",
            min_length=1,
        ),
    ] = "/var/run/cdo-imex"
    hosts_file: Annotated[
        str,
        Meta(
            description="Hosts file the daemon resolves node-map names through; the agent "
            "manages one marked block in it.",
            min_length=1,
        ),
    ] = "/etc/hosts"
    server_port: Annotated[int, Meta(description="SERVER_PORT: the peer port.", ge=1, le=65535)] = (
        50000
    )
    cmd_port: Annotated[
        int,
        Meta(description="IMEX_CMD_PORT: the command port nvidia-imex-ctl asks.", ge=1, le=65535),
    ] = 50005
    wait_for_quorum: Annotated[
        str,
        Meta(description="IMEX_WAIT_FOR_QUORUM: RECOVERY or NONE.", pattern="^(RECOVERY|NONE)$"),
    ] = "RECOVERY"
    disconnected_grace_s: Annotated[
        int,
        Meta(
            description="IMEX_NODE_DISCONNECTED_GRACE_TIME: seconds before a lost peer is cleaned "
            "up (-1: never, IMEX's default).",
            ge=-1,
        ),
    ] = -1
    log_level: Annotated[int, Meta(description="LOG_LEVEL of the daemon (0..4).", ge=0, le=4)] = 4
    tls_dir: Annotated[
        str,
        Meta(
            description="Directory of a mounted TLS Secret (tls.key, tls.crt, ca.crt): turns on "
            "IMEX_ENABLE_AUTH_ENCRYPTION with SSL_TLS; empty: no encryption.",
        ),
    ] = ""
    cert_signer: Annotated[
        str,
        Meta(
            description="Signer of this node's own IMEX certificate (cdo.dev/imex): the agent "
            "makes its key on the node, requests the certificate with a "
            "CertificateSigningRequest, renews it, and turns on IMEX_ENABLE_AUTH_ENCRYPTION with "
            "<config_dir>/tls/tls.key and tls.crt and the CA in ca_file; empty: tls_dir decides.",
        ),
    ] = ""
    ca_file: Annotated[
        str,
        Meta(
            description="The IMEX CA certificate peers are checked against, with cert_signer "
            "(the imex-tls component mounts Secret cdo-imex-ca's tls.crt).",
        ),
    ] = ""
    tls_target_override: Annotated[
        str,
        Meta(
            description="IMEX_SECURITY_TARGET_OVERRIDE: the name peers' certificates are checked "
            "against instead of their address.",
        ),
    ] = ""
    restart_backoff_initial_s: Annotated[
        float, Meta(description="Pause before restarting a daemon that died.", ge=0)
    ] = 0.5
    restart_backoff_max_s: Annotated[
        float, Meta(description="Longest pause between restarts of a failing daemon.", gt=0)
    ] = 30.0
    stable_after_s: Annotated[
        float, Meta(description="A daemon that ran this long resets the restart backoff.", gt=0)
    ] = 60.0
    stop_timeout_s: Annotated[
        float, Meta(description="Wait this long after SIGTERM before SIGKILL.", gt=0)
    ] = 10.0
    max_nodes_per_domain: Annotated[
        int,
        Meta(
            description="maxNodesPerIMEXDomain: the slots of the static node map, one stable "
            "name each (18 on an NVL72 rack); a node whose slot is outside it is no member.",
            ge=1,
            le=1024,
        ),
    ] = 18
    empty_slot_address: Annotated[
        str,
        Meta(
            description="The sentinel address an empty slot's name resolves to: a loopback "
            "address nothing listens on, so IMEX sees a peer that is down (connection refused "
            "at once, no DNS lookup, no connect timeout).",
            min_length=1,
        ),
    ] = "127.255.255.254"
    leave_grace_s: Annotated[
        float,
        Meta(
            description="How long this node's daemon keeps running after the node left its "
            "clique (no clique from NVML, or out of the roster): a label or fabric that comes "
            "back within it costs no restart. The default is as long as a ComputeDomain's "
            "default failover grace (spec.failover.graceSeconds, 300 s), so a fabric manager "
            "restart or a short rack maintenance restarts no daemon.",
            ge=0,
        ),
    ] = 300.0
    reload_min_interval_s: Annotated[
        float,
        Meta(
            description="IMEX_MINIMUM_SSL_RELOAD_INTERVAL: IMEX processes at most one SIGUSR1 "
            "per this many seconds; a change inside the window is signalled when it ends.",
            ge=0,
        ),
    ] = 5.0
    poll_interval_s: Annotated[
        float, Meta(description="How often nvidia-imex-ctl is asked while nothing changes.", gt=0)
    ] = 5.0
    fast_poll_interval_s: Annotated[
        float, Meta(description="How often it is asked while something is changing.", gt=0)
    ] = 0.5
    fast_poll_window_s: Annotated[
        float, Meta(description="How long 'changing' lasts after the last change seen.", ge=0)
    ] = 5.0
    ctl_timeout_s: Annotated[
        float, Meta(description="Longest one nvidia-imex-ctl call may take.", gt=0)
    ] = 10.0
    foreign_check: Annotated[
        bool,
        Meta(
            description="Refuse to start when the node's IMEX ports already answer (another "
            "nvidia-imex runs on the host).",
        ),
    ] = True
    clique_refresh_s: Annotated[
        float, Meta(description="How often NVML fabric and platform info are read again.", gt=0)
    ] = 30.0
    launcher_socket: Annotated[
        str,
        Meta(
            description="Unix socket of the IMEX launcher (python -m "
            "services.imex_agent.launcher) that runs the daemon in a container of its own; "
            "empty: the agent starts the daemon itself, in a session of its own.",
        ),
    ] = ""
    stop_on_exit: Annotated[
        bool,
        Meta(
            description="Stop the daemon when the agent shuts down (SIGTERM). Off: it keeps "
            "running and the next agent adopts it, so an agent restart or upgrade never "
            "restarts IMEX.",
        ),
    ] = False

    @property
    def daemon_argv(self) -> tuple[str, ...]:
        return tuple(shlex.split(self.daemon_command))

    @property
    def ctl_argv(self) -> tuple[str, ...]:
        return tuple(shlex.split(self.ctl_command))

    @property
    def directory(self) -> Path:
        return Path(self.config_dir)


class DraSettings(Settings, frozen=True, kw_only=True):
    """The DRA kubelet plugin, CDI specs and channel device nodes."""

    kubelet_root: Annotated[
        str,
        Meta(description="The kubelet's root: plugins/ and plugins_registry/ are below it."),
    ] = "/var/lib/kubelet"
    cdi_root: Annotated[str, Meta(description="Directory of CDI spec files.")] = "/var/run/cdi"
    device_root: Annotated[
        str, Meta(description="Host directory of the IMEX channel device nodes.")
    ] = "/dev/nvidia-caps-imex-channels"
    device_mode: Annotated[
        DeviceMode,
        Meta(
            description="mknod: create character devices (needs CAP_MKNOD); placeholder: create "
            "regular files that name the device (simulations without mknod).",
        ),
    ] = "mknod"
    proc_devices: Annotated[
        str, Meta(description="Where the channel device's major number is read.")
    ] = "/proc/devices"
    device_major: Annotated[
        int,
        Meta(
            description="The channel device's major number; -1: read it from proc_devices.", ge=-1
        ),
    ] = -1
    checkpoint_file: Annotated[
        str,
        Meta(
            description="Prepared claims, kept across restarts; empty: "
            "<kubelet_root>/plugins/compute-domain.cdo.dev/checkpoint.json.",
        ),
    ] = ""
    attachments: Annotated[
        int,
        Meta(
            description="Attachment devices in the node's ResourceSlice (pods with a channel "
            "on the node at once); 0: two per GPU.",
            ge=0,
            le=128,
        ),
    ] = 0
    slice_resync_s: Annotated[
        float, Meta(description="How often the ResourceSlice is checked against the API.", gt=0)
    ] = 300.0
    ready_wait_s: Annotated[
        float,
        Meta(
            description="How long NodePrepareResources waits for the node's IMEX daemon to be "
            "READY before it fails the claim with a retriable error (0: answer at once). Keep "
            "it below the kubelet's 45 s deadline for one call.",
            ge=0,
        ),
    ] = 40.0


class RuntimeCheckSettings(Settings, frozen=True, kw_only=True):
    """The look at the node's container runtime: does it inject CDI devices?"""

    config_root: Annotated[
        str,
        Meta(
            description="Where the host's root is seen, to read <root>/etc/containerd/"
            "config.toml and its imports (the DaemonSet mounts the host's /etc/containerd "
            "read-only at /host/etc/containerd); empty: the configuration is not read and the "
            "finding rests on the runtime's version.",
        ),
    ] = ""
    interval_s: Annotated[
        float, Meta(description="How often the runtime is looked at again.", gt=0)
    ] = 300.0


class AgentSettings(KubeAccessSettings, frozen=True, kw_only=True):
    """The agent of one node."""

    node_name: Annotated[
        str, Meta(description="This node's name (downward API spec.nodeName).", min_length=1)
    ]
    address: Annotated[
        str,
        Meta(
            description="The node address IMEX binds to and peers reach (downward API "
            "status.hostIP).",
            min_length=1,
        ),
    ]
    api: Annotated[ApiSettings, INLINE] = ApiSettings(field_manager="cdo-imex-agent")
    placement_writer: Annotated[
        str,
        Meta(
            description="The clique allocator's Kubernetes user: a channel is granted only from "
            "a Placement it wrote last (annotation cdo.dev/written-by; deploy/ sets it from the "
            "pod's namespace).",
            min_length=1,
        ),
    ] = ALLOCATOR_USER
    imex: ImexSettings = ImexSettings()
    dra: DraSettings = DraSettings()
    runtime: RuntimeCheckSettings = RuntimeCheckSettings()
    informer: InformerSettings = InformerSettings()


def load(environ: Mapping[str, str] | None = None) -> AgentSettings:
    """Read the settings; ConfigError names the variable that is wrong."""
    settings = load_settings(AgentSettings, prefix=ENV_PREFIX, environ=environ)
    if settings.imex.cert_signer and not settings.imex.ca_file:
        raise ConfigError(
            f"{ENV_PREFIX}IMEX_CA_FILE: required when {ENV_PREFIX}IMEX_CERT_SIGNER is set (the "
            "IMEX CA certificate peers are checked against)"
        )
    return settings


def describe() -> str:
    """Every CDO_IMEX_AGENT_* variable with its default and meaning, one per line."""
    return describe_table(AgentSettings, prefix=ENV_PREFIX, default_width=32)
