"""The small HTTP control API a running simulated cluster serves.

The running ``python -m sim up`` writes its URL into ``<state dir>/cluster.json``
(:mod:`sim.control.state`); ``cdo sim power`` and ``python -m sim power`` call it.

    GET  /nodes                        every node: name, clique, address, powered, hollow
    POST /nodes/<name>/power/<on|off>  power a node on or off (409 for a hollow node)
    POST /api/restart                  kill the API server and start it again on its port, from
                                       its data directory (``cdo sim restart api``)
"""

from __future__ import annotations

from aiohttp import web

from sim.cluster import HollowNodeError, SimulatedCluster
from sim.kubeapi.hosting.child_process import ApiProcess


def control_app(cluster: SimulatedCluster) -> web.Application:
    async def nodes(_request: web.Request) -> web.Response:
        return web.json_response(
            [
                {
                    "name": node.name,
                    "clique": node.clique,
                    "address": node.address,
                    "powered": cluster.powered(node.name),
                    "hollow": cluster.is_hollow(node.name),
                }
                for node in cluster.topology.nodes
            ]
        )

    async def power(request: web.Request) -> web.Response:
        name, state = request.match_info["name"], request.match_info["state"]
        if name not in {node.name for node in cluster.topology.nodes}:
            return web.json_response({"error": f"no node {name!r}"}, status=404)
        try:
            if state == "on":
                cluster.power_on(name)
            elif state == "off":
                cluster.power_off(name)
            else:
                return web.json_response({"error": "state must be on or off"}, status=400)
        except HollowNodeError as exc:
            return web.json_response({"error": str(exc)}, status=409)
        return web.json_response({"name": name, "powered": cluster.powered(name)})

    async def restart_api(_request: web.Request) -> web.Response:
        api = cluster.api
        if not isinstance(api, ApiProcess) or not api.config.data_dir:
            return web.json_response(
                {"error": "the API server runs inside the cluster's process (--api-in-process) "
                 "and keeps nothing on disk: it cannot be restarted alone"},
                status=409,
            )  # fmt: skip
        try:
            await api.restart()
        except (RuntimeError, OSError, TimeoutError) as exc:
            return web.json_response(
                {"error": f"the API server did not restart: {exc}"}, status=500
            )
        return web.json_response({"url": api.url, "pid": api.pid, "restarts": api.restarts})

    app = web.Application()
    app.router.add_post("/api/restart", restart_api)
    app.router.add_get("/nodes", nodes)
    app.router.add_post("/nodes/{name}/power/{state}", power)
    return app
