"""``cdo events`` against a real nats-server: the history in stream order, from a sequence or a
time, filtered by subject, as text or JSON; ``--follow`` keeps printing until interrupted."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from shared.events import CliqueCapacity, Event, NodeFault, NodeImexState, NodeRecovered
from sim.natsserver import NatsServer
from tests.conftest import BusFactory
from tests.integration.cli.conftest import acdo, environment
from tests.support.wait import wait_for

CLIQUE = "6f0b6a9c-1b8e-4a52-9e2b-2a1e5b7a0c11.1"


def story() -> list[Event]:
    return [
        CliqueCapacity(clique=CLIQUE, gpus_total=8, gpus_free=8),
        NodeImexState(node="rack-0-tray00", clique=CLIQUE, daemon_state="READY", domain_state="UP"),
        NodeFault(
            node="rack-0-tray00",
            clique=CLIQUE,
            signal="xid",
            code=79,
            severity="fatal",
            action="drain_node",
            message="GPU 1: XID 79",
        ),
        NodeRecovered(node="rack-0-tray00", clique=CLIQUE, signals=("xid",)),
        NodeFault(node="rack-0-tray01.lab", signal="nvlink", code=2, severity="warning"),
    ]


async def published(bus_factory: BusFactory) -> list[Event]:
    bus = await bus_factory("producer")
    events = story()
    for event in events:
        await bus.publish(event)
    await bus.flush()
    return events


async def test_history_as_text_in_stream_order(
    nats_server: NatsServer, bus_factory: BusFactory, tmp_path: Path
) -> None:
    await published(bus_factory)
    result = await acdo("events", "--nats-url", nats_server.url, "--state-dir", str(tmp_path))
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["#1", "#2", "#3", "#4", "#5"]
    assert "clique.capacity" in lines[0] and "gpus free 8/8" in lines[0]
    assert "node rack-0-tray00 FAULT xid 79 fatal -> drain_node: GPU 1: XID 79" in lines[2]
    assert "node rack-0-tray00 recovered (xid)" in lines[3]


async def test_from_a_sequence_a_time_and_a_subject(
    nats_server: NatsServer, bus_factory: BusFactory, tmp_path: Path
) -> None:
    events = await published(bus_factory)
    common = ["--nats-url", nats_server.url, "--state-dir", str(tmp_path), "--json"]

    later = await acdo("events", "--from-seq", "4", *common)
    assert later.code == 0, later.stderr
    records = [json.loads(line) for line in later.stdout.splitlines()]
    assert [(r["sequence"], r["id"]) for r in records] == [(4, events[3].id), (5, events[4].id)]
    assert records[1]["subject"] == "cdo.v1.node.rack-0-tray01=2Elab.fault"
    assert records[1]["data"]["node"] == "rack-0-tray01.lab"
    assert records[1]["source"] == "cdo/producer/i0"

    faults = await acdo("events", "--subject", "node.*.fault", *common)
    assert [json.loads(line)["sequence"] for line in faults.stdout.splitlines()] == [3, 5]

    recent = await acdo("events", "--since", "1h", *common)
    assert len(recent.stdout.splitlines()) == 5

    # kubectl's spelling: -o json is --json.
    spelled = await acdo("events", "--from-seq", "4", *common[:-1], "-o", "json")
    assert spelled.stdout == later.stdout
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    none = await acdo("events", "--since", future, *common)
    assert none.code == 0 and none.stdout == ""
    beyond = await acdo("events", "--from-seq", "99", *common)
    assert beyond.code == 0 and beyond.stdout == ""


async def test_follow_prints_new_events_until_interrupted(
    nats_server: NatsServer, bus_factory: BusFactory, tmp_path: Path
) -> None:
    await published(bus_factory)
    out = tmp_path / "follow.out"
    with out.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cli", "events", "--follow", "--json",
            "--nats-url", nats_server.url, "--state-dir", str(tmp_path),
            stdout=sink, stderr=asyncio.subprocess.PIPE, env=environment(),
        )  # fmt: skip
    try:

        def sequences() -> list[int]:
            return [json.loads(line)["sequence"] for line in out.read_text().splitlines()]

        await wait_for(lambda: len(sequences()) == 5, timeout=20, what="the history")
        bus = await bus_factory("late")
        await bus.publish(NodeRecovered(node="rack-0-tray01.lab", signals=("nvlink",)))
        await bus.flush()
        await wait_for(lambda: sequences() == [1, 2, 3, 4, 5, 6], timeout=20, what="a new event")
        process.send_signal(signal.SIGINT)
        async with asyncio.timeout(20):
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_a_server_without_cdo_stream_is_a_failure(tmp_path: Path) -> None:
    # A bare server: the nats_server fixture has the stream the NATS bootstrap makes.
    bare = NatsServer(store_dir=tmp_path / "nats")
    bare.start()
    try:
        result = await acdo("events", "--nats-url", bare.url, "--state-dir", str(tmp_path))
    finally:
        bare.stop()
    assert result.code == 1
    assert "NATS has no stream CDO" in result.stderr
