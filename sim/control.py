"""A small HTTP control API of a running simulated cluster, and the client the CLI uses.

The running ``python -m sim up`` writes ``<state dir>/cluster.json`` (kubeconfig path, API URL,
control URL, pid); other commands read it to find the cluster.

    GET  /nodes                        every node: name, clique, address, powered
    POST /nodes/<name>/power/<on|off>  power a node on or off
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import msgspec
from aiohttp import web

from sim.cluster import SimulatedCluster

STATE_FILE = "cluster.json"


class ClusterInfo(msgspec.Struct, frozen=True, kw_only=True):
    kubeconfig: str
    api_url: str
    control_url: str
    pid: int


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


def read_info(state_dir: Path) -> ClusterInfo:
    path = state_dir / STATE_FILE
    try:
        return msgspec.json.decode(path.read_bytes(), type=ClusterInfo)
    except FileNotFoundError:
        raise SystemExit(
            f"no simulated cluster found in {state_dir} (start one: python -m sim up)"
        ) from None


def call(info: ClusterInfo, method: str, path: str) -> Any:
    request = urllib.request.Request(info.control_url + path, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        raise SystemExit(json.loads(error.read()).get("error", str(error))) from None
    except urllib.error.URLError as error:
        raise SystemExit(
            f"the simulated cluster at {info.control_url} does not answer: {error}"
        ) from None
