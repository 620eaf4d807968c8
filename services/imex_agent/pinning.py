"""Whether a claim's pod is a member the allocator pinned for a domain on this node (pure).

A domain's channel goes to one pod: the one the claim's ``status.reservedFor`` names, and only
when the domain's Placement seats **that very pod** (same name, same uid) on **this node**, in a
slice of this node's clique, with a rank or among the slice's pods that ask for no GPU (which
hold no rank). What the claim's labels say picks which Placement is asked; they
never make a pod a member. The rule, in order, with the refusal's reason:

==================  ===========================================================================
``NoPod``           ``reservedFor`` names no pod
``SharedClaim``     it names several: a channel claim serves one pod
``NoClique``        this node has no NVLink clique
``NotPinned``       the Placement seats no pod of that name (a pod of another domain, or one
                    the allocator never placed)
``SeatWithoutUid``  the seat predates uids in the record; the allocator adds the uid at its next
                    reconcile, and a retry succeeds then
``OtherPod``        the seat is for another pod of that name (a pod recreated under the name:
                    its own seat, once the allocator gives it one, is what counts)
``PinnedElsewhere`` the pod is pinned to another node
``OtherClique``     the pod's slice is in another clique than this node's
==================  ===========================================================================

Every refusal is of the claim as things are now: the kubelet retries a failed prepare, and the
retry that finds the pod seated here gets the channel (the Placement may be written after the
kubelet first asks). ``reservedFor`` is written by the scheduler through the status subresource,
and the kubelet prepares a claim only for a pod of its node that ``reservedFor`` names; the
agent reads no Pod.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import msgspec

from services.imex_agent.cdi import SliceSeat
from shared.crds.placement import PlacedPod, PlacementSlice, PlacementSpec
from shared.crds.placement import PodRef as PlacementPodRef
from shared.kube.models import ResourceClaimConsumerReference


class Seating(NamedTuple):
    """Where the Placement seats a pod: its slice, its node, and its entry (with its rank, or
    without one for a pod that asks for no GPU)."""

    piece: PlacementSlice
    node: str
    pod: PlacedPod | PlacementPodRef

    @property
    def seat(self) -> SliceSeat:
        if not isinstance(self.pod, PlacedPod):
            return SliceSeat(clique=self.piece.clique, index=self.piece.index, size=self.piece.size)
        return SliceSeat(
            clique=self.piece.clique,
            index=self.piece.index,
            size=self.piece.size,
            rank=self.pod.rank,
            slice_rank=self.piece.rank_in_slice(self.pod.rank),
        )


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    """Why the pod gets no channel: a reason (one word, for logs) and a message for its events."""

    reason: str
    message: str


class PodRef(msgspec.Struct, frozen=True, kw_only=True):
    """The pod a claim is reserved for."""

    name: str
    uid: str

    def __str__(self) -> str:
        return f"pod {self.name} (uid {self.uid})"


def reserving_pods(consumers: Sequence[ResourceClaimConsumerReference]) -> tuple[PodRef, ...]:
    """The pods among a claim's ``status.reservedFor`` entries, in their order."""
    return tuple(
        PodRef(name=ref.name, uid=ref.uid)
        for ref in consumers
        if ref.resource == "pods" and not ref.api_group
    )


def seatings(spec: PlacementSpec, *, pod: str) -> tuple[Seating, ...]:
    """Every place the record seats a pod named ``pod`` (one, or none), in either shape, with a
    rank or among the pods that ask for no GPU."""
    return tuple(Seating(*seat) for seat in spec.seats_of(pod))


def pinned_here(
    *,
    consumers: Sequence[ResourceClaimConsumerReference],
    spec: PlacementSpec,
    claim: str,
    domain: str,
    node: str,
    clique: str | None,
) -> Seating | Refusal:
    """The seat of the claim's pod on ``node``, or why it has none (the module docstring).

    ``claim`` and ``domain`` name the claim and its domain in messages ("ResourceClaim ns/c",
    "ComputeDomain ns/d").
    """
    pods = reserving_pods(consumers)
    if not pods:
        return Refusal(
            reason="NoPod",
            message=f"{claim} of {domain} on node {node} is reserved for no pod "
            "(status.reservedFor): a channel goes only to a pod the allocator placed",
        )
    if len(pods) > 1:
        return Refusal(
            reason="SharedClaim",
            message=f"{claim} of {domain} on node {node} is reserved for {len(pods)} pods "
            f"({', '.join(pod.name for pod in pods)}); a channel claim serves one pod",
        )
    (pod,) = pods
    if clique is None:
        return Refusal(
            reason="NoClique", message=f"node {node} has no NVLink clique; it cannot join a domain"
        )
    found = seatings(spec, pod=pod.name)
    if not found:
        return Refusal(
            reason="NotPinned",
            message=f"{pod} is not a member of {domain}: the allocator pinned no pod of that "
            f"name for it, so {claim} gets no channel on node {node}",
        )
    seating = next((s for s in found if s.pod.uid == pod.uid and s.node == node), found[0])
    if not seating.pod.uid:
        return Refusal(
            reason="SeatWithoutUid",
            message=f"{domain}'s Placement seats pod {pod.name} without a uid (a record of an "
            "earlier release); retriable: the channel is given once the allocator records the "
            "pod's uid",
        )
    if seating.pod.uid != pod.uid:
        return Refusal(
            reason="OtherPod",
            message=f"{pod} is not the pod the allocator pinned as {pod.name} for {domain} "
            f"(that one has uid {seating.pod.uid}), so {claim} gets no channel on node {node}",
        )
    if seating.node != node:
        return Refusal(
            reason="PinnedElsewhere",
            message=f"{pod} is pinned to node {seating.node} for {domain}, not to node {node}: "
            f"{claim} gets no channel here",
        )
    piece = seating.piece
    if piece.clique != clique:
        return Refusal(
            reason="OtherClique",
            message=f"pod {pod.name} is placed in slice {piece.index} of {domain}, which is in "
            f"clique {piece.clique!r}; node {node} is in clique {clique!r}",
        )
    return seating
