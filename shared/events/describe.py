"""One-line, human-readable summaries of events, for terminals (demo, CLI, logs)."""

from __future__ import annotations

from functools import singledispatch

from shared.events.base import Event
from shared.events.catalog import (
    CliqueCapacity,
    DomainMembershipChanged,
    NodeFault,
    NodeImexState,
    NodeRecovered,
)


@singledispatch
def describe(event: Event) -> str:
    """A short summary of ``event``; unknown types fall back to their type and subject."""
    return f"{event.ce_type()} {event.ce_subject()}"


def _where(event: DomainMembershipChanged) -> str:
    """`` clique=X channel=N`` for a domain in one clique; `` slices=N cliques=A:chN,B:chM``
    for one whose slices use several (each clique once, in slice order)."""
    if event.clique:
        return f" clique={event.clique} channel={event.channel}"
    if not event.slices:
        return ""
    channels: dict[str, int] = {}
    for piece in event.slices:
        channels.setdefault(piece.clique, piece.channel)
    cliques = ",".join(f"{clique}:ch{channel}" for clique, channel in channels.items())
    return f" slices={len(event.slices)} cliques={cliques}"


@describe.register
def _(event: DomainMembershipChanged) -> str:
    ready = sum(1 for member in event.members if member.status == "Ready")
    why = f" ({event.reason})" if event.reason else ""
    return (
        f"domain {event.namespace}/{event.name} {event.phase}{_where(event)} "
        f"members={len(event.members)} ready={ready}{why}"
    )


@describe.register
def _(event: CliqueCapacity) -> str:
    return (
        f"clique {event.clique} gpus free {event.gpus_free}/{event.gpus_total} "
        f"nodes={len(event.nodes)} domains={event.domains}"
    )


@describe.register
def _(event: NodeFault) -> str:
    code = f" {event.code}" if event.code else ""
    return f"node {event.node} FAULT {event.signal}{code} {event.severity} -> {event.action}" + (
        f": {event.message}" if event.message else ""
    )


@describe.register
def _(event: NodeRecovered) -> str:
    return f"node {event.node} recovered ({', '.join(event.signals) or 'all signals'})"


@describe.register
def _(event: NodeImexState) -> str:
    return (
        f"node {event.node} imex daemon={event.daemon_state} domain={event.domain_state} "
        f"peers={len(event.peers)}"
    )
