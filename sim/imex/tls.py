"""Mutual TLS between daemons, from the IMEX_* key, certificate and CA settings.

With IMEX_ENABLE_AUTH_ENCRYPTION=1 and IMEX_AUTH_ENCRYPTION_MODE=SSL_TLS every peer connection
is TLS with client certificates required in both directions. IMEX_AUTH_SOURCE says how the six
values are read: FILE (they are paths), ENV_PATH (they name environment variables holding paths)
or ENV_VAL (they name environment variables holding the PEM text itself).
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import msgspec

from sim.imex.config import AuthSource, ImexConfig
from sim.imex.errors import ImexStartError

__all__ = ["TlsContexts", "load_tls"]


class TlsContexts(msgspec.Struct, frozen=True, kw_only=True):
    """The server side (incoming peers) and client side (outgoing peers) contexts."""

    server: ssl.SSLContext
    client: ssl.SSLContext
    # Name checked against the peer's certificate instead of its address, when set.
    target_override: str | None


def load_tls(config: ImexConfig, *, environ: Mapping[str, str] | None = None) -> TlsContexts | None:
    """Build the TLS contexts ``config`` asks for, or None when encryption is off."""
    if not config.enable_auth_encryption:
        return None
    env = os.environ if environ is None else environ
    try:
        with _materialized(config, env) as files:
            server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=files["server_ca"])
            server.verify_mode = ssl.CERT_REQUIRED
            server.load_cert_chain(files["server_cert"], files["server_key"])
            client = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=files["client_ca"])
            client.load_cert_chain(files["client_cert"], files["client_key"])
    except (OSError, ssl.SSLError) as exc:
        raise ImexStartError(f"cannot load TLS credentials: {exc}") from exc
    return TlsContexts(
        server=server, client=client, target_override=config.security_target_override or None
    )


@contextmanager
def _materialized(config: ImexConfig, env: Mapping[str, str]) -> Iterator[dict[str, str]]:
    """Paths of the six PEM files, writing ENV_VAL contents to a private temporary directory.

    ``ssl`` loads certificates and keys only from files; ENV_VAL material lives on disk only
    for as long as loading takes.
    """
    wanted = {
        "server_key": ("IMEX_SERVER_KEY", config.server_key),
        "server_cert": ("IMEX_SERVER_CERT", config.server_cert),
        "server_ca": ("IMEX_SERVER_CERT_AUTH", config.server_cert_auth),
        "client_key": ("IMEX_CLIENT_KEY", config.client_key),
        "client_cert": ("IMEX_CLIENT_CERT", config.client_cert),
        "client_ca": ("IMEX_CLIENT_CERT_AUTH", config.client_cert_auth),
    }
    if config.auth_source is AuthSource.FILE:
        yield {role: value for role, (_key, value) in wanted.items()}
        return
    resolved: dict[str, str] = {}
    for role, (key, variable) in wanted.items():
        if variable not in env:
            raise ImexStartError(f"{key}: environment variable {variable} is not set")
        resolved[role] = env[variable]
    if config.auth_source is AuthSource.ENV_PATH:
        yield resolved
        return
    with tempfile.TemporaryDirectory(prefix="imex-tls-") as directory:
        paths: dict[str, str] = {}
        for role, pem in resolved.items():
            path = Path(directory) / f"{role}.pem"
            path.touch(mode=0o600)
            path.write_text(pem, encoding="utf-8")
            paths[role] = str(path)
        yield paths
