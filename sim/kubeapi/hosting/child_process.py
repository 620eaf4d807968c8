"""The API emulator in a process of its own, for a simulated cluster that should use two cores.

The emulator and the cluster's kubelets, scheduler and controllers talk over HTTP either way;
in one process they share one core. :func:`serve_in_process_of_its_own` starts
``python -m sim.kubeapi`` with the whole :class:`ServerConfig`, waits until it serves, and stops
it on exit (it also dies with its parent, so a killed cluster leaves no emulator behind). With a
data directory, :meth:`ApiProcess.restart` kills it and starts it again on the same port, as
kube-apiserver restarts over etcd.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec

from sim.childproc import die_with_parent
from sim.kubeapi.config import ServerConfig

READY_PREFIX = "serving "
STOP_TIMEOUT_S = 10.0


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
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "sim.kubeapi",
            "--host", self.host, "--port", str(port), "--kubeconfig", str(self.kubeconfig),
            "--config-json", msgspec.json.encode(self.config).decode(),
            stdout=asyncio.subprocess.PIPE,
            preexec_fn=die_with_parent,
        )  # fmt: skip
        self._process = process
        assert process.stdout is not None
        async with asyncio.timeout(self.start_timeout_s):
            line = (await process.stdout.readline()).decode()
        if not line.startswith(READY_PREFIX):
            raise RuntimeError(f"the API emulator did not start (exit code {process.returncode})")
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
        await self.start(self.port)
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
