"""The demo's topology page (``./task demo -- --ui``): ``python -m cli.ui`` started beside the
story for the demo's cluster, its address printed, stopped with the cluster.

It runs as a process of its own, as ``cdo ui`` would in an operator's terminal: the simulator
never imports the command line (import-linter), and the page reads the cluster only through
the API and NATS addresses the demo prints.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from sim.natsserver import free_port

START_TIMEOUT_S = 30.0
"""Longest wait for the page server to answer after it is started."""


class UiPageError(RuntimeError):
    """The page server did not start; the message says why and where its log is."""


@dataclass
class UiPage:
    """A running page server: its address, its process and its log."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        """Stop the server (at once if it does not end within five seconds)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_ui_page(
    *, kubeconfig: str, nats_url: str, nats_token_file: str, log: Path, port: int = 0
) -> UiPage:
    """Start ``python -m cli.ui`` for this cluster on 127.0.0.1 and wait until it answers."""
    port = port or free_port()
    environ = dict(os.environ)
    if nats_token_file:
        environ["CDO_NATS_TOKEN_FILE"] = nats_token_file
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cli.ui",
                "--kubeconfig",
                kubeconfig,
                "--nats-url",
                nats_url,
                "--address",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=environ,
        )
    page = UiPage(url=f"http://127.0.0.1:{port}/", process=process, log=log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise UiPageError(f"the page server exited with {process.returncode}; see {log}")
        if _answers(page.url):
            return page
        time.sleep(0.1)
    page.stop()
    raise UiPageError(f"the page server did not answer within {START_TIMEOUT_S:.0f} s; see {log}")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as reply:
            return int(reply.status) == 200
    except (urllib.error.URLError, OSError):
        return False
