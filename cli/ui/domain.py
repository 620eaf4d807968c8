"""One domain's view, when the page picks it: its slices with their ranks, nodes and channel
per clique, its conditions and what ``cdo explain`` says about them, its recent events.

The domain, its Placement, the nodes and every Placement come from the informers' caches; its
namespace's pods and Events are read when the view is asked for (the page asks again when the
domain, its Placement or the feed says something changed), so the UI does not watch every pod
and Event of the cluster. The explanation is :func:`cli.explain.explain.explain`, the one
``cdo explain`` prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from cli.explain.collect import KubeEvents, domain_facts
from cli.explain.explain import Explanation, explain
from cli.reads import Pods
from cli.ui.feed import FeedEntry
from shared.crds import ComputeDomain, Placement
from shared.kube.client import KubeClient
from shared.kube.models import Node
from shared.kube.resources import EVENTS, PODS


class SeatView(msgspec.Struct, frozen=True, kw_only=True):
    node: str
    slot: int
    gpus: int
    pods: tuple[tuple[str, int], ...]
    """``(pod, rank in the gang)``, by rank."""
    channel_only: tuple[str, ...] = ()


class SliceView(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    clique: str
    channel: int
    unit: str
    first_rank: int
    size: int
    seats: tuple[SeatView, ...]


class ConditionView(msgspec.Struct, frozen=True, kw_only=True):
    type: str
    status: str
    reason: str
    message: str


class DomainView(msgspec.Struct, frozen=True, kw_only=True):
    namespace: str
    name: str
    phase: str
    conditions: tuple[ConditionView, ...]
    slices: tuple[SliceView, ...]
    explanation: Explanation
    feed: tuple[FeedEntry, ...] = ()


def slices_of(placement: Placement | None) -> tuple[SliceView, ...]:
    if placement is None:
        return ()
    return tuple(
        SliceView(
            index=piece.index,
            clique=piece.clique,
            channel=piece.channel,
            unit=piece.unit,
            first_rank=piece.first_rank,
            size=piece.size,
            seats=tuple(
                SeatView(
                    node=member.node,
                    slot=member.slot,
                    gpus=member.gpus,
                    pods=tuple(sorted(((p.name, p.rank) for p in member.pods), key=lambda p: p[1])),
                    channel_only=tuple(ref.name for ref in member.channel_only_pods),
                )
                for member in piece.members
            ),
        )
        for piece in sorted(placement.spec.all_slices, key=lambda p: p.index)
    )


def domain_view(
    domain: ComputeDomain,
    *,
    placement: Placement | None,
    pods: Sequence[object],
    nodes: Sequence[Node],
    placements: Sequence[Placement],
    events: Sequence[object],
    feed: Iterable[FeedEntry] = (),
) -> DomainView:
    """The view of ``domain`` from what was read (pure)."""
    facts = domain_facts(
        domain,
        placement=placement,
        pods=pods,  # type: ignore[arg-type]
        nodes=nodes,
        placements=placements,
        events=events,  # type: ignore[arg-type]
    )
    explanation = explain(facts)
    phase = facts.phase
    key = domain.key
    return DomainView(
        namespace=domain.metadata.namespace,
        name=domain.metadata.name,
        phase=phase,
        conditions=tuple(
            ConditionView(type=c.type, status=c.status, reason=c.reason, message=c.message)
            for c in domain.status.conditions
        ),
        slices=slices_of(placement),
        explanation=explanation,
        feed=tuple(entry for entry in feed if entry.domain == key)[-20:],
    )


async def read_namespace(client: KubeClient, namespace: str) -> tuple[list[object], list[object]]:
    """The namespace's pods and Events, as ``cdo explain`` reads them."""
    pods = msgspec.json.decode(await client.list(PODS, namespace=namespace), type=Pods).items
    events = msgspec.json.decode(
        await client.list(EVENTS, namespace=namespace), type=KubeEvents
    ).items
    return list(pods), list(events)
