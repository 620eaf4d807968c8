"""The node host's control API reports each hosted node's IMEX daemons (``GET /imex``), read only:
the daemon instances it started and its agent's own restart count. ``cdo sim``'s client
(:func:`sim.control.imex_counts`) reads them through the state directory, and
:func:`sim.control.imex_restarts` turns two readings into restarts per node: a power
cycle is one on that node and none on any other."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from sim import control as simctl
from sim.nodehost.control import NodeHostInfo, write_info
from tests.integration.nodehost.conftest import Hosted
from tests.support.wait import wait_for


async def imex_entries(hosted: Hosted) -> dict[str, dict[str, Any]]:
    status, entries = await hosted.control("GET", "/imex")
    assert status == 200, entries
    assert isinstance(entries, list)
    return {entry["name"]: entry for entry in entries}


async def test_the_control_api_counts_each_nodes_imex_daemons(hosted: Hosted) -> None:
    await hosted.settled()
    entries = await imex_entries(hosted)
    assert set(entries) == set(hosted.names)
    for name, entry in entries.items():
        node = hosted.host[name]
        assert entry["daemons_started"] == 1, entry
        assert entry["instance"] == node.imex.started[-1] != ""
        assert entry["daemons_running"] == 1
        assert entry["agent_restarts"] == 0
        assert isinstance(entry["agent_reloads"], int)

    name = hosted.names[0]
    status, one = await hosted.control("GET", f"/nodes/{name}/imex")
    assert status == 200 and one == entries[name]
    status, answer = await hosted.control("GET", "/nodes/no-such-node/imex")
    assert status == 404 and isinstance(answer, dict) and "no-such-node" in answer["error"]
    # Read only: nothing but GET is routed there.
    async with hosted.http.post(f"{hosted.control_url}/imex", json={}) as response:
        assert response.status == 405


async def test_a_power_cycle_is_a_restart_of_that_node_only(hosted: Hosted, tmp_path: Path) -> None:
    await hosted.settled()
    write_info(
        tmp_path,
        NodeHostInfo(control_url=hosted.control_url, pid=os.getpid(), nodes=tuple(hosted.names)),
    )
    before = await asyncio.to_thread(simctl.imex_counts, tmp_path)
    assert {count.daemons_started for count in before.values()} == {1}
    assert simctl.imex_restarts(before, before) == dict.fromkeys(hosted.names, 0)

    victim = hosted.names[0]
    first = hosted.host[victim].imex.started[-1]
    hosted.cluster.power_off(victim)
    await wait_for(lambda: hosted.host[victim].state == "off", what="the node off")
    hosted.cluster.power_on(victim)
    await wait_for(
        lambda: hosted.host[victim].ready and hosted.host[victim].imex.running == 1,
        timeout=30,
        what="the node's services and a daemon back",
    )
    await hosted.settled()

    after = await asyncio.to_thread(simctl.imex_counts, tmp_path)
    assert after[victim].daemons_started == 2
    entries = await imex_entries(hosted)
    assert entries[victim]["instance"] != first
    # A fresh agent counts from 0: the new instance is what tells the restart.
    assert after[victim].agent_restarts == 0
    assert simctl.imex_restarts(before, after) == {
        name: 1 if name == victim else 0 for name in hosted.names
    }
