"""What to do for one domain, decided from its record, its pods and the cluster (pure).

``plan_domain`` is the allocator's reconcile without I/O. From the domain's Placement (the
record), its pods, the size of its gang and the engine's view of the cluster it answers:

1. **release** what the domain no longer needs: a recorded pod that is gone or finished frees
   its slot, and so does one evicted from a node that takes no new pods (it may stay
   Terminating as long as the node is down; its GPUs then count as held outside); unpinned
   slots on nodes that take no new pods (fault, NotReady, cordoned, out of the clique) are
   dropped; slots beyond the gang's size are dropped, from the nodes with the fewest pinned pods
   first, then the highest slot. Other pinned pods keep their slots while they live;
2. **reserve** the rest of the gang through the engine (``placement.place``): the whole gang in
   one clique when the domain has no record yet, more slots in its own clique when it grows or a
   pod is replaced (a domain never moves cliques);
3. **pin** gated pods, by name, to the free slots in slot order; the record names each pod's
   node before the pod is patched, so a pinned pod is never forgotten;
4. **hold** gated pods that got no slot, with the engine's reason (or ``GangComplete`` when the
   gang already has every slot it wants), as condition ``cdo.dev/Placed=False`` on the pod.

A domain being deleted keeps its record while pods still use its claims and loses it (``delete``)
once none does; a domain that is gone loses it at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec

from services.clique_allocator.gang import GangSize, GpuCount, UnknownSize, gpus_per_pod
from services.clique_allocator.objects import finished, gated
from services.clique_allocator.placement import (
    ClusterView,
    GangRequest,
    NodeShare,
    NodeState,
    NotPlaced,
    Reservation,
    place,
)
from services.clique_allocator.records import record_of, slots_by_node
from shared.crds.computedomain import ComputeDomain
from shared.crds.names import GPU_RESOURCE, PLACED_CONDITION
from shared.crds.placement import PlacementSpec
from shared.kube.models import Pod

GANG_COMPLETE = "GangComplete"
INVALID_REQUEST = "InvalidRequest"
PLACED = "Placed"

NoticeType = Literal["Normal", "Warning"]
Action = Literal["keep", "write", "delete"]


class Pin(msgspec.Struct, frozen=True, kw_only=True):
    """Pin ``pod`` to ``node`` and remove its gate; ``waited``: it carries a False condition."""

    pod: str
    node: str
    waited: bool = False


class Hold(msgspec.Struct, frozen=True, kw_only=True):
    """Keep ``pod`` gated; set its ``cdo.dev/Placed`` condition to False with this reason."""

    pod: str
    reason: str
    message: str


class Notice(msgspec.Struct, frozen=True, kw_only=True):
    """A Kubernetes Event to record on the ComputeDomain."""

    type: NoticeType
    reason: str
    message: str


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    """Everything one reconcile of a domain does."""

    action: Action = "keep"
    record: PlacementSpec | None = None
    """The record to write when ``action`` is ``write``."""
    reservation: Reservation | None = None
    """The engine's reservation matching ``record``, to advance the view with."""
    pins: tuple[Pin, ...] = ()
    holds: tuple[Hold, ...] = ()
    notices: tuple[Notice, ...] = ()
    waiting: bool = False
    """Some of the domain's pods wait for capacity: try again when capacity changes."""
    released: bool = False
    """The domain gives GPUs back: gangs that wait may fit now."""
    unknown_size: bool = False
    """The gang's size cannot be told yet: look again soon."""


def _pods_of(count: int, gpus: int) -> str:
    return f"{count} pod{'' if count == 1 else 's'} of {gpus} GPU{'' if gpus == 1 else 's'}"


def _condition_is(pod: Pod, *, status: str, reason: str, message: str) -> bool:
    condition = pod.condition(PLACED_CONDITION)
    return (
        condition is not None
        and condition.status == status
        and condition.reason == reason
        and condition.message == message
    )


def _waited(pod: Pod) -> bool:
    condition = pod.condition(PLACED_CONDITION)
    return condition is not None and condition.status == "False"


def _hold(pod: Pod, reason: str, message: str) -> Hold | None:
    """A hold for ``pod``, unless its condition already says exactly that."""
    if _condition_is(pod, status="False", reason=reason, message=message):
        return None
    return Hold(pod=pod.metadata.name, reason=reason, message=message)


def _holds(pods: Sequence[Pod], reason: str, message: str) -> tuple[Hold, ...]:
    return tuple(hold for pod in pods if (hold := _hold(pod, reason, message)) is not None)


def _clique_nodes(view: ClusterView, clique: str) -> dict[str, NodeState]:
    state = view.clique(clique)
    return {} if state is None else {node.name: node for node in state.nodes}


def plan_domain(
    *,
    key: str,
    domain: ComputeDomain | None,
    placement: PlacementSpec | None,
    pods: Sequence[Pod],
    gang: GangSize | UnknownSize,
    view: ClusterView,
) -> Plan:
    """The plan for one domain; see the module docstring. ``pods`` use the domain's claims."""
    live = [pod for pod in pods if not finished(pod)]
    if domain is None or (domain.deleting and not live):
        if placement is None:
            return Plan()
        farewell = (
            ()
            if domain is None
            else (Notice(type="Normal", reason="PlacementDeleted", message=_deleted(placement)),)
        )
        return Plan(action="delete", released=True, notices=farewell)
    if domain.deleting:
        return Plan()  # pods still use the domain's claims: hold everything until they end

    recorded = {pod: m.node for m in placement.members for pod in m.pods} if placement else {}
    nodes_now = _clique_nodes(view, placement.clique) if placement is not None else {}

    def usable(node: str) -> bool:
        state = nodes_now.get(node)
        return state is not None and state.usable

    by_name = {pod.metadata.name: pod for pod in live}
    pinned: dict[str, list[str]] = {}
    for name, node in recorded.items():
        pod = by_name.get(name)
        if pod is None:
            continue
        if pod.metadata.deletion_timestamp is not None and not usable(node):
            # Evicted from a failed node, it stays Terminating until the node returns: its
            # slot goes to the replacement; while it exists its GPUs count as held outside.
            continue
        pinned.setdefault(node, []).append(name)
    repins = tuple(
        Pin(pod=name, node=node, waited=_waited(by_name[name]))
        for name, node in sorted(recorded.items())
        if name in by_name
        and gated(by_name[name])
        and by_name[name].metadata.deletion_timestamp is None
    )
    waiting = sorted(
        (
            pod
            for pod in live
            if gated(pod)
            and pod.metadata.name not in recorded
            and pod.metadata.deletion_timestamp is None
        ),
        key=lambda pod: pod.metadata.name,
    )
    if placement is None and not waiting:
        return Plan(pins=repins)
    if isinstance(gang, UnknownSize):
        return Plan(pins=repins, unknown_size=True)

    holds: list[Hold] = []
    notices: list[Notice] = []
    if placement is not None:
        gpus = placement.gpus_per_pod
    else:
        counted = gpus_per_pod(waiting)
        if not isinstance(counted, GpuCount):
            message = "no pods" if counted is None else counted.message
            return Plan(
                pins=repins,
                holds=_holds(waiting, INVALID_REQUEST, message),
                notices=(Notice(type="Warning", reason=INVALID_REQUEST, message=message),),
            )
        gpus = counted.gpus
    mismatched = [pod for pod in waiting if pod.gpus(GPU_RESOURCE) != gpus]
    if mismatched:
        message = f"the domain's pods take {gpus} GPUs each; this pod asks for a different number"
        holds.extend(_holds(mismatched, INVALID_REQUEST, message))
        waiting = [pod for pod in waiting if pod.gpus(GPU_RESOURCE) == gpus]

    # 1. release
    pinned_count = {node: len(names) for node, names in pinned.items()}
    before = slots_by_node(placement) if placement is not None else {}
    reserved: dict[str, int] = {}
    for node, slots in before.items():
        keep = slots if usable(node) else 0
        reserved[node] = max(keep, pinned_count.get(node, 0))
    for node, count in pinned_count.items():
        reserved[node] = max(reserved.get(node, 0), count)
    target = max(gang.pods, sum(pinned_count.values()))
    excess = sum(reserved.values()) - target
    if excess > 0:
        order = sorted(
            reserved,
            key=lambda node: (
                pinned_count.get(node, 0),
                -(nodes_now[node].slot if node in nodes_now else 0),
                node,
            ),
        )
        for node in order:
            spare = reserved[node] - pinned_count.get(node, 0)
            take = min(spare, excess)
            reserved[node] -= take
            excess -= take
            if excess == 0:
                break

    # 2. reserve
    held: Reservation | None = None
    if placement is not None:
        held = Reservation(
            domain=key,
            clique=placement.clique,
            channel=placement.channel,
            gpus_per_pod=gpus,
            shares=tuple(
                NodeShare(node=node, pods=count)
                for node, count in sorted(reserved.items())
                if count > 0
            ),
        )
    not_placed: NotPlaced | None = None
    if target > sum(reserved.values()):
        num_nodes = domain.spec.num_nodes or None
        decision = place(
            view.with_domain(key, [held] if held is not None else []),
            GangRequest(domain=key, pods=target, gpus_per_pod=gpus, num_nodes=num_nodes),
        )
        if isinstance(decision, NotPlaced):
            not_placed = decision
        else:
            held = decision.reservations[0]

    if held is None:
        assert not_placed is not None
        held_back = _holds(waiting, not_placed.reason, not_placed.message)
        return Plan(
            pins=repins,
            holds=(*holds, *held_back),
            notices=_not_placed_notice(not_placed, held_back),
            waiting=True,
        )

    # 3. pin
    nodes_now = _clique_nodes(view, held.clique)
    slots_of = {m.node: m.slot for m in placement.members} if placement is not None else {}
    slots_of.update({name: state.slot for name, state in nodes_now.items()})
    free: list[str] = []
    for share in sorted(held.shares, key=lambda s: (slots_of.get(s.node, 0), s.node)):
        free.extend([share.node] * (share.pods - pinned_count.get(share.node, 0)))
    pins = list(repins)
    assigned = {node: list(names) for node, names in pinned.items()}
    for pod, node in zip(waiting, free, strict=False):
        pins.append(Pin(pod=pod.metadata.name, node=node, waited=_waited(pod)))
        assigned.setdefault(node, []).append(pod.metadata.name)

    # 4. hold
    left = waiting[len(free) :]
    if left:
        if not_placed is not None:
            held_back = _holds(left, not_placed.reason, not_placed.message)
            holds.extend(held_back)
            notices.extend(_not_placed_notice(not_placed, held_back))
        else:
            message = (
                f"the gang's {gang.pods} pod slots ({gang.source}) are all taken; "
                "this pod waits for one of them to end"
            )
            holds.extend(_holds(left, GANG_COMPLETE, message))

    record = record_of(held, size=gang.pods, pods_by_node=assigned, slots=slots_of)
    after = slots_by_node(record)
    released = any(after.get(node, 0) < slots for node, slots in before.items())
    notices.extend(_change_notices(placement, record))
    return Plan(
        action="keep" if record == placement else "write",
        record=record,
        reservation=held,
        pins=tuple(pins),
        holds=tuple(holds),
        notices=tuple(notices),
        waiting=bool(left) and not_placed is not None,
        released=released,
    )


def _not_placed_notice(decision: NotPlaced, held_back: Sequence[Hold]) -> tuple[Notice, ...]:
    """A Warning when pods learn the reason now (not again on every retry)."""
    if not held_back:
        return ()
    return (Notice(type="Warning", reason=decision.reason, message=decision.message),)


def _total_slots(spec: PlacementSpec) -> int:
    return sum(slots_by_node(spec).values())


def _change_notices(before: PlacementSpec | None, after: PlacementSpec) -> list[Notice]:
    slots = _total_slots(after)
    where = (
        f"{len(after.members)} node{'' if len(after.members) == 1 else 's'} of clique "
        f"{after.clique}, channel {after.channel}"
    )
    if before is None:
        message = f"reserved {_pods_of(slots, after.gpus_per_pod)} on {where}"
        return [Notice(type="Normal", reason="Reserved", message=message)]
    old = _total_slots(before)
    if slots > old:
        message = (
            f"reserved {_pods_of(slots - old, after.gpus_per_pod)} more; {slots} slots on {where}"
        )
        return [Notice(type="Normal", reason="Grown", message=message)]
    if slots < old:
        return [
            Notice(
                type="Normal",
                reason="Shrunk",
                message=f"released {old - slots} pod slot{'' if old - slots == 1 else 's'}; "
                f"{slots} left on {where}",
            )
        ]
    return []


def _deleted(placement: PlacementSpec) -> str:
    return (
        f"no pod uses the domain's claims any more: released {_total_slots(placement)} pod "
        f"slots in clique {placement.clique} and channel {placement.channel}"
    )
