"""``cdo ui``'s web server (aiohttp): the page, its static files, and its data.

- ``/``: the page (``static/index.html``: plain HTML, CSS and JavaScript, nothing to build),
  ``/static/...`` its script and style sheet;
- ``/api/stream``: Server-Sent Events: ``snapshot`` (the whole state), then ``racks``,
  ``legend``, ``status``, ``feed`` and ``changed`` (domains whose view changed);
- ``/api/state``: the whole state once, as JSON;
- ``/api/domains/{namespace}/{name}``: one domain's view (:mod:`cli.ui.domain`), 404 when the
  cluster has no such domain;
- ``/healthz`` (alive), ``/readyz`` (ready once the caches are synced).

Nothing is written to the cluster: the server reads with the kubeconfig's (or the pod's)
credentials and shows it to whoever reaches its port, so it listens on the loopback address
unless told otherwise (docs/ui.md).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import msgspec
from aiohttp import web

from cli.connection import Endpoints
from cli.ui.cluster import Cluster
from cli.ui.domain import domain_view, read_namespace
from cli.ui.feed import FeedEntry, LiveFeed, SourceStatus
from cli.ui.health import FeedFaults
from cli.ui.hub import Hub, Status
from cli.ui.view import Page, page
from shared.kube.errors import KubeApiError

STATIC = Path(str(resources.files("cli.ui") / "static"))
HEARTBEAT_S = 15.0
NO_FEED = SourceStatus(up=False, message="the live feed is off (cdo ui --no-feed)")
_encode = msgspec.json.Encoder().encode


class Ui:
    """The cluster's caches, the live feed and the hub of one server."""

    def __init__(self, endpoints: Endpoints, *, feed: bool = True) -> None:
        self.endpoints = endpoints
        self.hub = Hub(self._page, self._status, self._recent)
        self.cluster = Cluster(endpoints, self.hub.mark)
        self.feed = LiveFeed(endpoints, self.hub.on_feed) if feed else None

    def _page(self, faults: FeedFaults) -> Page:
        cluster = self.cluster
        if cluster.nodes is None or cluster.domains is None or cluster.placements is None:
            return Page()
        return page(
            cluster.nodes.cache.objects(),
            cluster.domains.cache.objects(),
            cluster.placements.cache.objects(),
            faults,
        )

    def _status(self) -> Status:
        return Status(
            api=self.cluster.status,
            feed=self.feed.status if self.feed is not None else NO_FEED,
            note=self.cluster.note,
            synced=self.cluster.synced,
        )

    def _recent(self) -> list[FeedEntry]:
        return list(self.feed.recent) if self.feed is not None else []

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self.cluster.run(), name="ui cluster")
            tasks.create_task(self.hub.run(), name="ui hub")
            if self.feed is not None:
                tasks.create_task(self.feed.run(), name="ui feed")


def _json(body: bytes, status: int = 200) -> web.Response:
    return web.Response(body=body, status=status, content_type="application/json")


def _error(message: str, status: int) -> web.Response:
    return _json(_encode({"error": message}), status)


def app(ui: Ui) -> web.Application:
    """The routes of the module docstring, over ``ui``."""
    routes = web.RouteTableDef()

    @routes.get("/")
    async def index(_request: web.Request) -> web.FileResponse:
        return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    @routes.get("/healthz")
    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    @routes.get("/readyz")
    async def readyz(_request: web.Request) -> web.Response:
        ready = ui.cluster.synced
        return web.Response(
            text="ok" if ready else "caches not synced", status=200 if ready else 503
        )

    @routes.get("/api/state")
    async def state(_request: web.Request) -> web.Response:
        return _json(ui.hub.snapshot())

    @routes.get("/api/stream")
    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        queue = ui.hub.subscribe()
        try:
            while True:
                try:
                    message = await asyncio.wait_for(queue.get(), HEARTBEAT_S)
                except TimeoutError:
                    message = b": keep-alive\n\n"
                if message is None:  # too slow: dropped by the hub
                    break
                await response.write(message)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            ui.hub.unsubscribe(queue)
        return response

    @routes.get("/api/domains/{namespace}/{name}")
    async def domain(request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        cluster = ui.cluster
        if cluster.client is None or cluster.domains is None or not cluster.synced:
            return _error(f"the Kubernetes API cannot be read: {cluster.status.message}", 503)
        found = cluster.domains.cache.get(f"{namespace}/{name}")
        if found is None:
            return _error(f"ComputeDomain {namespace}/{name} not found", 404)
        try:
            pods, events = await read_namespace(cluster.client, namespace)
        except KubeApiError as exc:
            return _error(f"reading namespace {namespace} failed: {exc}", 503)
        assert cluster.placements is not None and cluster.nodes is not None
        view = domain_view(
            found,
            placement=cluster.placements.cache.get(f"{namespace}/{name}"),
            pods=pods,
            nodes=cluster.nodes.cache.objects(),
            placements=cluster.placements.cache.objects(),
            events=events,
            feed=ui.feed.recent if ui.feed is not None else (),
        )
        return _json(_encode(view))

    application = web.Application()
    application.add_routes(routes)
    application.router.add_static("/static", STATIC)
    return application


async def serve(
    ui: Ui, *, host: str, port: int, on_listening: Callable[[str], None] | None = None
) -> None:
    """Serve until cancelled; ``on_listening`` gets the page's URL once it listens."""
    runner = web.AppRunner(app(ui), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0]
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        url = f"http://{shown}:{bound[1]}/"
        if on_listening is not None:
            on_listening(url)
        await ui.run()
    finally:
        with contextlib.suppress(Exception):
            await runner.cleanup()
