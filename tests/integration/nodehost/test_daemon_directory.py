"""The node host's shortcut for ``nvidia-imex-ctl`` queries between its own IMEX daemons."""

from __future__ import annotations

from pathlib import Path

from sim.imex import (
    DomainState,
    DomainView,
    Endpoint,
    Resolver,
    Timing,
    query_domain,
    query_status,
)
from sim.imex.config import load_config
from sim.nodehost.imex import DaemonDirectory, NodeImex
from tests.integration.imex.cluster import loopback_subnet
from tests.integration.imex.test_inprocess import write_domain
from tests.support.wait import wait_for

TIMING = Timing(heartbeat_interval=0.2, heartbeat_timeout=1.0)


def _rows(view: DomainView) -> list[tuple[object, ...]]:
    """What a view says about each node, without the moment it was taken."""
    return [
        (node.index, node.host, node.status, tuple((c.host, c.status) for c in node.connections))
        for node in view.nodes
    ]


async def test_a_hosted_daemon_answers_directly_what_it_answers_over_tcp(tmp_path: Path) -> None:
    addresses = [f"{loopback_subnet()}.{i}" for i in (1, 2, 3)]
    configs = write_domain(tmp_path / "imex", addresses)
    hosts = tmp_path / "hosts"
    hosts.write_text("")
    directory = DaemonDirectory()
    imex = NodeImex(hosts_file=hosts, timing=TIMING, directory=directory)
    processes = []
    for index, config in enumerate(configs):
        assert config.source is not None
        processes.append(await imex.start(Path(config.source), output=tmp_path / f"out{index}"))
    resolver = Resolver(hosts)
    first = load_config(Path(str(configs[0].source)))
    try:

        async def up_both_ways() -> bool:
            direct = await query_domain(first, resolver=resolver, ask_status=directory.ask_status)
            over_tcp = await query_domain(first, resolver=resolver)
            return (
                direct.status is DomainState.UP
                and over_tcp.status is DomainState.UP
                and _rows(direct) == _rows(over_tcp)
            )

        await wait_for(up_both_ways, timeout=15, what="the same UP view directly and over TCP")

        here = Endpoint(host=addresses[0], port=first.cmd_port)
        assert directory.serving(here) is not None
        assert await directory.ask_status(here, 2) == await query_status(here)

        # A daemon that stopped has left the directory: it is asked over TCP, and is not there.
        await processes[2].stop(timeout_s=5)
        assert directory.serving(Endpoint(host=addresses[2], port=first.cmd_port)) is None
        direct = await query_domain(first, resolver=resolver, ask_status=directory.ask_status)
        over_tcp = await query_domain(first, resolver=resolver)
        assert _rows(direct)[2] == _rows(over_tcp)[2]
        assert direct.nodes[2].status.value == "UNAVAILABLE"
    finally:
        for process in processes[:2]:
            await process.stop(timeout_s=5)
