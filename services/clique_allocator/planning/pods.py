"""A domain's live pods as the plan sees them: gated pods the record already seats (pinned
again) and gated pods it does not (waiting for a seat)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from services.clique_allocator.objects import gated
from services.clique_allocator.planning.hold import waited
from services.clique_allocator.planning.outcome import Pin
from shared.crds.placement import PlacementSpec
from shared.kube.models import Pod


class DomainPods(msgspec.Struct, frozen=True, kw_only=True):
    """The domain's live pods, split by what the plan does with them."""

    by_name: Mapping[str, Pod]
    repins: tuple[Pin, ...]
    """Pods the record seats that still carry the gate: pin them again."""
    waiting: tuple[Pod, ...]
    """Gated pods the record does not seat."""


def sort_pods(live: Sequence[Pod], placement: PlacementSpec | None) -> DomainPods:
    """The live pods split by whether the record seats them."""
    seated = {
        pod.name: (member.node, pod.uid)
        for piece in (placement.all_slices if placement is not None else ())
        for member in piece.members
        for pod in member.pods
    }

    def seat_of(pod: Pod) -> str | None:
        """The node the record seats this very pod on (not an earlier pod of its name)."""
        node, uid = seated.get(pod.metadata.name, ("", ""))
        return node if node and (not uid or uid == pod.metadata.uid) else None

    usable = [pod for pod in live if pod.metadata.deletion_timestamp is None]
    repins = tuple(
        Pin(pod=pod.metadata.name, node=node, waited=waited(pod))
        for pod in sorted(usable, key=lambda p: p.metadata.name)
        if gated(pod) and (node := seat_of(pod)) is not None
    )
    waiting = tuple(pod for pod in usable if gated(pod) and seat_of(pod) is None)
    return DomainPods(
        by_name={pod.metadata.name: pod for pod in live}, repins=repins, waiting=waiting
    )
