"""The API emulator in a process of its own, for a simulated cluster that should use two cores.

The emulator and the cluster's kubelets, scheduler and controllers talk over HTTP either way;
in one process they share one core. :func:`serve_in_process_of_its_own` starts
``python -m sim.kubeapi`` with the whole :class:`ServerConfig`, waits until it serves, and stops
it on exit (it also dies with its parent, so a killed cluster leaves no emulator behind: it asks
for that itself, ``--die-with-parent``, since forking a parent that runs gRPC to do it before
exec can abort the child). With a
data directory, :meth:`ApiProcess.restart` kills it and starts it again on the same port, as
kube-apiserver restarts over etcd.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec

from sim.kubeapi.config import ServerConfig

READY_PREFIX = "serving "
STOP_TIMEOUT_S = 10.0
PORT_ATTEMPTS = 20
PORT_RETRY_S = 0.5
_ADDRESS_IN_USE = "address already in use"


class ApiStartError(RuntimeError):
    """The emulator process ended before it served; ``port_taken``: its port was in use."""

    def __init__(self, message: str, *, port_taken: bool) -> None:
        super().__init__(message)
        self.port_taken = port_taken


class ApiProcess:
    """The emulator process: where it serves, and a way to restart it there."""

    def __init__(
        self, *, config: ServerConfig, host: str, kubeconfig: Path, start_timeout_s: float
    ) -> None:
        self.config = config
        self.host = host
        self.kubeconfig = kubeconfig
        self.start_timeout_s = start_timeout_s
        self.url = ""
        self.restarts = 0
        self._process: asyncio.subprocess.Process | None = None
        self._forward: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    async def start(self, port: int) -> None:
        """Start the server on ``port`` (0: a free one) and wait until it serves."""
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "sim.kubeapi",
            "--host", self.host, "--port", str(port), "--kubeconfig", str(self.kubeconfig),
            "--config-json", msgspec.json.encode(self.config).decode(),
            "--die-with-parent", str(os.getpid()),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        self._process = process
        assert process.stdout is not None
        said: list[str] = []  # what it printed before it served (warnings), or why it did not
        async with asyncio.timeout(self.start_timeout_s):
            while line := (await process.stdout.readline()).decode(errors="replace"):
                if line.startswith(READY_PREFIX):
                    break
                said.append(line)
        for earlier in said:
            sys.stdout.write(earlier)
        if not line.startswith(READY_PREFIX):
            await process.wait()
            raise ApiStartError(
                f"the API emulator did not start (exit code {process.returncode}): "
                + "".join(said[-20:]).strip(),
                port_taken=_ADDRESS_IN_USE in "".join(said),
            )
        self.url = line[len(READY_PREFIX) :].split()[0]
        # Whatever it prints later goes on to this process's output instead of filling the pipe.
        self._forward = asyncio.create_task(_forward(process.stdout), name="api emulator output")

    async def restart(self) -> None:
        """Kill the server (SIGKILL, as a crash) and start it again on the same port, from its
        data directory (``ServerConfig.data_dir``): the same objects and resourceVersions, the
        watch history gone. Clients see their connections drop and the port refuse for as long
        as the new process takes to start."""
        if not self.config.data_dir:
            raise RuntimeError("a restart needs ServerConfig.data_dir: everything would be lost")
        await self.stop(signal.SIGKILL)
        for attempt in range(PORT_ATTEMPTS):
            try:
                await self.start(self.port)
                break
            except ApiStartError as exc:
                # The port is free once the process is gone, but until the new one binds it any
                # program on the machine may get it as the source port of a connection.
                if not exc.port_taken or attempt == PORT_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(PORT_RETRY_S)
        self.restarts += 1

    async def stop(self, signum: int = signal.SIGTERM) -> None:
        process = self._process
        if self._forward is not None:
            self._forward.cancel()
            self._forward = None
        if process is None or process.returncode is not None:
            return
        process.send_signal(signum)
        try:
            async with asyncio.timeout(STOP_TIMEOUT_S):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()


async def _forward(stream: asyncio.StreamReader) -> None:
    while line := await stream.readline():
        sys.stdout.write(line.decode(errors="replace"))
        sys.stdout.flush()


@contextlib.asynccontextmanager
async def serve_in_process_of_its_own(
    *, config: ServerConfig, host: str, port: int, kubeconfig: Path, start_timeout_s: float = 60.0
) -> AsyncIterator[ApiProcess]:
    api = ApiProcess(
        config=config, host=host, kubeconfig=kubeconfig, start_timeout_s=start_timeout_s
    )
    try:
        await api.start(port)
        yield api
    finally:
        await api.stop()
