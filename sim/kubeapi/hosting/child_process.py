"""The API emulator in a process of its own, for a simulated cluster that should use two cores.

The emulator and the cluster's kubelets, scheduler and controllers talk over HTTP either way;
in one process they share one core. :func:`serve_in_process_of_its_own` starts
``python -m sim.kubeapi`` with the whole :class:`ServerConfig`, waits until it serves, and stops
it on exit (it also dies with its parent, so a killed cluster leaves no emulator behind).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import msgspec

from sim.childproc import die_with_parent
from sim.kubeapi.config import ServerConfig

READY_PREFIX = "serving "
STOP_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ApiProcess:
    """Where the emulator process serves."""

    url: str
    kubeconfig: Path
    pid: int


async def _forward(stream: asyncio.StreamReader) -> None:
    while line := await stream.readline():
        sys.stdout.write(line.decode(errors="replace"))
        sys.stdout.flush()


@contextlib.asynccontextmanager
async def serve_in_process_of_its_own(
    *, config: ServerConfig, host: str, port: int, kubeconfig: Path, start_timeout_s: float = 60.0
) -> AsyncIterator[ApiProcess]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sim.kubeapi",
        "--host", host, "--port", str(port), "--kubeconfig", str(kubeconfig),
        "--config-json", msgspec.json.encode(config).decode(),
        stdout=asyncio.subprocess.PIPE,
        preexec_fn=die_with_parent,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        async with asyncio.timeout(start_timeout_s):
            line = (await process.stdout.readline()).decode()
        if not line.startswith(READY_PREFIX):
            raise RuntimeError(f"the API emulator did not start (exit code {process.returncode})")
        url = line[len(READY_PREFIX) :].split()[0]
        # Whatever it prints later goes on to this process's output instead of filling the pipe.
        forward = asyncio.create_task(_forward(process.stdout), name="api emulator output")
        try:
            yield ApiProcess(url=url, kubeconfig=kubeconfig, pid=process.pid)
        finally:
            forward.cancel()
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(STOP_TIMEOUT_S):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()
