"""Every reason cdo's services can give has an explanation, and ``explain`` reports it.

The reasons are enumerated from the services' own code: their constants and enums, and every
string literal their decision modules pass as ``reason=`` (or to the controller's ``no(...)``),
so a reason added to a service without an explanation here fails this test.
"""

from __future__ import annotations

import ast
import enum
import typing
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest
from msgspec.structs import replace

from cli.explain import MEANINGS, Topic, explain
from cli.explain.facts import (
    ConditionFact,
    DomainFacts,
    EventFact,
    ImexFact,
    NodeFact,
    PlacementFact,
    PodFact,
    SliceFact,
)
from cli.explain.reasons import meaning
from cli.explain.render import render
from services.clique_allocator import gang
from services.clique_allocator import plan as allocator_plan
from services.clique_allocator.placement import Reason
from services.clique_allocator.planning import channelonly, failover, hold, notices, nvlinkless
from services.domain_controller import notices as controller_notices
from services.domain_controller import status as controller_status
from services.health_monitor import state as health_state
from services.imex_agent import names as imex_names
from services.imex_agent import pinning
from services.imex_agent import status as imex_status
from shared.events.vocabulary import ImexDomainState

ROOT = Path(__file__).resolve().parents[3]
CLIQUE = "9e1c3a52-0000-4000-8000-00000000c0de.1"


def literal_reasons(module: ModuleType, *, calls: tuple[str, ...] = ()) -> set[str]:
    """String literals passed as ``reason=``, or first to one of ``calls``, in a module."""
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if keyword.arg == "reason" and isinstance(keyword.value, ast.Constant):
                found.add(str(keyword.value.value))
        named = node.func.id if isinstance(node.func, ast.Name) else ""
        if named in calls and node.args and isinstance(node.args[0], ast.Constant):
            found.add(str(node.args[0].value))
    return found


def constants(module: ModuleType, prefix: str) -> set[str]:
    return {
        value
        for name, value in vars(module).items()
        if name.startswith(prefix) and isinstance(value, str)
    }


def values(kind: type[enum.Enum]) -> set[str]:
    return {str(member.value) for member in kind}


PLACEMENT = values(Reason) | {
    hold.GANG_COMPLETE,
    gang.GANG_SIZE_UNDECLARED,
    allocator_plan.INVALID_REQUEST,
    allocator_plan.PLACED,
    channelonly.WAITING_FOR_GPU_PODS,
    channelonly.NO_CHANNEL_AVAILABLE,
}
ALLOCATOR = (
    literal_reasons(notices)
    | literal_reasons(failover)
    | literal_reasons(allocator_plan)
    | {nvlinkless.WITHOUT_NVLINK}
) - PLACEMENT
DOMAIN = (
    literal_reasons(controller_status, calls=("no",))
    | literal_reasons(controller_notices)
    | set(controller_status._SEVERITY)
    | set(typing.get_args(controller_status.DeletionStep))
    | {controller_status.WITHOUT_NVLINK}
)
IMEX_NODE = constants(imex_names, "REASON_")
IMEX_CLAIM = literal_reasons(pinning)
IMEX_DOMAIN = values(ImexDomainState) | {
    imex_status.UNKNOWN,
    imex_status.DOMAIN_UP,
    imex_status.DOMAIN_DEGRADED,
    imex_status.DOMAIN_DOWN,
}
GPU_HEALTH = constants(health_state, "REASON_")

ENUMERATED: dict[Topic, set[str]] = {
    Topic.PLACEMENT: PLACEMENT,
    Topic.ALLOCATOR: ALLOCATOR,
    Topic.DOMAIN: DOMAIN,
    Topic.IMEX_NODE: IMEX_NODE,
    Topic.IMEX_CLAIM: IMEX_CLAIM,
    Topic.IMEX_DOMAIN: IMEX_DOMAIN,
    Topic.GPU_HEALTH: GPU_HEALTH,
}
CASES = sorted((topic, reason) for topic, reasons in ENUMERATED.items() for reason in reasons)


def test_the_enumeration_finds_what_each_service_says() -> None:
    # A guard on the scan itself: a refactor that hides the literals must not empty a topic.
    assert {"CliqueFull", "PodConstraints", "GangComplete", "NoFreeChannel"} <= PLACEMENT
    assert {"WaitingForGpuPods", "NoChannelAvailable"} <= PLACEMENT
    assert {"SliceStuck", "FailoverBlocked", "FailedOver", "Reserved"} <= ALLOCATOR
    assert {"NodeFault", "ImexNotReady", "TemplateNameConflict", "WaitingForPods"} <= DOMAIN
    assert {"WaitingForPlacement", "Deleting", "Recovered"} <= DOMAIN
    assert {"NotPinned", "OtherClique", "SeatWithoutUid"} <= IMEX_CLAIM
    assert {"ForeignImexDaemon", "DaemonNotReady"} <= IMEX_NODE
    assert {"GpuFault", "CircuitBreakerOpen"} <= GPU_HEALTH


def test_every_reason_the_services_give_has_an_explanation() -> None:
    missing = [f"{topic}: {reason}" for topic, reason in CASES if (topic, reason) not in MEANINGS]
    assert missing == []


def test_no_explanation_is_for_a_reason_no_service_gives() -> None:
    stale = [f"{t}: {r}" for t, r in MEANINGS if r not in ENUMERATED[t]]
    assert stale == []


def condition(kind: str, reason: str, status: str = "") -> ConditionFact:
    """A condition with ``reason``; False unless the reason says all is well."""
    if not status:
        status = "True" if not MEANINGS[_topic_of(kind), reason].problem else "False"
    return ConditionFact(type=kind, status=status, reason=reason, message=f"why: {reason}")


def _topic_of(kind: str) -> Topic:
    return {
        "cdo.dev/Placed": Topic.PLACEMENT,
        "cdo.dev/ImexReady": Topic.IMEX_NODE,
        "cdo.dev/GpuHealthy": Topic.GPU_HEALTH,
    }.get(kind, Topic.DOMAIN)


def facts_showing(topic: Topic, reason: str) -> DomainFacts:
    """A domain whose facts carry ``reason`` where ``topic`` says the service writes it."""
    node = NodeFact(name="n1", clique=CLIQUE, ready=condition("Ready", "KubeletReady", "True"))
    pod = PodFact(name="d-0", phase="Pending", node="n1")
    placement = PlacementFact(
        gpus_per_pod=4,
        size=1,
        slices=(SliceFact(index=0, clique=CLIQUE, channel=1, size=1, nodes=("n1",), slots=1),),
    )
    base = DomainFacts(namespace="ml", name="d", phase="Placed", placement=placement)
    now = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    match topic:
        case Topic.PLACEMENT:
            waiting = PodFact(name="d-0", gated=True, placed=condition("cdo.dev/Placed", reason))
            return DomainFacts(namespace="ml", name="d", phase="Pending", pods=(waiting,))
        case Topic.ALLOCATOR:
            event = EventFact(
                kind="ComputeDomain", name="d", type="Warning", reason=reason,
                message=f"why: {reason}", last=now,
            )  # fmt: skip
            return replace(base, events=(event,))
        case Topic.DOMAIN:
            return replace(base, conditions=(condition("Ready", reason),))
        case Topic.IMEX_NODE:
            sick = NodeFact(
                name="n1", clique=CLIQUE, imex_ready=condition("cdo.dev/ImexReady", reason)
            )
            return replace(base, nodes=(sick,), pods=(pod,))
        case Topic.IMEX_CLAIM:
            event = EventFact(
                kind="Pod", name="d-0", type="Warning", reason="FailedPrepareDynamicResources",
                message=f"prepare claim ml/d-0-c: refused ({reason}): why", last=now,
            )  # fmt: skip
            return replace(base, pods=(pod,), events=(event,))
        case Topic.IMEX_DOMAIN:
            state = ImexFact(node="n1", daemon_state="READY", domain_state=reason)
            return replace(base, nodes=(node,), imex=(state,))
        case Topic.GPU_HEALTH:
            sick = NodeFact(
                name="n1", clique=CLIQUE, gpu_healthy=condition("cdo.dev/GpuHealthy", reason)
            )
            return replace(base, nodes=(sick,))
    raise AssertionError(topic)


@pytest.mark.parametrize(("topic", "reason"), CASES, ids=[f"{t}-{r}" for t, r in CASES])
def test_explain_reports_each_reason_with_its_meaning(topic: Topic, reason: str) -> None:
    explained = explain(facts_showing(topic, reason))
    expected = meaning(topic, reason)
    reported = [f for f in explained.findings if (f.topic, f.reason) == (topic, reason)]
    if not expected.problem:
        # All is well: at most a line that says so, never a problem.
        assert all(f.what == expected.what and not f.problem for f in reported)
        assert not any(f.problem for f in explained.findings), explained.findings
        assert explained.summary.startswith("nothing waits")
        return
    assert len(reported) == 1, explained.findings
    assert reported[0].what == expected.what
    assert reported[0].problem
    assert explained.summary == f"{reason}: {expected.what}"


def test_slices_of_gang_units_show_their_unit_beside_their_ranks() -> None:
    placement = PlacementFact(
        gpus_per_pod=1,
        size=8,
        slices=tuple(
            SliceFact(index=i, clique=CLIQUE, channel=i, unit=f"serve-{i}", size=4, slots=4)
            for i in range(2)
        ),
    )
    explained = explain(DomainFacts(namespace="ml", name="d", phase="Ready", placement=placement))
    assert [(s.channel, s.ranks) for s in explained.slices] == [
        (0, "serve-0 0-3"),
        (1, "serve-1 0-3"),
    ]


def test_a_slice_shows_its_pods_without_gpus_beside_its_ranks() -> None:
    placement = PlacementFact(
        gpus_per_pod=0,
        size=0,
        slices=(SliceFact(index=0, clique=CLIQUE, channel=0, nodes=("n1",), channel_only=1),),
    )
    explained = explain(DomainFacts(namespace="ml", name="d", phase="Ready", placement=placement))
    (line,) = explained.slices
    assert (line.placed_pods, line.size, line.channel_only) == (0, 0, 1)
    assert "0/0 +1 without GPUs" in render(explained)
