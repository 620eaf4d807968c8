"""The node host's control API: hosted nodes, NVML fault injection, IMEX daemon counts, metrics.

``python -m sim.nodehost`` serves it on 127.0.0.1 and writes ``<state dir>/nodehost.json``
(control URL, pid, hosted nodes) so that ``cdo sim fault`` can find it.

    GET    /nodes                          every hosted node: power, services, readiness
    GET    /nodes/<name>                   one of them
    POST   /nodes/<name>/faults            inject a fault: {"kind": "xid", "gpu": 1, "xid": 79}
    DELETE /nodes/<name>/faults            every GPU of the node healthy again (a GPU reset;
                                           the node's device plugin is restarted)
    GET    /nodes/<name>/metrics/<service> Prometheus text of imex-agent or health-monitor
    GET    /nodes/<name>/informers         objects each service's informers hold, per resource
    GET    /imex                           every hosted node's IMEX daemons: starts, instance
    GET    /nodes/<name>/imex              one of them
    PUT    /nodes/<name>/clock             the node's wall clock ahead or behind: {"offset_s": 30}

The IMEX counts (:class:`ImexDaemons`, read only) are what a restart test counts: every daemon
instance the node started since the node host began (an in-process daemon has no pid; a new
instance id is a new daemon), and the restarts its current IMEX agent counted itself (a restart
is a start after the first). A daemon is started again only after a power cycle, or when its own
``config.cfg`` or node map changed (docs/imex-agent.md).

Fault bodies (:mod:`sim.nodehost.faults`): ``xid`` (gpu, xid), ``gpu_lost`` (gpu, lost),
``nvlink`` (gpu, link, up), ``fabric`` (gpu or null, state, problems), ``clear``; and the
node's machine (:mod:`sim.nodehost.hoststate`): ``host_imex`` (running), ``cdi`` (enabled),
``imex_programs`` (installed), which ``clear`` leaves as they are. Errors answer
``{"error": "..."}`` with 400 (bad request, no such GPU or link) or 404 (no such node).
"""

from __future__ import annotations

import logging
from pathlib import Path

import msgspec
from aiohttp import web

from sim.nodehost.faults import ClearFaults, Fault, inject
from sim.nodehost.host import AGENT, MONITOR, SERVICES, HostedNode, NodeHost
from sim.nodehost.hoststate import HostFault, HostImexService, ImexPrograms, RuntimeCdi
from sim.nodehost.informers import census

log = logging.getLogger("cdo.sim.nodehost")

STATE_FILE = "nodehost.json"

_encoder = msgspec.json.Encoder()
_FAULTS = msgspec.json.Decoder(Fault | HostFault)


class ImexDaemons(msgspec.Struct, frozen=True, kw_only=True):
    """One hosted node's IMEX daemons, as ``GET /imex`` reports them."""

    name: str
    daemons_started: int
    """Daemon instances the node started since the node host began (the first one included)."""
    instance: str
    """The latest instance's id ("" before the first start)."""
    daemons_running: int
    agent_restarts: int | None
    """The restarts the node's current IMEX agent counted (None: no agent runs); an agent that
    starts afresh (power cycle, a failed session) counts from 0 again."""
    agent_reloads: int | None
    """SIGUSR1s the current agent sent (hosts mapping changes), None without an agent."""


def imex_daemons(node: HostedNode) -> ImexDaemons:
    """What ``node``'s IMEX handle and agent have counted, read as they are now."""
    started = node.imex.started
    controller = node.agent.controller if node.agent is not None else None
    return ImexDaemons(
        name=node.name,
        daemons_started=len(started),
        instance=started[-1] if started else "",
        daemons_running=node.imex.running,
        agent_restarts=controller.restarts if controller is not None else None,
        agent_reloads=controller.reloads if controller is not None else None,
    )


class NodeHostInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What ``<state dir>/nodehost.json`` holds."""

    control_url: str
    pid: int
    nodes: tuple[str, ...]


def write_info(state_dir: Path, info: NodeHostInfo) -> Path:
    path = state_dir / STATE_FILE
    temporary = path.with_suffix(".tmp")
    temporary.write_bytes(_encoder.encode(info))
    temporary.replace(path)
    return path


def _json(value: object, *, status: int = 200) -> web.Response:
    return web.Response(body=_encoder.encode(value), status=status, content_type="application/json")


def _error(message: str, *, status: int) -> web.Response:
    return _json({"error": message}, status=status)


class ClockOffset(msgspec.Struct, frozen=True, kw_only=True):
    """``PUT /nodes/<name>/clock``: the node's wall clock this far ahead (behind: negative)."""

    offset_s: float


def control_app(host: NodeHost) -> web.Application:
    def node_of(request: web.Request) -> HostedNode:
        name = request.match_info["name"]
        if name not in host:
            raise web.HTTPNotFound(
                text=_encoder.encode({"error": f"no hosted node {name!r}"}).decode(),
                content_type="application/json",
            )
        return host[name]

    async def nodes(_request: web.Request) -> web.Response:
        return _json([node.status() for node in host])

    async def node(request: web.Request) -> web.Response:
        return _json(node_of(request).status())

    async def imex(_request: web.Request) -> web.Response:
        return _json([imex_daemons(node) for node in host])

    async def node_imex(request: web.Request) -> web.Response:
        return _json(imex_daemons(node_of(request)))

    def apply(target: HostedNode, fault: Fault) -> web.Response:
        try:
            applied = inject(target.nvml, fault)
        except (IndexError, ValueError) as exc:
            return _error(f"{target.name}: {exc}", status=400)
        log.info("fault injected", extra={"node": target.name, "fault": applied})
        return _json({"node": target.name, "applied": applied})

    async def add_fault(request: web.Request) -> web.Response:
        target = node_of(request)
        try:
            fault = _FAULTS.decode(await request.read())
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return _error(f"bad fault: {exc}", status=400)
        if isinstance(fault, HostImexService | RuntimeCdi | ImexPrograms):
            applied = await target.host.apply(fault)
            log.info("host state set", extra={"node": target.name, "state": applied})
            return _json({"node": target.name, "applied": applied})
        return apply(target, fault)

    async def clear_faults(request: web.Request) -> web.Response:
        target = node_of(request)
        answer = apply(target, ClearFaults())
        target.gpus.gpu_reset()  # the device plugin lists the reset GPUs healthy again
        return answer

    async def metrics(request: web.Request) -> web.Response:
        target = node_of(request)
        service = request.match_info["service"]
        if service not in SERVICES:
            return _error(f"service must be one of {', '.join(SERVICES)}", status=404)
        registry = target.metrics.get(service)
        if registry is None or target.state != "running":
            return _error(f"{target.name}: {service} is not running", status=404)
        return web.Response(body=registry.exposition(), content_type="text/plain")

    async def informers(request: web.Request) -> web.Response:
        target = node_of(request)
        services = {AGENT: target.agent, MONITOR: target.monitor}
        if target.state != "running" or None in services.values():
            return _error(f"{target.name}: its services are not running", status=404)
        return _json({service: census(obj) for service, obj in services.items()})

    async def set_clock(request: web.Request) -> web.Response:
        target = node_of(request)
        try:
            body = msgspec.json.decode(await request.read(), type=ClockOffset)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return _error(f'bad clock: {exc} (send {{"offset_s": SECONDS}})', status=400)
        target.clock_offset_s = body.offset_s
        log.info("clock set", extra={"node": target.name, "offset_s": body.offset_s})
        return _json(target.status())

    app = web.Application()
    app.router.add_put("/nodes/{name}/clock", set_clock)
    app.router.add_get("/nodes", nodes)
    app.router.add_get("/nodes/{name}", node)
    app.router.add_post("/nodes/{name}/faults", add_fault)
    app.router.add_delete("/nodes/{name}/faults", clear_faults)
    app.router.add_get("/nodes/{name}/metrics/{service}", metrics)
    app.router.add_get("/nodes/{name}/informers", informers)
    app.router.add_get("/nodes/{name}/imex", node_imex)
    app.router.add_get("/imex", imex)
    return app


class ControlServer:
    """The control API on ``host:port`` (0: any free port)."""

    def __init__(self, node_host: NodeHost, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._runner = web.AppRunner(control_app(node_host), access_log=None)
        self._host = host
        self._port = port
        self.url = ""

    async def start(self) -> str:
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        server = site._server
        assert server is not None
        port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self.url = f"http://{self._host}:{port}"
        return self.url

    async def stop(self) -> None:
        await self._runner.cleanup()
