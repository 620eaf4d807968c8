"""A publish in one process and its handling in another form one trace, exported over OTLP."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sim.natsserver import free_port
from tests.support.otlp import SPAN_KIND_CONSUMER, SPAN_KIND_PRODUCER, OtlpReceiver, ReceivedSpan
from tests.support.processes import ProgramProcess
from tests.support.wait import wait_for


@pytest.fixture
async def receiver() -> AsyncIterator[OtlpReceiver]:
    otlp = OtlpReceiver()
    await otlp.start()
    yield otlp
    await otlp.stop()


async def test_consumer_span_is_a_child_of_the_producer_span_across_processes(
    tmp_path: Path, service_env: dict[str, str], receiver: OtlpReceiver
) -> None:
    env = {
        **service_env,
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    consumer = ProgramProcess(
        "tests.support.eventtap", env={**env, "CDO_HTTP_PORT": str(free_port())}, workdir=tmp_path
    ).start()
    await wait_for(lambda: consumer.stdout_json(), what="eventtap ready")
    producer = ProgramProcess(
        "tests.support.eventgen", "--interval", "0.05", "--count", "5", env=env, workdir=tmp_path
    ).start()
    try:
        await wait_for(lambda: len(consumer.stdout_json()) >= 6, what="five events consumed")
        for process in (producer, consumer):
            process.send(signal.SIGTERM)
        for process in (producer, consumer):
            assert await asyncio.to_thread(process.wait, 20) == 0
    finally:
        producer.stop()
        consumer.stop()

    def spans(service: str, kind: int) -> list[ReceivedSpan]:
        return [s for s in receiver.spans if s.service == service and s.kind == kind]

    published = await wait_for(
        lambda: spans("eventgen", SPAN_KIND_PRODUCER), what="producer spans exported"
    )
    processed = spans("eventtap", SPAN_KIND_CONSUMER)
    assert len(published) == 5 and len(processed) == 5
    by_id = {span.span_id: span for span in published}
    printed_trace_ids = {r["trace_id"] for r in consumer.stdout_json() if "trace_id" in r}
    for child in processed:
        parent = by_id[child.parent_span_id]
        assert child.trace_id == parent.trace_id
        assert child.trace_id in printed_trace_ids  # the handler ran inside the span
        assert parent.name.startswith("publish cdo.v1.")
        assert child.name == "process" + parent.name.removeprefix("publish")
        assert "{" in parent.name  # the subject template, not the concrete subject
        assert child.attributes["messaging.system"] == "nats"
        assert child.attributes["messaging.operation.type"] == "process"
        assert parent.attributes["messaging.operation.type"] == "send"
        assert parent.attributes["messaging.destination.name"].startswith("cdo.v1.")
