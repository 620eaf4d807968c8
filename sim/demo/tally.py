"""The events the demo saw on NATS: counted by type, the notable ones turned into lines.

Notable are every fault and recovery, and a membership event of the domain the story follows
whose phase differs from the one before (the domain controller publishes one on every member
change; the phase changes are the story). The story follows the seed domain, then the domain of
its multi-clique act (:meth:`Tally.follow`). A fault that hits a whole rack would fill the screen
with one line per GPU, so the story can name a group of nodes (:meth:`Tally.group`): of their
faults and recoveries only the first of each type is shown, the rest only counted
(:meth:`Tally.in_group`). Pure: the NATS side is :mod:`sim.demo.eventfeed`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from shared.events import Event
from shared.events.catalog import DomainMembershipChanged, NodeFault, NodeRecovered
from shared.events.describe import describe

TYPE_PREFIX = "dev.cdo.v1."


def short_type(event: Event) -> str:
    """``domain.membership`` for ``dev.cdo.v1.domain.membership``."""
    return event.ce_type().removeprefix(TYPE_PREFIX)


class Tally:
    def __init__(self, *, namespace: str, domain: str) -> None:
        self._namespace = namespace
        self._domain = domain
        self._phase: str | None = None
        self.counts: Counter[str] = Counter()
        self.undecodable = 0
        self._groups: dict[str, str] = {}
        self._grouped: Counter[tuple[str, str]] = Counter()

    def group(self, nodes: Iterable[str], name: str) -> None:
        """From now on show only the first fault and the first recovery of ``nodes``, as
        ``name``; count the others (:meth:`in_group`)."""
        for node in nodes:
            self._groups[node] = name

    def in_group(self, name: str, kind: str) -> int:
        """Events of type ``kind`` (e.g. ``node.fault``) counted for the group ``name``."""
        return self._grouped[(name, kind)]

    def follow(self, *, namespace: str, domain: str) -> None:
        """From now on show the phase changes of this domain (and no longer the previous one's)."""
        self._namespace = namespace
        self._domain = domain
        self._phase = None

    def record(self, event: Event) -> str | None:
        """Count ``event``; the line to show if it is notable."""
        kind = short_type(event)
        self.counts[kind] += 1
        if isinstance(event, NodeFault | NodeRecovered):
            group = self._groups.get(event.node)
            if group is None:
                return event_line(event)
            self._grouped[(group, kind)] += 1
            if self._grouped[(group, kind)] > 1:
                return None
            return f"{event_line(event)} (and the like from {group}: counted, not shown)"
        if (
            isinstance(event, DomainMembershipChanged)
            and (event.namespace, event.name) == (self._namespace, self._domain)
            and event.phase != self._phase
        ):
            self._phase = event.phase
            return event_line(event)
        return None

    @property
    def phase(self) -> str | None:
        """The followed domain's phase in its latest membership event since it was followed."""
        return self._phase

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def event_line(event: Event) -> str:
    return f"event {short_type(event):<17} {describe(event)}"


def counts_line(counts: Counter[str]) -> str:
    """``domain.membership 18, node.imex 129, ...``: most frequent first, ties by name."""
    if not counts:
        return "none"
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{kind} {count}" for kind, count in ordered)
