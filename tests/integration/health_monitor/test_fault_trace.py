"""A fault episode is one trace, and the Node carries its context while the episode is open."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from shared.crds.names import FAULT_TRACE_CONTEXT_ANNOTATION
from tests.integration.health_monitor.harness import Harness, MonitorFactory
from tests.support.wait import wait_for


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


async def annotation(h: Harness) -> str | None:
    return (await h.node()).metadata.annotations.get(FAULT_TRACE_CONTEXT_ANNOTATION)


async def test_the_episode_span_is_on_the_node_with_the_taint_and_parents_the_recovery(
    start_monitor: MonitorFactory,
) -> None:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with start_monitor(tracer=provider.get_tracer("test")) as h:
        await h.settled()
        h.sim.raise_xid(1, 79)
        taint = await wait_for(h.fault_taint, what="the fault taint")
        assert taint.effect == "NoExecute"
        node = await h.node()
        value = node.metadata.annotations.get(FAULT_TRACE_CONTEXT_ANNOTATION)
        assert value is not None  # written together with the taint
        (root,) = await wait_for(lambda: named(exporter, "health fault"), what="episode span")
        assert root.parent is None and root.context is not None
        # The flags are the span's own: sampled, plus W3C level 2's "random" bit where the SDK
        # sets it on new root spans.
        context, flags = root.context, int(root.context.trace_flags)
        assert flags & 0x01
        assert value == f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags:02x}"

        async def recovered() -> bool:
            return await h.fault_taint() is None and await annotation(h) is None

        await wait_for(recovered, timeout=30, what="taint and fault context removed")
        (recovery,) = await wait_for(
            lambda: named(exporter, "health recovered"), what="recovery span"
        )
        assert recovery.parent is not None and recovery.context is not None
        assert recovery.parent.span_id == root.context.span_id
        assert recovery.context.trace_id == root.context.trace_id


async def test_without_an_exporter_the_node_gets_no_trace_annotation(
    start_monitor: MonitorFactory,
) -> None:
    async with start_monitor(tracer=TracerProvider().get_tracer("test")) as h:
        await h.settled()
        h.sim.raise_xid(1, 79)
        await wait_for(h.fault_taint, what="the fault taint")
        assert await annotation(h) is None
