"""Unix socket paths as gRPC addresses, and the file housekeeping around them."""

from __future__ import annotations

import os
from pathlib import Path

from shared.errors import ConfigError

# sockaddr_un.sun_path holds 108 bytes including the terminating NUL.
MAX_SOCKET_PATH_BYTES = 107


def unix_address(path: str | os.PathLike[str]) -> str:
    """The gRPC target/bind address of the socket at ``path`` (made absolute).

    Raises ConfigError when the path is too long for a unix socket, which the kernel would
    otherwise report as an obscure bind or connect failure.
    """
    absolute = os.path.abspath(os.fspath(path))
    if len(os.fsencode(absolute)) > MAX_SOCKET_PATH_BYTES:
        raise ConfigError(
            f"unix socket path is longer than {MAX_SOCKET_PATH_BYTES} bytes: {absolute}"
        )
    return f"unix:{absolute}"


def clear_socket_path(path: Path) -> None:
    """Make ``path`` bindable: create its directory and remove a socket left by a previous run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
