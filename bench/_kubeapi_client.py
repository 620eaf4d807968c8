"""The client side shared by the scenarios of ``bench.kubeapi``: starting the emulator in its
own process (optionally under cProfile), bulk creates, timed GETs, the server's RSS, and the
table rows with the figures behind them. A library module of ``bench.kubeapi``."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import yaml

PODS = "/api/v1/namespaces/{ns}/pods"
NAMESPACES = 10
SEQ = "bench/seq"
"""The annotation each paced patch sets to its sequence number."""


@dataclass
class Rows:
    """Table rows and the figures behind them."""

    rows: list[tuple[str, str]]
    figures: dict[str, float]


async def start_server(
    tmp: Path,
    *,
    authz: bool,
    name: str = "",
    profile: Path | None = None,
    config: dict[str, Any] | None = None,
) -> tuple[asyncio.subprocess.Process, str]:
    """The emulator as ``python -m sim.kubeapi`` over plain HTTP; with ``profile`` under
    cProfile, which writes its statistics there when the server is terminated."""
    kubeconfig = tmp / (name or ("kubeconfig-authz" if authz else "kubeconfig"))
    settings = {"watch_window": 50000, "enforce_auth": authz, "tls": False, **(config or {})}
    runner = ["-m", "cProfile", "-o", str(profile)] if profile is not None else []
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *runner, "-m", "sim.kubeapi", "--port", "0",
        "--kubeconfig", str(kubeconfig),
        "--config-json", msgspec.json.encode(settings).decode(),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    await asyncio.wait_for(proc.stdout.readline(), 60)
    url = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    return proc, url


async def stop_server(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM and wait: the server shuts down cleanly (and cProfile, if any, writes)."""
    if proc.returncode is None:
        proc.terminate()
    await proc.wait()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class CpuClock:
    """The CPU seconds (user and system) a process spent, phase by phase, from /proc: what the
    server itself cost, apart from the load generator sharing its cores."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.spent: dict[str, float] = {}
        self._last = self._read()

    def _read(self) -> float:
        # Fields after the command name: utime and stime are the 14th and 15th of the line.
        after_name = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(after_name[11]) + int(after_name[12])) / os.sysconf("SC_CLK_TCK")

    def mark(self, phase: str) -> None:
        """Charge the CPU spent since the last mark to ``phase``."""
        now = self._read()
        self.spent[phase] = now - self._last
        self._last = now


async def post_all(
    session: aiohttp.ClientSession,
    url: str,
    bodies: list[tuple[str, dict[str, object]]],
    concurrency: int,
    finished: dict[str, float] | None = None,
) -> float:
    """POST every (path, body) with ``concurrency`` requests in flight; the seconds taken.
    With ``finished``, when each create was answered (``perf_counter``), by object name."""
    queue: asyncio.Queue[tuple[str, dict[str, object]]] = asyncio.Queue()
    for item in bodies:
        queue.put_nowait(item)

    async def worker() -> None:
        while not queue.empty():
            path, body = queue.get_nowait()
            async with session.post(
                url + path,
                data=msgspec.json.encode(body),
                headers={"Content-Type": "application/json"},
            ) as resp:
                if resp.status != 201:
                    raise RuntimeError(f"create failed {resp.status}: {await resp.text()}")
                await resp.read()
            if finished is not None:
                metadata = body["metadata"]
                assert isinstance(metadata, dict)
                finished[metadata["name"]] = time.perf_counter()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def timed_get(
    session: aiohttp.ClientSession, url: str, params: dict[str, str] | None = None
) -> tuple[float, bytes]:
    started = time.perf_counter()
    async with session.get(url, params=params) as resp:
        body = await resp.read()
        assert resp.status == 200, body[:200]
    return time.perf_counter() - started, body


def node(i: int) -> dict[str, object]:
    rack = i // 18
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"node-{i:04d}",
            "labels": {
                "kubernetes.io/hostname": f"node-{i:04d}",
                "nvidia.com/gpu.clique": f"0f3e9a5c-1b2d-4c6e-8f00-{rack:012d}.1",
                "topology.kubernetes.io/rack": f"rack-{rack}",
            },
        },
        "status": {
            "capacity": {"cpu": "144", "memory": "1Ti", "nvidia.com/gpu": "4"},
            "allocatable": {"cpu": "140", "memory": "990Gi", "nvidia.com/gpu": "4"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {"kubeletVersion": "v1.37.0"},
        },
    }


def pod(i: int, nodes: int) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"worker-{i:05d}",
            "labels": {
                "app": f"job-{i % 200}",
                "cdo.nvidia.com/domain": f"domain-{i % 50}",
                "index": str(i % 4),
            },
            "annotations": {"cdo.nvidia.com/placement": f"clique-{i % 111}"},
        },
        "spec": {
            "nodeName": f"node-{i % nodes:04d}",
            "containers": [
                {
                    "name": "trainer",
                    "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                    "command": ["torchrun", "--nnodes=16", "train.py"],
                    "env": [
                        {"name": "NCCL_DEBUG", "value": "WARN"},
                        {"name": "RANK", "value": str(i % 64)},
                    ],
                    "resources": {
                        "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"},
                        "limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"},
                    },
                }
            ],
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
        },
    }


async def populate(session: aiohttp.ClientSession, url: str, nodes: int, pods: int) -> Rows:
    """The namespaces, ``nodes`` Nodes, then ``pods`` Pods spread over them; the creation rates."""
    namespaces: list[tuple[str, dict[str, object]]] = [
        ("/api/v1/namespaces", {"metadata": {"name": f"team-{n}"}}) for n in range(NAMESPACES)
    ]
    await post_all(session, url, namespaces, 4)
    t_nodes = await post_all(session, url, [("/api/v1/nodes", node(i)) for i in range(nodes)], 32)
    pod_bodies = [(PODS.format(ns=f"team-{i % NAMESPACES}"), pod(i, nodes)) for i in range(pods)]
    t_pods = await post_all(session, url, pod_bodies, 32)
    return Rows(
        [
            ("create nodes", f"{nodes} in {t_nodes:.1f} s ({nodes / t_nodes:.0f}/s)"),
            ("create pods", f"{pods} in {t_pods:.1f} s ({pods / t_pods:.0f}/s)"),
        ],
        {"create_pods_per_s": pods / t_pods, "create_nodes_s": t_nodes, "create_pods_s": t_pods},
    )


def pod_path(i: int) -> str:
    """The path of pod ``i`` as ``populate`` creates it."""
    return f"{PODS.format(ns=f'team-{i % NAMESPACES}')}/worker-{i:05d}"


async def paced_patches(
    url: str,
    *,
    target: Callable[[int], str],
    count: int,
    rate: float,
    before: Callable[[int], None] | None = None,
    answered: Callable[[int, bytes], None] | None = None,
    credentials: str = "",
    concurrency: int = 16,
) -> float:
    """``count`` merge patches at ``rate`` per second, write ``i`` setting the annotation
    ``bench/seq=i`` on the object at path ``target(i)``; ``before(i)`` runs as it is sent,
    ``answered(i, body)`` sees its response.
    Returns the seconds the writes took."""
    interval = 1.0 / rate
    counter = iter(range(count))
    host, port = url.removeprefix("http://").split(":")
    started = time.perf_counter()

    async def writer() -> None:
        # A bare HTTP/1.1 keep-alive client: the load generator must cost far less CPU than
        # the server it measures (two cores here), which aiohttp's client does not.
        reader, stream = await asyncio.open_connection(host, int(port))
        try:
            for i in counter:
                due = started + i * interval
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                body = msgspec.json.encode({"metadata": {"annotations": {SEQ: str(i)}}})
                if before is not None:
                    before(i)
                stream.write(
                    f"PATCH {target(i)} HTTP/1.1\r\nHost: {host}\r\n"
                    f"Content-Type: application/merge-patch+json\r\n{credentials}"
                    f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                status = await reader.readline()
                length = 0
                while (line := await reader.readline()) != b"\r\n":
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                payload = await reader.readexactly(length)
                if not status.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError(f"patch failed: {status!r} {payload[:200]!r}")
                if answered is not None:
                    answered(i, payload)
        finally:
            stream.close()

    await asyncio.gather(*(writer() for _ in range(concurrency)))
    return time.perf_counter() - started


async def finish_watches(done: list[asyncio.Event], tasks: list[asyncio.Task[None]]) -> bool:
    """Wait (a minute at most) until every watch has had all its events, then close them all;
    whether every one did."""
    try:
        await asyncio.wait_for(asyncio.gather(*(event.wait() for event in done)), 60)
        complete = True
    except TimeoutError:
        complete = False
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return complete


async def watch_lines(resp: aiohttp.ClientResponse) -> AsyncIterator[tuple[float, list[bytes]]]:
    """The event lines of a watch response as they arrive, with the time they were read.

    Reads whole chunks and splits lines here: per-line reads would make the load generator,
    not the server, the bottleneck."""
    pending = b""
    async for chunk in resp.content.iter_any():
        now = time.perf_counter()
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        yield now, lines
