"""The daemon's ``config.cfg``, rendered from the agent's settings and the node's address (pure).

Keys follow NVIDIA's IMEX configuration guide. The daemon runs in the foreground, a child of
the agent or of the IMEX launcher, so ``DAEMONIZE=0``; peers and the command service bind to the
node's own address; the command service is on, because the agent asks it through
``nvidia-imex-ctl``. With a certificate signer (``cert_signer``: the node's own key and
certificate in ``<config_dir>/tls``, the CA in ``ca_file``) or a TLS directory (a mounted Secret
holding ``tls.key``, ``tls.crt``, ``ca.crt``) peer connections use mutual TLS, one certificate
serving as both server and client identity.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from services.imex_agent.settings import ImexSettings

TLS_KEY = "tls.key"
TLS_CERT = "tls.crt"
TLS_CA = "ca.crt"


class ImexPaths(msgspec.Struct, frozen=True, kw_only=True):
    """The files of one node's daemon, all in the agent's config directory."""

    directory: Path

    @property
    def config(self) -> Path:
        return self.directory / "config.cfg"

    @property
    def nodes_config(self) -> Path:
        return self.directory / "nodes_config.cfg"

    @property
    def pid_file(self) -> Path:
        return self.directory / "nvidia-imex.pid"

    @property
    def tls_dir(self) -> Path:
        """The node's own key and certificate (with a certificate signer)."""
        return self.directory / "tls"

    @property
    def output(self) -> Path:
        """Where the daemon's stdout and stderr go."""
        return self.directory / "nvidia-imex.out"


def tls_files(settings: ImexSettings, paths: ImexPaths) -> tuple[str, str, str] | None:
    """Key, certificate and CA files of the daemon's TLS (None: no TLS)."""
    if settings.cert_signer:
        own = paths.tls_dir
        return str(own / TLS_KEY), str(own / TLS_CERT), settings.ca_file
    if settings.tls_dir:
        tls = Path(settings.tls_dir)
        return str(tls / TLS_KEY), str(tls / TLS_CERT), str(tls / TLS_CA)
    return None


def render_config(*, settings: ImexSettings, address: str, paths: ImexPaths) -> str:
    """The text of config.cfg for the daemon of the node at ``address``."""
    values: list[tuple[str, str]] = [
        ("DAEMONIZE", "0"),
        ("LOG_LEVEL", str(settings.log_level)),
        ("BIND_INTERFACE_IP", address),
        ("SERVER_PORT", str(settings.server_port)),
        ("IMEX_NODE_CONFIG_FILE", str(paths.nodes_config)),
        ("IMEX_WAIT_FOR_QUORUM", settings.wait_for_quorum),
        ("IMEX_NODE_DISCONNECTED_GRACE_TIME", str(settings.disconnected_grace_s)),
        ("IMEX_CMD_ENABLED", "1"),
        ("IMEX_CMD_BIND_INTERFACE_IP", address),
        ("IMEX_CMD_PORT", str(settings.cmd_port)),
    ]
    files = tls_files(settings, paths)
    if files is not None:
        key, cert, ca = files
        values += [
            ("IMEX_ENABLE_AUTH_ENCRYPTION", "1"),
            ("IMEX_AUTH_ENCRYPTION_MODE", "SSL_TLS"),
            ("IMEX_AUTH_SOURCE", "FILE"),
            ("IMEX_SERVER_KEY", key),
            ("IMEX_SERVER_CERT", cert),
            ("IMEX_SERVER_CERT_AUTH", ca),
            ("IMEX_CLIENT_KEY", key),
            ("IMEX_CLIENT_CERT", cert),
            ("IMEX_CLIENT_CERT_AUTH", ca),
        ]
        if settings.tls_target_override:
            values.append(("IMEX_SECURITY_TARGET_OVERRIDE", settings.tls_target_override))
    else:
        values.append(("IMEX_ENABLE_AUTH_ENCRYPTION", "0"))
    lines = ["# nvidia-imex config.cfg, written by the cdo IMEX agent; edits are overwritten."]
    lines += [f"{key}={value}" for key, value in values]
    return "\n".join(lines) + "\n"
