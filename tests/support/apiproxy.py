"""A recording HTTP proxy in front of the API emulator: which requests one client sent, when.

Tests that need to know what one process (of several with the same identity) sent to the API
server give it a kubeconfig that points here (:meth:`RecordingProxy.kubeconfig`). Every request is
forwarded unchanged, watches streamed as they come; each one is recorded with the time it was
forwarded (on the test's event loop clock) and the status the server answered.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import yaml
from aiohttp import web

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_HOP_BY_HOP = frozenset(
    {"connection", "content-length", "host", "keep-alive", "transfer-encoding", "upgrade"}
)


@dataclass(frozen=True)
class Sent:
    """One request as the proxy forwarded it."""

    at: float
    method: str
    path: str
    status: int = 0

    @property
    def write(self) -> bool:
        return self.method in WRITES

    @property
    def applied(self) -> bool:
        """A write the server answered with success."""
        return self.write and 200 <= self.status < 300


@dataclass
class RecordingProxy:
    upstream: str
    url: str = ""
    sent: list[Sent] = field(default_factory=list)
    _session: aiohttp.ClientSession | None = None

    def writes_since(self, moment: float) -> list[Sent]:
        return [request for request in self.sent if request.write and request.at >= moment]

    def kubeconfig(self, original: Path, path: Path) -> Path:
        """A copy of ``original`` whose clusters point at this proxy."""
        config = yaml.safe_load(original.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = self.url
        path.write_text(yaml.safe_dump(config))
        return path

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        at = loop.time()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        body = await request.read()
        assert self._session is not None
        try:
            upstream = await self._session.request(
                request.method,
                self.upstream + request.path_qs,
                headers=headers,
                data=body or None,
                allow_redirects=False,
            )
        except aiohttp.ClientError:
            self.sent.append(Sent(at=at, method=request.method, path=request.path))
            raise
        self.sent.append(
            Sent(at=at, method=request.method, path=request.path, status=upstream.status)
        )
        response = web.StreamResponse(
            status=upstream.status,
            headers={k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_BY_HOP},
        )
        await response.prepare(request)
        try:
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
        except (aiohttp.ClientError, ConnectionResetError):
            pass  # either side went away: the stream ends here
        finally:
            upstream.release()
        return response


@contextlib.asynccontextmanager
async def recording_proxy(upstream: str) -> AsyncIterator[RecordingProxy]:
    """A proxy to ``upstream`` (an http:// API server URL) on a free local port."""
    proxy = RecordingProxy(upstream=upstream.rstrip("/"))
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", proxy._forward)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    proxy.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    timeout = aiohttp.ClientTimeout(total=None)
    async with aiohttp.ClientSession(timeout=timeout, auto_decompress=False) as session:
        proxy._session = session
        try:
            yield proxy
        finally:
            await runner.cleanup()
