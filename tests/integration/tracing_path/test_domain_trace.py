"""One trace per story, across processes: a domain's life, and a fault of one of its nodes.

The whole system runs as ``cdo sim up`` starts it, exporting spans over OTLP/HTTP to a small
receiver. A domain goes Ready: the span in its ``cdo.dev/trace-context`` annotation is the root
of a trace that holds the domain controller's and the allocator's reconciles, the allocator's
placement decision, the IMEX agents' preparation of the domain's claims and the membership event.
Then XID 79 hits a member node: the health monitor's span announcing the fault is the root of a
second trace that holds the domain going Degraded, the replacement pod's placement, the domain
Ready again and the node's recovery; those reconciles link back to the domain's own trace.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from shared.crds.names import FAULT_TRACE_CONTEXT_ANNOTATION, TRACE_CONTEXT_ANNOTATION
from sim import control as simctl
from tests.e2e.whole_system import SYSTEM_STEP_S, WholeSystem, live, running_whole_system
from tests.support.otlp import SPAN_KIND_PRODUCER, OtlpReceiver, ReceivedSpan
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.timeout(900),
]

NAMESPACE = "traced"
DOMAIN = "story"
SELECTOR = f"app={DOMAIN}"
REPLICAS = 4
CONTROLLER = "domain-controller"
ALLOCATOR = "clique-allocator"
AGENT = "imex-agent"
MONITOR = "health-monitor"


class Trace:
    """A W3C traceparent value, split."""

    def __init__(self, traceparent: str) -> None:
        self.trace_id = traceparent[3:35]
        self.span_id = traceparent[36:52]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def receiver() -> AsyncIterator[OtlpReceiver]:
    otlp = OtlpReceiver()
    await otlp.start()
    yield otlp
    await otlp.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system(receiver: OtlpReceiver) -> AsyncIterator[WholeSystem]:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "200"}
    async with running_whole_system(env) as running:
        yield running


def spans_of(receiver: OtlpReceiver, trace: Trace, service: str, name: str) -> list[ReceivedSpan]:
    return [
        span
        for span in receiver.spans
        if span.trace_id == trace.trace_id and span.service == service and span.name == name
    ]


def of_domain(spans: list[ReceivedSpan], **attributes: str) -> list[ReceivedSpan]:
    wanted = {"cdo.domain.namespace": NAMESPACE, "cdo.domain.name": DOMAIN, **attributes}
    return [s for s in spans if all(s.attributes.get(k) == v for k, v in wanted.items())]


async def exported(what: str, find: Callable[[], list[ReceivedSpan] | None]) -> list[ReceivedSpan]:
    """Until ``find()`` returns spans (the exporters send in batches)."""
    return await wait_for(find, timeout=60, interval=0.3, what=what)


async def test_a_domain_and_a_fault_of_its_node_are_each_one_trace(
    system: WholeSystem, receiver: OtlpReceiver
) -> None:
    await system.create_namespace(NAMESPACE)
    await system.create_workload(NAMESPACE, DOMAIN, replicas=REPLICAS, gpus=4)
    ready = await system.wait_domain_ready(NAMESPACE, DOMAIN)
    story = Trace(ready.metadata.annotations[TRACE_CONTEXT_ANNOTATION])

    # -- the domain's story: created, placed, its claims prepared, Ready -------------------------
    root = await exported(
        "the domain's root span",
        lambda: [
            s
            for s in spans_of(receiver, story, CONTROLLER, "reconcile ComputeDomain")
            if s.span_id == story.span_id
        ],
    )
    assert root[0].parent_span_id == ""  # the first reconcile began the domain's trace
    ready_reconciles = await exported(
        "the reconcile that found the domain Ready",
        lambda: of_domain(
            spans_of(receiver, story, CONTROLLER, "reconcile ComputeDomain"),
            **{"cdo.domain.phase": "Ready"},
        ),
    )
    assert all(s.parent_span_id == story.span_id for s in ready_reconciles)
    decisions = await exported(
        "the allocator's placement decision",
        lambda: of_domain(
            spans_of(receiver, story, ALLOCATOR, "reconcile Placement"),
            **{"cdo.placement.action": "write"},
        ),
    )
    assert all(s.parent_span_id == story.span_id for s in decisions)
    placement = await system.placement(NAMESPACE, DOMAIN)
    assert placement is not None
    assert (
        placement.metadata.annotations[TRACE_CONTEXT_ANNOTATION]
        == (ready.metadata.annotations[TRACE_CONTEXT_ANNOTATION])
    )
    prepared = await exported(
        "every claim of the domain prepared in its trace",
        lambda: (
            found
            if len(found := of_domain(spans_of(receiver, story, AGENT, "prepare ResourceClaim")))
            == REPLICAS
            else None
        ),
    )
    assert {s.parent_span_id for s in prepared} == {story.span_id}
    membership = [
        s
        for s in receiver.spans
        if s.trace_id == story.trace_id
        and s.kind == SPAN_KIND_PRODUCER
        and s.name.startswith("publish cdo.v1.domain.")
    ]
    assert membership, "the membership events were published inside the domain's trace"

    # -- a fault of a member node: its own trace, to the domain Ready again -----------------------
    # XID 74 (NVLink) is node-level: the node is tainted and its fault episode traced.
    victim = sorted(pod.spec.node_name for pod in live(await system.pods(NAMESPACE, SELECTOR)))[0]
    body = simctl.fault_body(
        xid=74, gpu=0, gpu_lost=False, gpu_back=False, nvlink_down=None, nvlink_up=None,
        fabric_state=None, fabric_problems=(), clear=False,
    )  # fmt: skip
    simctl.fault(system.state_dir, victim, body, say=lambda _: None)

    async def fault_context() -> str | None:
        node = await system.node(victim)
        return node.metadata.annotations.get(FAULT_TRACE_CONTEXT_ANNOTATION)

    fault = Trace(await wait_for(fault_context, timeout=SYSTEM_STEP_S, what="fault context"))

    async def degraded_then() -> bool:
        domain = await system.domain(NAMESPACE, DOMAIN)
        return domain is not None and domain.status.status != "Ready"

    await wait_for(degraded_then, timeout=SYSTEM_STEP_S, interval=0.1, what="domain not Ready")
    await system.wait_running(NAMESPACE, SELECTOR, REPLICAS)
    recovered = await system.wait_domain_ready(NAMESPACE, DOMAIN)
    assert victim not in {node.name for node in recovered.status.nodes}

    async def annotations_gone() -> bool:
        domain = await system.domain(NAMESPACE, DOMAIN)
        return (
            domain is not None
            and FAULT_TRACE_CONTEXT_ANNOTATION not in domain.metadata.annotations
            and await fault_context() is None
        )

    await wait_for(annotations_gone, timeout=SYSTEM_STEP_S, what="fault contexts removed")

    fault_root = await exported(
        "the fault's root span",
        lambda: spans_of(receiver, fault, MONITOR, "health fault"),
    )
    assert [(s.span_id, s.parent_span_id) for s in fault_root] == [(fault.span_id, "")]
    published = [
        s for s in receiver.spans
        if s.trace_id == fault.trace_id and s.name.startswith("publish cdo.v1.node.")
    ]  # fmt: skip
    assert any(s.parent_span_id == fault.span_id for s in published), "NodeFault in the span"

    def domain_in_fault(service: str, name: str, **attributes: str) -> list[ReceivedSpan]:
        return of_domain(spans_of(receiver, fault, service, name), **attributes)

    degraded = await exported(
        "the domain going Degraded in the fault's trace",
        lambda: domain_in_fault(
            CONTROLLER, "reconcile ComputeDomain", **{"cdo.domain.phase": "Degraded"}
        ),
    )
    replacement = await exported(
        "the replacement placed in the fault's trace",
        lambda: domain_in_fault(
            ALLOCATOR, "reconcile Placement", **{"cdo.placement.action": "write"}
        ),
    )
    ready_again = await exported(
        "the domain Ready again in the fault's trace",
        lambda: domain_in_fault(
            CONTROLLER, "reconcile ComputeDomain", **{"cdo.domain.phase": "Ready"}
        ),
    )
    for span in (*degraded, *replacement, *ready_again):
        assert span.parent_span_id == fault.span_id
        assert (story.trace_id, story.span_id) in span.links  # the domain's own story finds it
    recovery = await exported(
        "the node's recovery in the fault's trace",
        lambda: spans_of(receiver, fault, MONITOR, "health recovered"),
    )
    assert [s.parent_span_id for s in recovery] == [fault.span_id]

    await system.clean_up(NAMESPACE)
