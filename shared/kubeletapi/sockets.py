"""Unix socket paths as gRPC addresses, the file housekeeping around them, a server on one."""

from __future__ import annotations

import os
from pathlib import Path

import grpc

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


class UnixGrpcServer:
    """A grpc.aio server of ``handler`` on the unix socket ``socket``, removed again on stop."""

    def __init__(self, socket: Path, handler: grpc.GenericRpcHandler) -> None:
        self.socket = socket
        self._handler = handler
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        clear_socket_path(self.socket)
        server = grpc.aio.server(handlers=[self._handler])
        address = unix_address(self.socket)
        if server.add_insecure_port(address) == 0:
            raise OSError(f"cannot listen on {address}")
        await server.start()
        self._server = server

    async def stop(self, grace: float | None = 1.0) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            await server.stop(grace)
            self.socket.unlink(missing_ok=True)
