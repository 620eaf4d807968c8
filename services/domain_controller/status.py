"""A domain's status from its facts: a pure function, the controller's one decision.

Conditions (each with ``observedGeneration``; ``lastTransitionTime`` moves only when the
condition's status does):

- ``Placed``: True when the allocator's Placement exists; else ``WaitingForPlacement``, or
  ``Released`` while deleting.
- ``Degraded``: True when a member node has a ``cdo.dev/gpu-fault`` taint, is gone, has a
  kubelet that is not Ready, or its ``cdo.dev/ImexReady`` is not True, or when the placement
  holds room for fewer pods than the gang size (a fault evicted members whose replacements wait);
  else ``Healthy``, or ``NotPlaced``.
- ``Ready``: True (``AllMembersReady``) when placed, every placed pod runs on its member node
  and no member is degraded; else the first that applies: ``Deleting``,
  ``TemplateNameConflict``, ``WaitingForPlacement``, the Degraded reason, ``PodsNotRunning``.
- ``Deleting``: only while the domain is being deleted: ``WaitingForPods``,
  ``WaitingForPlacementRelease``, ``Releasing``.

``Degraded`` reasons, most serious first: ``NodeFault``, ``NodeMissing``, ``NodeNotReady``,
``ImexNotReady``, ``MembersMissing``. ``status.status`` (NVIDIA's field) is Ready exactly when
condition Ready is True; ``status.nodes`` has one entry per member node, Ready when that node is
healthy and its pods run.

The phase published in membership events: ``Deleting``; ``NotReady`` (template conflict);
``Pending`` (not placed); ``Degraded``; ``Ready``; else ``Placed`` (waiting for pods).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

import msgspec

from services.domain_controller.facts import DomainFacts, NodeFacts, PodFacts
from shared.crds.computedomain import ComputeDomainNode, ComputeDomainStatus, DomainCondition
from shared.crds.placement import PlacementMember, PlacementSpec
from shared.events import DomainMember

READY = "Ready"
PLACED = "Placed"
DEGRADED = "Degraded"
DELETING = "Deleting"

DeletionStep = Literal["WaitingForPods", "WaitingForPlacementRelease", "Releasing"]

_LISTED = 5  # names listed in a message before "and N more"
# Degraded reasons, most serious first: the domain reports the worst one.
_SEVERITY = ("NodeFault", "NodeMissing", "NodeNotReady", "ImexNotReady", "MembersMissing")


class Assessment(msgspec.Struct, frozen=True, kw_only=True):
    """The computed status and what the membership event says about it."""

    status: ComputeDomainStatus
    phase: str
    reason: str
    members: tuple[DomainMember, ...] = ()
    size: int = 0
    deletion: DeletionStep | None = None
    """Where deletion stands, for a domain being deleted."""


class _Verdict(msgspec.Struct, frozen=True, kw_only=True):
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str


class _Member(msgspec.Struct, frozen=True, kw_only=True):
    spec: PlacementMember
    node: NodeFacts | None
    problem: str  # a _SEVERITY reason, or ""
    detail: str
    waiting_for: tuple[str, ...]  # placed pods that do not run on this node yet

    @property
    def ready(self) -> bool:
        return not self.problem and not self.waiting_for


def listed(names: Sequence[str]) -> str:
    """``a, b, c`` with at most a few names, then ``and N more``."""
    shown = ", ".join(names[:_LISTED])
    more = len(names) - _LISTED
    return f"{shown} and {more} more" if more > 0 else shown


def _node_problem(name: str, node: NodeFacts | None) -> tuple[str, str]:
    if node is None:
        return "NodeMissing", f"node {name} is gone"
    if node.faults:
        return "NodeFault", f"node {name} has fault taint {', '.join(node.faults)}"
    if node.kubelet_ready not in ("", "True"):
        return "NodeNotReady", f"node {name} is not Ready ({node.kubelet_ready})"
    if node.imex != "True":
        state = node.imex_reason or ("not reported" if not node.imex else node.imex)
        return "ImexNotReady", f"node {name}: IMEX not ready ({state})"
    return "", ""


def _members(facts: DomainFacts, placement: PlacementSpec) -> list[_Member]:
    pods = {pod.name: pod for pod in facts.pods}
    members = []
    for spec in sorted(placement.members, key=lambda m: (m.slot, m.node)):
        node = facts.nodes.get(spec.node)
        problem, detail = _node_problem(spec.node, node)
        waiting = tuple(name for name in spec.pods if not _runs_on(pods.get(name), spec.node))
        members.append(
            _Member(spec=spec, node=node, problem=problem, detail=detail, waiting_for=waiting)
        )
    return members


def _runs_on(pod: PodFacts | None, node: str) -> bool:
    return pod is not None and pod.running and pod.node == node


def _degraded(placement: PlacementSpec | None, members: list[_Member]) -> _Verdict:
    if placement is None:
        return _Verdict(status="False", reason="NotPlaced", message="the domain is not placed")
    troubled = [m for m in members if m.problem]
    reserved = reserved_pods(placement)
    if not troubled and reserved < placement.size:
        # The allocator reserves a gang whole (pods that do not exist yet included), so a
        # placed domain with fewer reserved pods has lost members (a fault evicted them and
        # the allocator released their node) or grew beyond the room its clique has left.
        return _Verdict(
            status="True",
            reason="MembersMissing",
            message=f"room reserved for {reserved} of {placement.size} pods; the rest wait "
            f"for room in clique {placement.clique}",
        )
    if not troubled:
        return _Verdict(
            status="False",
            reason="Healthy",
            message="every member node is healthy and its IMEX daemon ready",
        )
    worst = min(_SEVERITY.index(m.problem) for m in troubled)
    details = [m.detail for m in sorted(troubled, key=lambda m: _SEVERITY.index(m.problem))]
    return _Verdict(status="True", reason=_SEVERITY[worst], message=listed(details))


def reserved_pods(placement: PlacementSpec) -> int:
    """Pods the placement holds GPUs for, whether or not they exist yet."""
    return sum(member.gpus for member in placement.members) // placement.gpus_per_pod


def _placed(facts: DomainFacts) -> _Verdict:
    placement = facts.placement
    if placement is not None:
        nodes = len(placement.members)
        return _Verdict(
            status="True",
            reason="Placed",
            message=f"{placement.placed_pods} pods on {nodes} nodes of clique "
            f"{placement.clique}, channel {placement.channel}",
        )
    if facts.deleting:
        return _Verdict(
            status="False",
            reason="Released",
            message="the allocator released the domain's nodes and channel",
        )
    return _Verdict(
        status="False",
        reason="WaitingForPlacement",
        message="the clique allocator has not placed the domain yet",
    )


def _ready(facts: DomainFacts, members: list[_Member], degraded: _Verdict) -> _Verdict:
    placement = facts.placement

    def no(reason: str, message: str) -> _Verdict:
        return _Verdict(status="False", reason=reason, message=message)

    if facts.deleting:
        return no("Deleting", "the domain is being deleted")
    if facts.template_conflict:
        return no("TemplateNameConflict", facts.template_conflict)
    if placement is None:
        return no("WaitingForPlacement", "the clique allocator has not placed the domain yet")
    placed = placement.placed_pods
    if placed == 0 or placed < placement.size:
        return no("WaitingForPlacement", f"{placed} of {placement.size} pods placed")
    if degraded.status == "True":
        return no(degraded.reason, degraded.message)
    waiting = [name for m in members for name in m.waiting_for]
    if waiting:
        running = placed - len(waiting)
        return no(
            "PodsNotRunning", f"{running} of {placed} pods running; waiting for {listed(waiting)}"
        )
    return _Verdict(
        status="True",
        reason="AllMembersReady",
        message=f"{placed} pods running on {len(members)} nodes, IMEX ready on each",
    )


def deletion_step(facts: DomainFacts) -> DeletionStep:
    """What a deleted domain waits for: its pods to finish, then the allocator's release."""
    if any(not pod.finished for pod in facts.pods):
        return "WaitingForPods"
    if facts.placement is not None:
        return "WaitingForPlacementRelease"
    return "Releasing"


def _deleting(facts: DomainFacts, step: DeletionStep) -> _Verdict:
    if step == "WaitingForPods":
        users = [pod.name for pod in facts.pods if not pod.finished]
        return _Verdict(
            status="True",
            reason=step,
            message=f"{len(users)} pods still use the domain's claims: {listed(users)}",
        )
    if step == "WaitingForPlacementRelease":
        return _Verdict(
            status="True",
            reason=step,
            message="waiting for the clique allocator to release the domain's placement",
        )
    return _Verdict(status="True", reason=step, message="releasing the claim template")


def _condition(
    kind: str,
    verdict: _Verdict,
    *,
    facts: DomainFacts,
    previous: ComputeDomainStatus,
    now: datetime,
) -> DomainCondition:
    before = previous.condition(kind)
    since = before.last_transition_time if before and before.status == verdict.status else now
    return DomainCondition(
        type=kind,
        status=verdict.status,
        reason=verdict.reason,
        message=verdict.message,
        last_transition_time=since,
        observed_generation=facts.generation,
    )


def _phase(facts: DomainFacts, ready: _Verdict, degraded: _Verdict) -> str:
    if facts.deleting:
        return "Deleting"
    if facts.template_conflict:
        return "NotReady"
    if facts.placement is None:
        return "Pending"
    if degraded.status == "True":
        return "Degraded"
    if ready.status == "True":
        return "Ready"
    return "Placed"


def compute_status(
    facts: DomainFacts, *, previous: ComputeDomainStatus, now: datetime
) -> Assessment:
    """The status the domain should have, given its facts and the status it has now.

    ``now`` must be whole seconds in UTC (the API stores condition times that way), so an
    unchanged status compares equal to the stored one.
    """
    placement = facts.placement
    members = _members(facts, placement) if placement is not None else []
    placed = _placed(facts)
    degraded = _degraded(placement, members)
    ready = _ready(facts, members, degraded)
    step = deletion_step(facts) if facts.deleting else None

    verdicts = [(READY, ready), (PLACED, placed), (DEGRADED, degraded)]
    if step is not None:
        verdicts.append((DELETING, _deleting(facts, step)))
    conditions = tuple(
        _condition(kind, verdict, facts=facts, previous=previous, now=now)
        for kind, verdict in verdicts
    )
    clique = placement.clique if placement is not None else ""
    status = ComputeDomainStatus(
        status="Ready" if ready.status == "True" else "NotReady",
        nodes=tuple(
            ComputeDomainNode(
                name=m.spec.node,
                ip_address=m.node.address if m.node else "",
                clique_id=clique,
                index=m.spec.slot,
                status="Ready" if m.ready else "NotReady",
            )
            for m in members
        ),
        conditions=conditions,
        observed_generation=facts.generation,
        clique=clique or None,
        channel=placement.channel if placement is not None else None,
    )
    reason = _deleting(facts, step).reason if step is not None else ready.reason
    return Assessment(
        status=status,
        phase=_phase(facts, ready, degraded),
        reason=reason,
        members=tuple(
            DomainMember(
                node=m.spec.node,
                index=m.spec.slot,
                address=m.node.address if m.node else "",
                pods=len(m.spec.pods),
                gpus=m.spec.gpus,
                status="Ready" if m.ready else "NotReady",
            )
            for m in members
        ),
        size=placement.size if placement is not None else facts.gang_size,
        deletion=step,
    )
