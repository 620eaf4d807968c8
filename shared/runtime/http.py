"""The side HTTP server every service runs: /healthz, /readyz and /metrics (the last behind
:class:`~shared.runtime.metricsaccess.MetricsAccess` when given one)."""

from __future__ import annotations

import msgspec
from aiohttp import web

from shared.metrics import Metrics
from shared.runtime.metricsaccess import MetricsAccess
from shared.runtime.probes import Readiness

_CONTENT_TYPE_PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8"


class ProbeServer:
    """Serves liveness, readiness and metrics on ``host:port`` (port 0 picks a free one)."""

    def __init__(
        self,
        *,
        readiness: Readiness,
        metrics: Metrics,
        host: str,
        port: int,
        access: MetricsAccess | None = None,
    ) -> None:
        self._readiness = readiness
        self._metrics = metrics
        self._access = access
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None
        self.bound_port: int | None = None

    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics_handler)
        return app

    async def _healthz(self, _request: web.Request) -> web.Response:
        # Answering at all proves the event loop is alive, which is what liveness asks.
        return web.Response(text="ok\n")

    async def _readyz(self, _request: web.Request) -> web.Response:
        failing = self._readiness.failing()
        degraded = self._readiness.degraded()
        body = msgspec.json.encode({"ready": not failing, "failing": failing, "degraded": degraded})
        return web.Response(
            body=body, status=503 if failing else 200, content_type="application/json"
        )

    async def _metrics_handler(self, request: web.Request) -> web.Response:
        if self._access is not None:
            verdict = await self._access.check(request.headers.get("Authorization"))
            if verdict.status != 200:
                headers = {"WWW-Authenticate": 'Bearer realm="metrics"'}
                return web.Response(
                    status=verdict.status,
                    text=verdict.message + "\n",
                    headers=headers if verdict.status == 401 else None,
                )
        return web.Response(
            body=self._metrics.exposition(), headers={"Content-Type": _CONTENT_TYPE_PROMETHEUS}
        )

    async def start(self) -> None:
        self._runner = web.AppRunner(self._app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.bound_port = sockets[0].getsockname()[1] if sockets else self._port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
