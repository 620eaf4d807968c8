"""examples/external_scheduler.py as a real program against a real nats-server: it starts from
the KV snapshots, follows the stream while events are published, lives through nats-server
being killed and restarted, and ends with exactly the published events, in order, each once."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from shared.bus import EventBus
from shared.bus.cloudevents import MSG_ID_HEADER, encode
from shared.events import (
    CliqueCapacity,
    DomainMembershipChanged,
    Event,
    NodeFault,
    NodeImexState,
    NodeRecovered,
)
from sim.natsserver import NatsServer
from tests.conftest import BusFactory
from tests.support.wait import wait_for, wait_for_sync

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "external_scheduler.py"
CLIQUE = "6f0b6a9c-1b8e-4a52-9e2b-2a1e5b7a0c11.1"
NODES = ["rack-0-tray00", "rack-0-tray01.lab", "rack-1-tray02"]


def events(count: int, *, start: datetime, first: int = 0) -> list[Event]:
    """A mix of every event type over a few entities, each 1 ms after the one before."""
    made: list[Event] = []
    for index in range(first, first + count):
        node = NODES[index % len(NODES)]
        moment = start + timedelta(milliseconds=index)
        kind = index % 5
        event: Event
        if kind == 0:
            event = NodeFault(node=node, clique=CLIQUE, signal="xid", code=79, severity="fatal")
        elif kind == 1:
            event = NodeRecovered(node=node, clique=CLIQUE, signals=("xid",))
        elif kind == 2:
            event = NodeImexState(node=node, clique=CLIQUE, daemon_state="READY", restarts=index)
        elif kind == 3:
            event = CliqueCapacity(clique=CLIQUE, gpus_total=72, gpus_free=index % 72)
        else:
            event = DomainMembershipChanged(
                namespace="default", name=f"domain-{index % 2}", phase="Ready", clique=CLIQUE
            )
        made.append(event.__class__(**{**_fields(event), "time": moment}))
    return made


def _fields(event: Event) -> dict[str, Any]:
    return {name: getattr(event, name) for name in event.__struct_fields__}


def latest_per_key(published: list[Event]) -> dict[str, str]:
    latest: dict[str, str] = {}
    for event in published:
        key = event.snapshot_key()
        assert key is not None
        latest[key] = event.id
    return latest


class Example:
    """The example program as a subprocess; its JSON lines read from a file."""

    def __init__(self, workdir: Path, nats_url: str) -> None:
        self.stdout = workdir / "scheduler.stdout"
        self.stderr = workdir / "scheduler.stderr"
        with self.stdout.open("wb") as out, self.stderr.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, str(EXAMPLE), "--nats-url", nats_url, "--heartbeat-s", "1"],
                stdout=out,
                stderr=err,
            )

    def lines(self) -> list[dict[str, Any]]:
        records = []
        for line in self.stdout.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # still being written
        return records

    def wait(self, predicate: Any, *, what: str, timeout: float = 30.0) -> list[dict[str, Any]]:
        def probe() -> list[dict[str, Any]] | None:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"the example exited ({self.process.returncode}) waiting for {what}:\n"
                    + self.stderr.read_text()[-3000:]
                )
            records = self.lines()
            return records if predicate(records) else None

        return wait_for_sync(probe, timeout=timeout, interval=0.05, what=what)

    def handled(self, event_id: str) -> bool:
        return any(r.get("id") == event_id for r in self.lines() if r["kind"] != "snapshot")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(20)


@pytest.fixture
def example_factory(tmp_path: Path) -> Iterator[Any]:
    started: list[Example] = []

    def start(nats_url: str) -> Example:
        example = Example(tmp_path, nats_url)
        started.append(example)
        return example

    yield start
    for example in started:
        if example.process.poll() is None:
            example.process.kill()
            example.process.wait()


async def publish(bus: EventBus, batch: list[Event]) -> None:
    for event in batch:
        await bus.publish(event)
    await bus.flush()


async def test_snapshots_then_every_event_once_across_a_nats_restart(
    nats_server: NatsServer, bus_factory: BusFactory, example_factory: Any
) -> None:
    publisher = await bus_factory("publisher")
    start = datetime.now(UTC)
    before = events(12, start=start)
    await publish(publisher, before)
    expected_snapshots = latest_per_key(before)

    async def snapshots_written() -> bool:
        return {e.snapshot_key(): e.id for e in await publisher.snapshots()} == expected_snapshots

    await wait_for(snapshots_written, what="the snapshots of the first events")

    example: Example = example_factory(nats_server.url)
    records = example.wait(lambda rs: any(r["kind"] == "ready" for r in rs), what="ready")
    ready = next(r for r in records if r["kind"] == "ready")
    assert ready["stream_sequence"] == len(before)
    assert {r["key"]: r["id"] for r in records if r["kind"] == "snapshot"} == expected_snapshots

    during = events(15, start=start, first=100)
    await publish(publisher, during)
    example.wait(lambda _: example.handled(during[-1].id), what="the events before the restart")

    reconnects = publisher.watch.reconnects
    nats_server.kill()
    nats_server.start()
    await wait_for(
        lambda: publisher.watch.reconnects > reconnects and publisher.is_connected,
        what="the publisher reconnected",
    )

    after = events(15, start=start, first=200)
    await publish(publisher, after[:7])
    # A producer that sends an event again after JetStream's duplicate window: stored twice.
    headers, payload = encode(msgspec.structs.replace(during[3], source=publisher.source))
    headers[MSG_ID_HEADER] = f"{during[3].id}-resent"
    await publisher.nc.publish(during[3].subject(), payload, headers=headers)
    await publish(publisher, after[7:])
    example.wait(lambda _: example.handled(after[-1].id), what="the events after the restart")
    assert example.stop() == 0

    records = example.lines()
    applied = [r for r in records if r["kind"] == "event"]
    assert [r["id"] for r in applied] == [e.id for e in during + after]
    sequences = [r["sequence"] for r in applied]
    resent = len(before) + len(during) + 8  # stream sequence of the re-sent event
    assert sequences == [
        s for s in range(len(before) + 1, len(before) + len(during) + len(after) + 2) if s != resent
    ]
    skipped = [r for r in records if r["kind"] == "skipped"]
    assert {"sequence": resent, "id": during[3].id, "why": "duplicate"} in [
        {k: r.get(k) for k in ("sequence", "id", "why")} for r in skipped
    ]
    # The overlap replayed what the snapshots already held; none of it was applied twice.
    assert all(r["why"] in ("duplicate", "stale") for r in skipped)
    ids = [r["id"] for r in records if r["kind"] in ("snapshot", "event")]
    assert len(ids) == len(set(ids))
    assert any(r["kind"] == "resumed" for r in records)
    assert records[-1] == {"kind": "stopped", "last_sequence": resent + len(after) - 7}
