"""A handful of simulated IMEX daemons as real processes, for the integration tests.

Each cluster gets its own random /24 on 127.0.0.0/8 and one free peer port and command port
shared by all of its nodes, as real nodes share SERVER_PORT and IMEX_CMD_PORT; distinct
loopback addresses keep the listeners apart. Everything lives under the test's tmp_path.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from sim.imex.client import Endpoint, query_status
from sim.imex.errors import CommandError
from sim.imex.protocol import NodeStatus

REPO_ROOT = Path(__file__).resolve().parents[3]


def free_port() -> int:
    """A TCP port free on every local address right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def loopback_subnet() -> str:
    """A random 127.x.y prefix, so that concurrent test runs do not meet on one address."""
    return f"127.{random.randint(64, 250)}.{random.randint(0, 255)}"


class Node:
    """One simulated node: its address, files and (when running) its daemon process."""

    def __init__(self, root: Path, index: int, address: str) -> None:
        self.index = index
        self.address = address
        self.config = root / f"node{index}" / "config.cfg"
        self.log = root / f"node{index}" / "imex.log"
        self.stderr = root / f"node{index}" / "stderr.txt"
        self.process: subprocess.Popen[bytes] | None = None
        self.config.parent.mkdir(parents=True, exist_ok=True)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def signal(self, signum: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(signum)


class ProcessCluster:
    """Configs for ``size`` nodes sharing one nodes_config, and helpers to run them."""

    def __init__(self, root: Path, size: int) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.subnet = loopback_subnet()
        self.peer_port = free_port()
        self.cmd_port = free_port()
        self.nodes = [Node(root, index, f"{self.subnet}.{index + 1}") for index in range(size)]
        self.nodes_file = root / "nodes_config.cfg"
        self.write_nodes_file(self.nodes_file, [node.address for node in self.nodes])
        self.hosts_file: Path | None = None
        """A hosts file the daemons and the ctl resolve names through (``--hosts-file``)."""
        for node in self.nodes:
            self.write_config(node)

    def address(self, index: int) -> str:
        return f"{self.subnet}.{index + 1}"

    @staticmethod
    def write_nodes_file(path: Path, entries: list[str]) -> None:
        path.write_text("".join(f"{entry}\n" for entry in entries))

    def write_config(
        self, node: Node, *, nodes_file: Path | None = None, extra: dict[str, str] | None = None
    ) -> None:
        settings = {
            "DAEMONIZE": "0",
            "LOG_FILE_NAME": str(node.log),
            "BIND_INTERFACE_IP": node.address,
            "SERVER_PORT": str(self.peer_port),
            "IMEX_NODE_CONFIG_FILE": str(nodes_file or self.nodes_file),
            "IMEX_WAIT_FOR_QUORUM": "RECOVERY",
            "IMEX_CMD_ENABLED": "1",
            "IMEX_CMD_BIND_INTERFACE_IP": node.address,
            "IMEX_CMD_PORT": str(self.cmd_port),
            **(extra or {}),
        }
        body = "".join(f"{key}={value}\n" for key, value in settings.items())
        node.config.write_text("# simulated node\n" + body)

    def _hosts_args(self) -> list[str]:
        return ["--hosts-file", str(self.hosts_file)] if self.hosts_file is not None else []

    def start(self, *nodes: Node) -> None:
        for node in nodes or tuple(self.nodes):
            if node.process is not None:
                # Reap a daemon that was killed or exited before its handle is replaced.
                node.process.poll()
            with node.stderr.open("wb") as stderr:
                node.process = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "sim.imex.daemon",
                        "-c",
                        str(node.config),
                        *self._hosts_args(),
                    ],
                    cwd=REPO_ROOT,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                )

    def ctl(self, node: Node, *args: str) -> subprocess.CompletedProcess[str]:
        return run_ctl("-c", str(node.config), *self._hosts_args(), *args)

    def domain(self, node: Node) -> dict[str, Any]:
        """The ``-N -j`` document as ``node``'s ctl prints it."""
        result = self.ctl(node, "-N", "-j")
        assert result.returncode == 0, result.stderr
        document: dict[str, Any] = json.loads(result.stdout)
        return document

    def status(self, node: Node) -> NodeStatus | None:
        """The daemon's own report, straight from its command port (None if unreachable)."""
        endpoint = Endpoint(host=node.address, port=self.cmd_port)
        try:
            return asyncio.run(query_status(endpoint, reply_within=1.0))
        except CommandError:
            return None

    def close(self) -> None:
        for node in self.nodes:
            process = node.process
            if process is None or process.poll() is not None:
                continue
            process.kill()
            process.wait(timeout=10)


def run_ctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sim.imex.ctl", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=20,
        env={**os.environ, **(env or {})},
        check=False,
    )


def cells(document: dict[str, Any], row: int) -> list[str]:
    """The connection states of one row of a ``-N -j`` document, in column order."""
    connections = document["nodes"][str(row)]["connections"]
    return [connections[str(column)]["status"] for column in range(len(connections))]
