"""The small HTTP control API a running simulated cluster serves.

The running ``python -m sim up`` writes its URL into ``<state dir>/cluster.json``
(:mod:`sim.control.state`); ``cdo sim power`` and ``python -m sim power`` call it.

    GET  /nodes                        every node: name, clique, address, powered
    POST /nodes/<name>/power/<on|off>  power a node on or off
"""

from __future__ import annotations

from aiohttp import web

from sim.cluster import SimulatedCluster


def control_app(cluster: SimulatedCluster) -> web.Application:
    async def nodes(_request: web.Request) -> web.Response:
        return web.json_response(
            [
                {
                    "name": node.name,
                    "clique": node.clique,
                    "address": node.address,
                    "powered": cluster.powered(node.name),
                }
                for node in cluster.topology.nodes
            ]
        )

    async def power(request: web.Request) -> web.Response:
        name, state = request.match_info["name"], request.match_info["state"]
        if name not in {node.name for node in cluster.topology.nodes}:
            return web.json_response({"error": f"no node {name!r}"}, status=404)
        if state == "on":
            cluster.power_on(name)
        elif state == "off":
            cluster.power_off(name)
        else:
            return web.json_response({"error": "state must be on or off"}, status=400)
        return web.json_response({"name": name, "powered": cluster.powered(name)})

    app = web.Application()
    app.router.add_get("/nodes", nodes)
    app.router.add_post("/nodes/{name}/power/{state}", power)
    return app
