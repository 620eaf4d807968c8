"""Why a domain (or one of its pods) waits or is Degraded, from its facts (pure).

:func:`explain` turns :class:`~cli.explain.facts.DomainFacts` into an :class:`Explanation`:
one :class:`Finding` per reason something gives (the domain's conditions, each waiting pod's
``cdo.dev/Placed``, claims the IMEX agent refused, member nodes' health and IMEX conditions,
the IMEX domain state), each with its meaning from :mod:`cli.explain.reasons`; problems first.
Beside them: the placement slice by slice, the candidate cliques' capacity, the member nodes'
faults and taints, and the recent Events.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime

import msgspec

from cli.explain.facts import (
    CliqueFact,
    ConditionFact,
    DomainFacts,
    EventFact,
    NodeFact,
    PodFact,
    SliceFact,
)
from cli.explain.reasons import Topic, known, meaning

RECENT_EVENTS = 10
_NEVER = datetime.min.replace(tzinfo=UTC)
FAILED_PREPARE = "FailedPrepareDynamicResources"
_REFUSED = re.compile(r"refused \((?P<reason>[A-Za-z]+)\)")
_DOMAIN_CONDITIONS = ("Ready", "Placed", "Degraded", "Deleting")
_EVENT_TOPICS = (Topic.ALLOCATOR, Topic.DOMAIN, Topic.PLACEMENT)
"""Where a domain Event's reason is looked up, in order: ``Placed`` on a domain is the
controller's (the domain is placed), not a pod's condition."""


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    topic: Topic
    reason: str
    subject: str
    """What says so: ``condition Ready``, ``pods a-0, a-1``, ``node n1``."""
    message: str
    what: str
    then: str = ""
    problem: bool = True


class SliceLine(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    clique: str
    channel: int
    ranks: str
    nodes: tuple[str, ...]
    placed_pods: int
    size: int
    channel_only: int = 0
    """Pods without GPUs seated in the slice (they hold no rank)."""
    reasons: tuple[str, ...] = ()
    """Why its missing pods wait (their ``cdo.dev/Placed`` reasons), or ``SliceStuck``."""
    moved_from: str = ""


class NodeLine(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    clique: str
    ready: str
    gpu: str
    imex: str
    imex_domain: str
    taints: tuple[str, ...]


class EventLine(msgspec.Struct, frozen=True, kw_only=True):
    """A recent Event, with what its reason means where cdo knows it."""

    event: EventFact
    what: str = ""


class Explanation(msgspec.Struct, frozen=True, kw_only=True):
    target: str
    phase: str
    summary: str
    findings: tuple[Finding, ...] = ()
    slices: tuple[SliceLine, ...] = ()
    waiting_pods: int = 0
    """Pods of the domain that no slice holds yet."""
    cliques: tuple[CliqueFact, ...] = ()
    nodes: tuple[NodeLine, ...] = ()
    events: tuple[EventLine, ...] = ()
    notes: tuple[str, ...] = ()


def _finding(topic: Topic, reason: str, subject: str, message: str) -> Finding:
    found = meaning(topic, reason)
    return Finding(
        topic=topic,
        reason=reason,
        subject=subject,
        message=message,
        what=found.what,
        then=found.then,
        problem=found.problem,
    )


def _listed(names: list[str], limit: int = 4) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def refusal(event: EventFact) -> str | None:
    """The IMEX agent's refusal reason in a pod's FailedPrepareDynamicResources Event."""
    if event.kind != "Pod" or event.reason != FAILED_PREPARE:
        return None
    match = _REFUSED.search(event.message)
    return match.group("reason") if match else None


def event_topic(event: EventFact) -> Topic | None:
    """The topic under which a domain Event's reason is explained, if any."""
    if event.kind != "ComputeDomain":
        return None
    return next((topic for topic in _EVENT_TOPICS if known(topic, event.reason)), None)


def _domain_findings(facts: DomainFacts) -> list[Finding]:
    out = []
    for kind in _DOMAIN_CONDITIONS:
        condition = next((c for c in facts.conditions if c.type == kind), None)
        if condition is None or not condition.reason:
            continue
        out.append(_finding(Topic.DOMAIN, condition.reason, f"condition {kind}", condition.message))
    return out


def _pods_of_interest(facts: DomainFacts) -> tuple[PodFact, ...]:
    if facts.pod:
        return tuple(pod for pod in facts.pods if pod.name == facts.pod)
    return facts.pods


def _placement_findings(pods: Iterable[PodFact]) -> list[Finding]:
    """One finding per (reason, message) of the pods' Placed conditions, naming the pods."""
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for pod in pods:
        placed = pod.placed
        if placed is None:
            continue
        message = "" if placed.status == "True" else placed.message  # "pinned to node X" each
        groups[(placed.reason, message)].append(pod.name)
    return [
        _finding(
            Topic.PLACEMENT, reason, f"pod{'s' if len(names) > 1 else ''} {_listed(names)}", message
        )
        for (reason, message), names in sorted(groups.items())
    ]


def _refusal_findings(facts: DomainFacts, pods: Iterable[PodFact]) -> list[Finding]:
    wanted = {pod.name for pod in pods}
    seen: dict[tuple[str, str], EventFact] = {}
    for event in facts.events:
        reason = refusal(event)
        if reason is not None and event.name in wanted:
            seen[(event.name, reason)] = event
    return [
        _finding(Topic.IMEX_CLAIM, reason, f"pod {name}", event.message)
        for (name, reason), event in sorted(seen.items())
    ]


def _warning_findings(facts: DomainFacts) -> list[Finding]:
    """The latest Warning Event of each allocator reason on the domain (a stuck slice, a
    blocked failover): what the Placement itself does not say."""
    latest: dict[str, EventFact] = {}
    for event in _by_time(facts.events):
        if (
            _on_domain(event, facts)
            and event.type == "Warning"
            and known(Topic.ALLOCATOR, event.reason)
        ):
            latest[event.reason] = event
    return [
        _finding(Topic.ALLOCATOR, reason, "event on the domain", event.message)
        for reason, event in latest.items()
    ]


def _on_domain(event: EventFact, facts: DomainFacts) -> bool:
    return event.kind == "ComputeDomain" and event.name == facts.name


def _by_time(events: Iterable[EventFact]) -> list[EventFact]:
    """Oldest first; Events without a time before all others."""
    return sorted(events, key=lambda e: e.last or _NEVER)


def member_nodes(facts: DomainFacts) -> list[str]:
    """The domain's member nodes and the nodes its pods are on, in order of first mention."""
    names: dict[str, None] = {}
    if facts.placement is not None:
        for piece in facts.placement.slices:
            names.update(dict.fromkeys(piece.nodes))
    for pod in _pods_of_interest(facts):
        if pod.node:
            names[pod.node] = None
    if facts.pod:
        on = {pod.node for pod in _pods_of_interest(facts)}
        return [name for name in names if name in on]
    return list(names)


def _bad(condition: ConditionFact | None) -> bool:
    return condition is not None and condition.status != "True"


def _node_findings(facts: DomainFacts, members: list[str]) -> list[Finding]:
    nodes = {node.name: node for node in facts.nodes}
    imex = {state.node: state for state in facts.imex}
    out = []
    for name in members:
        node = nodes.get(name)
        if node is None:
            continue
        subject = f"node {name}"
        if node.gpu_healthy is not None and (
            _bad(node.gpu_healthy) or node.gpu_healthy.reason != "GpuHealthy"
        ):
            out.append(
                _finding(
                    Topic.GPU_HEALTH, node.gpu_healthy.reason, subject, node.gpu_healthy.message
                )
            )
        if _bad(node.imex_ready) and node.imex_ready is not None:
            out.append(
                _finding(Topic.IMEX_NODE, node.imex_ready.reason, subject, node.imex_ready.message)
            )
        state = imex.get(name)
        if state is not None and state.domain_state != "UP":
            out.append(
                _finding(
                    Topic.IMEX_DOMAIN,
                    state.domain_state,
                    subject,
                    f"daemon {state.daemon_state}, domain {state.domain_state}, "
                    f"{state.peers_connected}/{state.peers} peers connected",
                )
            )
    return out


def _slice_lines(facts: DomainFacts) -> tuple[tuple[SliceLine, ...], int]:
    placement = facts.placement
    reasons_by_slice: dict[int | None, set[str]] = defaultdict(set)
    for pod in facts.pods:
        if pod.placed is not None and pod.placed.status != "True":
            reasons_by_slice[None].add(pod.placed.reason)
    lines = []
    pieces: tuple[SliceFact, ...] = placement.slices if placement is not None else ()
    unplaced = sorted(reasons_by_slice[None])
    for piece in pieces:
        reasons: list[str] = []
        if piece.waiting_since is not None:
            reasons.append("SliceStuck")
        if piece.placed_pods < piece.size:
            reasons += unplaced
        last = piece.first_rank + max(piece.size, 1) - 1
        ranks = f"{piece.first_rank}-{last}" if piece.size > 1 else str(piece.first_rank)
        lines.append(
            SliceLine(
                index=piece.index,
                clique=piece.clique,
                channel=piece.channel,
                ranks=f"{piece.unit} {ranks}" if piece.unit else ranks,
                nodes=piece.nodes,
                placed_pods=piece.placed_pods,
                size=piece.size,
                channel_only=piece.channel_only,
                reasons=tuple(dict.fromkeys(reasons)),
                moved_from=piece.moved_from,
            )
        )
    waiting = sum(1 for pod in facts.pods if pod.gated)
    return tuple(lines), waiting


def _node_lines(facts: DomainFacts, members: list[str]) -> tuple[NodeLine, ...]:
    nodes = {node.name: node for node in facts.nodes}
    imex = {state.node: state for state in facts.imex}

    def state(condition: ConditionFact | None) -> str:
        if condition is None:
            return "-"
        return "True" if condition.status == "True" else f"{condition.status} ({condition.reason})"

    lines = []
    for name in members:
        node: NodeFact | None = nodes.get(name)
        if node is None:
            lines.append(
                NodeLine(
                    name=name,
                    clique="-",
                    ready="gone",
                    gpu="-",
                    imex="-",
                    imex_domain="-",
                    taints=(),
                )
            )
            continue
        seen = imex.get(name)
        lines.append(
            NodeLine(
                name=name,
                clique=node.clique or "-",
                ready=state(node.ready),
                gpu=state(node.gpu_healthy),
                imex=state(node.imex_ready),
                imex_domain=seen.domain_state if seen is not None else "-",
                taints=node.taints,
            )
        )
    return tuple(lines)


def _cliques(facts: DomainFacts) -> tuple[CliqueFact, ...]:
    """Every clique, the domain's own first (a waiting gang may go to any of them)."""
    own = (
        {piece.clique for piece in facts.placement.slices} if facts.placement is not None else set()
    )
    return tuple(sorted(facts.cliques, key=lambda c: (c.clique not in own, c.clique)))


def event_meaning(event: EventFact) -> str:
    """What a recent Event's reason means, where cdo gave it; "" for others'."""
    reason = refusal(event)
    if reason is not None:
        return meaning(Topic.IMEX_CLAIM, reason).what if known(Topic.IMEX_CLAIM, reason) else ""
    topic = event_topic(event)
    return meaning(topic, event.reason).what if topic is not None else ""


def _events(facts: DomainFacts) -> tuple[EventLine, ...]:
    wanted = {pod.name for pod in _pods_of_interest(facts)}
    chosen = [
        event
        for event in _by_time(facts.events)
        if (_on_domain(event, facts) and not facts.pod)
        or (event.kind == "Pod" and event.name in wanted)
    ]
    return tuple(
        EventLine(event=event, what=event_meaning(event)) for event in chosen[-RECENT_EVENTS:]
    )


def _summary(facts: DomainFacts, findings: list[Finding]) -> str:
    problems = [f for f in findings if f.problem]
    if not problems:
        return "nothing waits: no condition, pod, node or IMEX daemon reports a problem"
    first = problems[0]
    return f"{first.reason}: {first.what}"


def explain(facts: DomainFacts) -> Explanation:
    """The explanation of ``facts`` (the module docstring)."""
    pods = _pods_of_interest(facts)
    members = member_nodes(facts)
    findings = (
        ([] if facts.pod else _domain_findings(facts))
        + _placement_findings(pods)
        + ([] if facts.pod else _warning_findings(facts))
        + _refusal_findings(facts, pods)
        + _node_findings(facts, members)
    )
    findings.sort(key=lambda f: not f.problem)  # stable: problems first, in the order above
    slices, waiting = _slice_lines(facts)
    target = f"computedomain {facts.namespace}/{facts.name}"
    if facts.pod:
        target = f"pod {facts.namespace}/{facts.pod} (of {target})"
    phase = facts.phase
    if facts.pod:
        phase = next((pod.phase for pod in pods), "") or "unknown"
    return Explanation(
        target=target,
        phase=phase,
        summary=_summary(facts, findings),
        findings=tuple(findings),
        slices=slices,
        waiting_pods=waiting,
        cliques=_cliques(facts),
        nodes=_node_lines(facts, members),
        events=_events(facts),
        notes=facts.notes,
    )
