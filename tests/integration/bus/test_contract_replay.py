"""The end-to-end suite's contract check (tests/e2e/contract.py) on a real JetStream stream: the
bus's own events pass; a message the contract does not allow is reported, naming its field."""

from __future__ import annotations

import nats

from shared.events import NodeFault
from shared.events.vocabulary import Action, FaultScope, FaultSignal, Severity
from sim.natsserver import NatsServer
from tests.conftest import BusFactory
from tests.e2e.contract import replay


async def test_the_bus_events_keep_the_contract_and_a_drifted_one_is_named(
    bus_factory: BusFactory, nats_server: NatsServer
) -> None:
    bus = await bus_factory("health-monitor")
    for signal in FaultSignal:
        await bus.publish(
            NodeFault(
                node="node-a",
                signal=signal,
                severity=Severity.FATAL,
                action=Action.DRAIN_NODE,
                scope=FaultScope.NODE,
                code=74,
            )
        )
    await bus.flush()
    clean = await replay(nats_server.url)
    assert clean.events == len(FaultSignal)
    assert clean.violations == []

    # What the contract used to say and the code never sent, and a time that is no date-time.
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        headers = {
            "ce-specversion": "1.0",
            "ce-id": "x1",
            "ce-source": "cdo/health-monitor/i0",
            "ce-type": "dev.cdo.v1.node.fault",
            "ce-time": "yesterday",
            "content-type": "application/json",
        }
        body = (
            b'{"type":"dev.cdo.v1.node.fault","id":"x1","time":"2026-12-02 07:00",'
            b'"node":"node-a","signal":"imex","severity":"fatal"}'
        )
        await js.publish("cdo.v1.node.node-a.fault", body, headers=headers)
        await js.publish("cdo.v1.node.node-a.fault", b"{", headers=headers)
        await js.publish(
            "cdo.v1.node.node-a.fault", body, headers={**headers, "ce-type": "dev.cdo.v9.nope"}
        )
    finally:
        await nc.close()

    drifted = await replay(nats_server.url)
    assert drifted.events == len(FaultSignal) + 3
    found = "\n".join(drifted.violations)
    assert "$.signal: 'imex' is not one of ['xid'" in found
    assert "$.time: '2026-12-02 07:00' is not a 'date-time'" in found
    assert "header ce-time 'yesterday' is not a date-time" in found
    assert "the body is not JSON" in found
    assert "ce-type 'dev.cdo.v9.nope' has no schema in proto/events" in found
    assert len(drifted.violations) == 5  # three in the first message, one in each other
