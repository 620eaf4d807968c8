"""A domain's status from its facts: a pure function, the controller's one decision.

A domain is placed as slices, each inside one NVLink clique (``members.py`` reads the
placement as member nodes and slices). Conditions (each with ``observedGeneration``;
``lastTransitionTime`` moves only when the condition's status does) aggregate over every slice:

- ``Placed``: True when the allocator's Placement exists (the message counts pods, nodes,
  slices and cliques); else ``WaitingForPlacement``, or ``Released`` while deleting. A domain
  whose record says it runs without IMEX (``multiNodeNvlink: false``) is Placed with reason
  ``PlacedWithoutNvlink``; its member nodes are where its pods run (cliqueID "", index -1, as
  NVIDIA's status shows such nodes), IMEX does not count for Degraded, and it is Ready once
  the whole gang runs.
- ``Degraded``: True when a member node of any slice has a ``cdo.dev/gpu-fault`` taint, is gone,
  is out of its slice's clique (its clique label gone or another: fabric lost), has a kubelet
  that is not Ready, or its ``cdo.dev/ImexReady`` is not True, or when the
  placement holds room for fewer pods than the gang size (a fault evicted members whose
  replacements wait; the message names the slices short of room); else ``Healthy``, or
  ``NotPlaced``.
- ``Ready``: True (``AllMembersReady``) when the whole gang is placed (its ``size`` pods that
  take GPUs and its ``channelOnly`` pods that ask only for the channel, at least one pod in
  all), every placed pod of every slice runs on its member node and no member is degraded;
  else the first that applies:
  ``Deleting``, ``TemplateNameConflict``, ``WaitingForPlacement``, the Degraded reason,
  ``PodsNotRunning``.
- ``Deleting``: only while the domain is being deleted: ``WaitingForPods``,
  ``WaitingForPlacementRelease``, ``Releasing``.
- ``PerGpuFaults``: only for a domain whose pods use GPUs of NVIDIA's GPU DRA driver: True
  (``DeviceTaintRules``) when a fault of one such GPU is marked on that GPU alone; False
  (``DeviceTaintRuleNotServed``) on a server without DeviceTaintRule (before Kubernetes 1.37),
  where the health monitor taints the GPU's whole node instead. It does not change Ready.

A slice the allocator finds its clique cannot hold (its ``waitingSince``) is named in the
Degraded message, and a slice that failed over (``movedFrom``) in the Placed message.

``Degraded`` reasons, most serious first: ``NodeFault``, ``NodeMissing``, ``NodeOutOfClique``,
``NodeNotReady``, ``ImexNotReady``, ``MembersMissing``. ``status.status`` (NVIDIA's field) is
Ready exactly when condition Ready is True; ``status.nodes`` has one entry per member node
(once, however many slices use it), Ready when that node is healthy and its pods run;
``status.cliques`` one entry per clique the slices use; ``status.clique`` and
``status.channel`` are set only for a domain in exactly one clique (the channel only when its
slices there share one: gang units each have their own).

The messages' wording is ``status_messages.py``'s; the node, clique and event entries are
``status_entries.py``'s.

The phase published in membership events: ``Deleting``; ``NotReady`` (template conflict);
``Pending`` (not placed); ``Degraded``; ``Ready``; else ``Placed`` (waiting for pods).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

from services.domain_controller.facts import DomainFacts
from services.domain_controller.members import Layout, layout, layout_without_nvlink
from services.domain_controller.status_entries import (
    clique_entries,
    event_member,
    event_slice,
    node_entries,
)
from services.domain_controller.status_messages import (
    listed,
    moves,
    short_of_room,
    spread,
    stuck,
    where,
    without_nvlink,
)
from shared.crds.computedomain import ComputeDomainStatus, DomainCondition
from shared.crds.placement import PlacementSpec
from shared.events import DomainMember, DomainSlice
from shared.kube.apis import DEVICE_TAINT_RULES_API

READY = "Ready"
PLACED = "Placed"
PER_GPU_FAULTS = "PerGpuFaults"
WITHOUT_NVLINK = "PlacedWithoutNvlink"
"""Placed reason of a domain that runs without IMEX (no node of its pods has multi-node
NVLink): the scheduler placed its pods, and they get no channel."""
DEGRADED = "Degraded"
DELETING = "Deleting"

DeletionStep = Literal["WaitingForPods", "WaitingForPlacementRelease", "Releasing"]

# Degraded reasons, most serious first: the domain reports the worst one.
_SEVERITY = (
    "NodeFault",
    "NodeMissing",
    "NodeOutOfClique",
    "NodeNotReady",
    "ImexNotReady",
    "MembersMissing",
)
_NOTHING = Layout(slices=(), nodes=(), cliques=())


class Assessment(msgspec.Struct, frozen=True, kw_only=True):
    """The computed status and what the membership event says about it."""

    status: ComputeDomainStatus
    phase: str
    reason: str
    members: tuple[DomainMember, ...] = ()
    slices: tuple[DomainSlice, ...] = ()
    size: int = 0
    deletion: DeletionStep | None = None
    """Where deletion stands, for a domain being deleted."""


class _Verdict(msgspec.Struct, frozen=True, kw_only=True):
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str


def _degraded(placement: PlacementSpec | None, placed: Layout) -> _Verdict:
    if placement is None:
        return _Verdict(status="False", reason="NotPlaced", message="the domain is not placed")
    troubled = [m for m in placed.nodes if m.problem]
    if not troubled and not placement.multi_node_nvlink:
        return _Verdict(
            status="False", reason="Healthy", message="every node of the domain's pods is healthy"
        )
    if not troubled and placement.reserved_pods < placement.size:
        # The allocator reserves a gang whole (pods that do not exist yet included), so a
        # placed domain with fewer reserved pods has lost members (a fault evicted them and
        # the allocator released their node) or grew beyond the room its cliques have left.
        return _Verdict(
            status="True", reason="MembersMissing", message=short_of_room(placement, placed)
        )
    if not troubled:
        return _Verdict(
            status="False",
            reason="Healthy",
            message="every member node is healthy and its IMEX daemon ready",
        )
    worst = min(_SEVERITY.index(m.problem) for m in troubled)
    details = [m.detail for m in sorted(troubled, key=lambda m: _SEVERITY.index(m.problem))]
    message = "; ".join(part for part in (listed(details), stuck(placement)) if part)
    return _Verdict(status="True", reason=_SEVERITY[worst], message=message)


def _placed(facts: DomainFacts, placed: Layout) -> _Verdict:
    placement = facts.placement
    if placement is not None and not placement.multi_node_nvlink:
        return _Verdict(status="True", reason=WITHOUT_NVLINK, message=without_nvlink(placed))
    if placement is not None:
        message = (
            f"{_placed_pods(placement)} pods on {where(placed)}"
            if placed.slices
            else "the allocator's record holds no slice yet"
        )
        moved = moves(placement)
        return _Verdict(
            status="True",
            reason="Placed",
            message=f"{message}; {moved}" if moved else message,
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


def _ready(facts: DomainFacts, placed: Layout, degraded: _Verdict) -> _Verdict:
    placement = facts.placement

    def no(reason: str, message: str) -> _Verdict:
        return _Verdict(status="False", reason=reason, message=message)

    if facts.deleting:
        return no("Deleting", "the domain is being deleted")
    if facts.template_conflict:
        return no("TemplateNameConflict", facts.template_conflict)
    if placement is None:
        return no("WaitingForPlacement", "the clique allocator has not placed the domain yet")
    if not placement.multi_node_nvlink:
        return _ready_without_nvlink(placement, placed, degraded)
    pods = _placed_pods(placement)
    wanted = placement.size + placement.channel_only
    short = placement.placed_pods < placement.size
    if pods == 0 or short or placement.placed_channel_only < placement.channel_only:
        return no("WaitingForPlacement", f"{pods} of {wanted} pods placed")
    if degraded.status == "True":
        return no(degraded.reason, degraded.message)
    waiting = [name for m in placed.nodes for name in m.waiting_for]
    if waiting:
        running = pods - len(waiting)
        return no(
            "PodsNotRunning", f"{running} of {pods} pods running; waiting for {listed(waiting)}"
        )
    return _Verdict(
        status="True",
        reason="AllMembersReady",
        message=f"{pods} pods running on {len(placed.nodes)} nodes{spread(placed)}, "
        "IMEX ready on each",
    )


def _placed_pods(placement: PlacementSpec) -> int:
    """The pods the record seats, with GPUs or only the channel."""
    return placement.placed_pods + placement.placed_channel_only


def _ready_without_nvlink(placement: PlacementSpec, placed: Layout, degraded: _Verdict) -> _Verdict:
    """Ready once the whole gang runs on healthy nodes (no IMEX to wait for)."""
    if degraded.status == "True":
        return _Verdict(status="False", reason=degraded.reason, message=degraded.message)
    running = sum(len(m.pods) - len(m.waiting_for) for m in placed.nodes)
    if running < placement.size:
        return _Verdict(
            status="False",
            reason="PodsNotRunning",
            message=f"{running} of {placement.size} pods running (without IMEX)",
        )
    return _Verdict(
        status="True",
        reason="AllMembersReady",
        message=f"{running} pods running on {len(placed.nodes)} nodes, without IMEX "
        "(no multi-node NVLink)",
    )


def _per_gpu_faults(confined: bool) -> _Verdict:
    if confined:
        return _Verdict(
            status="True",
            reason="DeviceTaintRules",
            message="a fault of one of the DRA GPUs of the domain's pods takes only that GPU "
            "(a DeviceTaintRule)",
        )
    api = DEVICE_TAINT_RULES_API
    return _Verdict(
        status="False",
        reason="DeviceTaintRuleNotServed",
        message=f"the API server does not serve {api.name} (Kubernetes {api.since} and newer): "
        "a fault of one of the DRA GPUs of the domain's pods taints its whole node",
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
    if placement is None:
        placed = _NOTHING
    elif placement.multi_node_nvlink:
        placed = layout(placement, facts)
    else:
        placed = layout_without_nvlink(facts, gpus_per_pod=placement.gpus_per_pod)
    degraded = _degraded(placement, placed)
    ready = _ready(facts, placed, degraded)
    step = deletion_step(facts) if facts.deleting else None

    verdicts = [(READY, ready), (PLACED, _placed(facts, placed)), (DEGRADED, degraded)]
    if step is not None:
        verdicts.append((DELETING, _deleting(facts, step)))
    if facts.per_gpu_faults is not None:
        verdicts.append((PER_GPU_FAULTS, _per_gpu_faults(facts.per_gpu_faults)))
    conditions = tuple(
        _condition(kind, verdict, facts=facts, previous=previous, now=now)
        for kind, verdict in verdicts
    )
    cliques = clique_entries(placed)
    one = cliques[0] if len(cliques) == 1 else None  # clique and channel of a one-clique domain
    # Gang units in one clique each have a channel of their own: then there is no one channel.
    one_channel = len({piece.spec.channel for piece in placed.slices}) == 1
    status = ComputeDomainStatus(
        status="Ready" if ready.status == "True" else "NotReady",
        nodes=node_entries(placed),
        conditions=conditions,
        observed_generation=facts.generation,
        clique=one.clique if one is not None else None,
        channel=one.channel if one is not None and one_channel else None,
        cliques=cliques,
    )
    reason = _deleting(facts, step).reason if step is not None else ready.reason
    return Assessment(
        status=status,
        phase=_phase(facts, ready, degraded),
        reason=reason,
        members=tuple(event_member(m) for m in placed.nodes),
        slices=tuple(event_slice(piece) for piece in placed.slices),
        size=placement.size + placement.channel_only if placement is not None else facts.gang_size,
        deletion=step,
    )
