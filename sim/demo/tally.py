"""The events the demo saw on NATS: counted by type, the notable ones turned into lines.

Notable are every fault and recovery, and a membership event of the domain the story follows
whose phase differs from the one before (the domain controller publishes one on every member
change; the phase changes are the story). The story follows the seed domain, then the domain of
its multi-clique act (:meth:`Tally.follow`). Pure: the NATS side is :mod:`sim.demo.eventfeed`.
"""

from __future__ import annotations

from collections import Counter

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

    def follow(self, *, namespace: str, domain: str) -> None:
        """From now on show the phase changes of this domain (and no longer the previous one's)."""
        self._namespace = namespace
        self._domain = domain
        self._phase = None

    def record(self, event: Event) -> str | None:
        """Count ``event``; the line to show if it is notable."""
        self.counts[short_type(event)] += 1
        if isinstance(event, NodeFault | NodeRecovered):
            return event_line(event)
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
