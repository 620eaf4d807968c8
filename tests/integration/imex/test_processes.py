"""Simulated nvidia-imex daemons as real processes, checked with the simulated nvidia-imex-ctl."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from sim.imex.protocol import NodeStatus
from tests.integration.imex.cluster import Node, ProcessCluster, cells, run_ctl
from tests.support.wait import wait_for_sync

MakeCluster = Callable[[int], ProcessCluster]


def wait_domain(
    cluster: ProcessCluster, row: int, status: str, *, timeout: float = 10.0
) -> dict[str, Any]:
    """Poll ``-N -j`` on node ``row`` until the domain reports ``status``."""

    def probe() -> dict[str, Any] | None:
        document = cluster.domain(cluster.nodes[row])
        return document if document["status"] == status else None

    return wait_for_sync(probe, timeout=timeout, interval=0.05, what=f"Domain State {status}")


def ready(cluster: ProcessCluster, node: Node) -> subprocess.CompletedProcess[str] | None:
    """The ``-q`` run that printed READY, or None."""
    query = cluster.ctl(node, "-q")
    return query if query.stdout == "READY\n" else None


def running(cluster: ProcessCluster) -> ProcessCluster:
    cluster.start()
    wait_domain(cluster, 0, "UP")
    return cluster


def test_three_daemons_reach_ready_and_domain_up(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(3)
    cluster.start()

    for node in cluster.nodes:
        query = wait_for_sync(functools.partial(ready, cluster, node), what="-q READY")
        assert query.returncode == 0

    document = wait_domain(cluster, 0, "UP")
    assert [document["nodes"][str(i)]["status"] for i in range(3)] == ["READY"] * 3
    assert [document["nodes"][str(i)]["host"] for i in range(3)] == [
        node.address for node in cluster.nodes
    ]
    for row in range(3):
        assert cells(document, row) == ["CONNECTED"] * 3

    text = cluster.ctl(cluster.nodes[2], "-N")
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert f"Node #1   - {cluster.nodes[1].address:<15} - READY" in lines
    assert " Nodes From\\To  0  1  2" in lines
    assert "       2        C  C  C" in lines
    assert lines[-1] == "Domain State: UP"


def test_a_killed_daemon_degrades_the_domain_for_the_others(make_cluster: MakeCluster) -> None:
    cluster = running(make_cluster(3))
    victim = cluster.nodes[2]

    victim.signal(signal.SIGKILL)
    killed_at = time.monotonic()

    for row in (0, 1):
        document = wait_domain(cluster, row, "DEGRADED", timeout=5.0)
        assert document["nodes"]["2"]["status"] == "UNAVAILABLE"
        assert cells(document, 2) == ["INVALID"] * 3
        # The survivors noticed the closed sockets and keep the lost peer in recovery.
        assert cells(document, 0) == ["CONNECTED", "CONNECTED", "RECOVERING"]
        assert cells(document, 1) == ["CONNECTED", "CONNECTED", "RECOVERING"]
    assert time.monotonic() - killed_at < 5.0
    assert "lost connection to node #2" in cluster.nodes[0].log_text()

    cluster.start(victim)
    wait_domain(cluster, 0, "UP")
    assert "is a new instance (restarted)" in cluster.nodes[0].log_text()


def test_a_hung_daemon_is_noticed_by_its_missed_heartbeats(make_cluster: MakeCluster) -> None:
    cluster = running(make_cluster(3))
    frozen = cluster.nodes[1]

    frozen.signal(signal.SIGSTOP)
    try:
        # A stopped process keeps its sockets open: only the heartbeats can tell. Polled on
        # the command port, as each -N waits for the frozen node's answer to time out.
        wait_for_sync(
            lambda: (
                (status := cluster.status(cluster.nodes[0])) is not None
                and status.connections[1].status.value == "RECOVERING"
            ),
            timeout=5.0,
            what="missed heartbeats",
        )
        document = cluster.domain(cluster.nodes[0])
        assert document["status"] == "DEGRADED"
        assert cells(document, 0)[1] == "RECOVERING"
        assert document["nodes"]["1"]["status"] == "UNAVAILABLE"
    finally:
        frozen.signal(signal.SIGCONT)
    wait_domain(cluster, 0, "UP")


def test_a_daemon_with_another_node_map_is_refused(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(3)
    odd = cluster.nodes[2]
    other_map = cluster.root / "other_nodes_config.cfg"
    cluster.write_nodes_file(
        other_map, [*(node.address for node in cluster.nodes), cluster.address(9)]
    )
    cluster.write_config(odd, nodes_file=other_map)
    cluster.start()

    wait_domain(cluster, 0, "DEGRADED")

    def refused_by_both() -> dict[str, Any] | None:
        document = cluster.domain(cluster.nodes[0])
        links = [cells(document, row)[2] for row in (0, 1)]
        return document if links == ["NEVER_CONNECTED"] * 2 else None

    document = wait_for_sync(refused_by_both, what="refused links")
    assert document["nodes"]["2"]["status"] == "READY"  # refused, but running
    for row in (0, 1):
        cell = document["nodes"][str(row)]["connections"]["2"]
        assert cell["status"] == "NEVER_CONNECTED"
        assert cell["refused"] == "NODE_MAP_MISMATCH"
    odd_row = document["nodes"]["2"]["connections"]
    assert odd_row["0"]["refused"] == "NODE_MAP_MISMATCH"
    # The links show the mismatch once either side refused; each daemon logs its own refusal
    # when the other's hello reaches it, which may come later: wait for the lines.
    first = cluster.nodes[0]
    wait_for_sync(lambda: f"refusing {odd.address}" in first.log_text(), what="node 0's log")
    assert "node map differs" in first.log_text()
    wait_for_sync(lambda: "refused this node" in odd.log_text(), what="the odd node's log")


SENTINEL = "127.255.255.254"


def test_a_static_map_of_names_follows_the_hosts_file_without_restarts(
    make_cluster: MakeCluster,
) -> None:
    """Four slots by name, two held at first: an empty slot (at the sentinel) is a peer that
    is down, a name that starts resolving is picked up without a signal, a slot re-pointed at a
    replacement is reached without restarting anyone, and SIGUSR1 never re-reads the map."""
    cluster = make_cluster(4)
    first, second, third, replacement = cluster.nodes
    names = [f"slot-{index}" for index in range(4)]
    cluster.write_nodes_file(cluster.nodes_file, names)
    hosts = cluster.root / "hosts"
    cluster.hosts_file = hosts

    def point(slots: list[str]) -> None:
        hosts.write_text(
            "".join(f"{address} {name}\n" for name, address in zip(names, slots, strict=True))
        )

    point([first.address, second.address, SENTINEL, SENTINEL])
    cluster.start(first, second)
    wait_for_sync(
        lambda: cells(cluster.domain(first), 0)[:2] == ["CONNECTED"] * 2, what="connected"
    )
    document = cluster.domain(first)
    assert document["status"] == "DEGRADED", "IMEX itself counts empty slots as down nodes"
    assert [document["nodes"][str(i)]["status"] for i in (2, 3)] == ["UNAVAILABLE"] * 2
    assert cells(document, 0)[2:] == ["NEVER_CONNECTED"] * 2
    pids = [first.pid, second.pid]

    # A node joins slot 2: only the hosts file changes, no signal.
    point([first.address, second.address, third.address, SENTINEL])
    cluster.start(third)

    def joined() -> bool:
        document = cluster.domain(first)
        return all(cells(document, row)[:3] == ["CONNECTED"] * 3 for row in range(3))

    wait_for_sync(joined, timeout=15, what="slot 2 picked up by the reconnect loops")
    pids.append(third.pid)

    # Slot 1's node dies and comes back elsewhere: its name is re-pointed, nobody restarts.
    second.signal(signal.SIGKILL)
    assert second.process is not None
    second.process.wait(timeout=10)
    point([first.address, replacement.address, third.address, SENTINEL])
    cluster.start(replacement)

    def replaced() -> bool:
        document = cluster.domain(first)
        rows = [document["nodes"][str(row)] for row in range(3)]
        return rows[1]["host"] == replacement.address and all(
            cells(document, row)[:3] == ["CONNECTED"] * 3 for row in range(3)
        )

    wait_for_sync(replaced, timeout=15, what="slot 1 reached at its new address")
    assert [first.pid, third.pid] == [pids[0], pids[2]]
    assert first.process is not None and first.process.poll() is None

    # SIGUSR1 restarts connections; a map changed on disk is reported, not applied.
    cluster.write_nodes_file(cluster.nodes_file, names[:3])
    first.signal(signal.SIGUSR1)
    wait_for_sync(lambda: "changed on disk" in first.log_text(), what="map change reported")
    status = cluster.status(first)
    assert status is not None
    assert len(status.connections) == 4, "still the map it started with"
    wait_for_sync(joined, timeout=15, what="connected again after SIGUSR1")
    assert first.pid == pids[0]

    # A second SIGUSR1 within 5 s is ignored, as the real daemon documents.
    first.signal(signal.SIGUSR1)
    wait_for_sync(lambda: "SIGUSR1 ignored" in first.log_text(), what="ignored SIGUSR1")


def test_sighup_dumps_the_verbose_log_and_reloads_nothing(make_cluster: MakeCluster) -> None:
    cluster = running(make_cluster(2))
    node = cluster.nodes[0]
    before = cluster.status(node)
    assert before is not None

    cluster.write_nodes_file(
        cluster.nodes_file, [n.address for n in cluster.nodes] + [cluster.address(7)]
    )
    node.signal(signal.SIGHUP)

    wait_for_sync(lambda: "verbose buffer dump" in node.log_text(), what="verbose dump")
    after: NodeStatus | None = cluster.status(node)
    assert after is not None
    assert after.node_map_digest == before.node_map_digest
    assert len(after.connections) == 2
    assert after.pid == before.pid
    assert after.state.value == "READY"


def test_sigterm_shuts_down_cleanly_and_peers_see_it(make_cluster: MakeCluster) -> None:
    cluster = running(make_cluster(2))
    leaving = cluster.nodes[1]
    assert leaving.process is not None

    leaving.signal(signal.SIGTERM)

    assert leaving.process.wait(timeout=10) == 0
    document = wait_domain(cluster, 0, "DEGRADED")
    # A clean shutdown is announced, so the survivor cleans up at once instead of recovering.
    assert cells(document, 0) == ["CONNECTED", "DISCONNECTED"]
    assert "is shutting down; cleaned up" in cluster.nodes[0].log_text()
    assert "IMEX daemon stopped" in leaving.log_text()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"SERVER_PORT": "99999"}, "SERVER_PORT: 99999 is out of range (0..65535)"),
        ({"IMEX_WAIT_FOR_QUORUM": "MAYBE"}, "IMEX_WAIT_FOR_QUORUM: 'MAYBE' is not one of"),
        ({"IMEX_NODE_CONFIG_FILE": "/nonexistent/nodes.cfg"}, "cannot read IMEX_NODE_CONFIG_FILE"),
        ({"BIND_INTERFACE_IP": "127.0.0.77"}, "BIND_INTERFACE_IP 127.0.0.77 is not the address"),
    ],
)
def test_a_bad_config_is_a_clear_error_and_exit_1(
    make_cluster: MakeCluster, extra: dict[str, str], message: str
) -> None:
    cluster = make_cluster(1)
    node = cluster.nodes[0]
    cluster.write_config(node, extra=extra)

    cluster.start(node)

    assert node.process is not None
    assert node.process.wait(timeout=10) == 1
    stderr = node.stderr.read_text()
    assert message in stderr
    assert stderr.startswith("nvidia-imex: ")
    assert len(stderr.splitlines()) == 1


def test_a_taken_address_is_a_clear_error(make_cluster: MakeCluster) -> None:
    cluster = running(make_cluster(1))
    node = cluster.nodes[0]
    first = node.process

    try:
        cluster.start(node)
        assert node.process is not None
        assert node.process.wait(timeout=10) == 1
        assert "Address already in use" in node.stderr.read_text()
    finally:
        node.process = first  # so that the cluster's teardown stops the first daemon


def test_the_ctl_reports_a_daemon_it_cannot_reach(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(2)  # configured, never started

    query = cluster.ctl(cluster.nodes[0], "-q")
    assert (query.returncode, query.stdout) == (1, "UNAVAILABLE\n")
    assert "connection refused" in query.stderr

    domain = cluster.ctl(cluster.nodes[0], "-N")
    assert domain.returncode == 0
    assert domain.stdout.splitlines()[-1] == "Domain State: DOWN"

    missing = run_ctl("-c", str(cluster.root / "missing.cfg"), "-q")
    assert missing.returncode == 255
    assert "cannot read config file" in missing.stderr

    direct = run_ctl("-i", cluster.nodes[0].address, str(cluster.cmd_port), "-q")
    assert (direct.returncode, direct.stdout) == (1, "UNAVAILABLE\n")


def test_daemonize_returns_once_the_daemon_is_up(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(1)
    node = cluster.nodes[0]
    cluster.write_config(node, extra={"DAEMONIZE": "1"})

    cluster.start(node)

    assert node.process is not None
    assert node.process.wait(timeout=10) == 0
    status = cluster.status(node)
    assert status is not None
    try:
        assert status.pid != node.process.pid
        assert cluster.ctl(node, "-q").stdout == "READY\n"
        direct = run_ctl("-i", node.address, str(cluster.cmd_port), "-q")
        assert direct.stdout == "READY\n"
    finally:
        # The daemon is no child of this test: it has to be stopped by its pid.
        os.kill(status.pid, signal.SIGTERM)
    wait_for_sync(lambda: cluster.status(node) is None, what="daemon gone")


def test_the_ctl_follows_and_monitors_until_its_timeout(make_cluster: MakeCluster) -> None:
    cluster = running(make_cluster(1))
    node = cluster.nodes[0]

    follow = cluster.ctl(node, "-s", "-t", "300")
    assert (follow.returncode, follow.stdout) == (0, "READY\n")

    # Nothing changes while it watches, so -n prints the domain exactly once.
    monitor = cluster.ctl(node, "-n", "-j", "-t", "700")
    assert monitor.returncode == 0
    assert monitor.stdout.count('"timestamp"') == 1

    named = cluster.ctl(node, "-N", "-H")
    assert f"Node #0   - {node.address} (" in named.stdout
