"""The controller's gauges of the cluster's domains, read from the ComputeDomain cache when
scraped (so they cost nothing between scrapes):

- ``cdo_domains{phase}``: domains by the phase their recorded conditions give (the phases of
  the membership events: Pending, Placed, Ready, Degraded, NotReady, Deleting);
- ``cdo_domains_degraded_longest_seconds``: how long the domain Degraded the longest has been
  (its Degraded condition's lastTransitionTime), 0 when none is.

Every replica keeps the cache, leader or not, so each reports the same values: aggregate with
``max``, not ``sum``. No label names a domain.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from shared.crds.computedomain import ComputeDomain

PHASES = ("Pending", "Placed", "Ready", "Degraded", "NotReady", "Deleting")
TEMPLATE_CONFLICT = "TemplateNameConflict"


def phase_of(domain: ComputeDomain) -> str:
    """The phase a domain's recorded status says (the controller's ``_phase`` read back)."""
    if domain.metadata.deletion_timestamp is not None:
        return "Deleting"
    status = domain.status
    ready = status.condition("Ready")
    if ready is not None and ready.status == "False" and ready.reason == TEMPLATE_CONFLICT:
        return "NotReady"
    placed = status.condition("Placed")
    if placed is None or placed.status != "True":
        return "Pending"
    degraded = status.condition("Degraded")
    if degraded is not None and degraded.status == "True":
        return "Degraded"
    if ready is not None and ready.status == "True":
        return "Ready"
    return "Placed"


def longest_degraded_s(domains: Iterable[ComputeDomain], *, now: datetime) -> float:
    """Seconds since the oldest Degraded=True transition among ``domains`` (0: none)."""
    longest = 0.0
    for domain in domains:
        degraded = domain.status.condition("Degraded")
        if degraded is None or degraded.status != "True":
            continue
        if domain.metadata.deletion_timestamp is not None:
            continue
        longest = max(longest, (now - degraded.last_transition_time).total_seconds())
    return longest


class DomainGauges(Collector):
    """Collects the gauges above from ``domains()`` at every scrape."""

    def __init__(
        self,
        domains: Callable[[], list[ComputeDomain]],
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._domains = domains
        self._now = now

    def describe(self) -> Iterator[GaugeMetricFamily]:
        # Described without reading the cache, so registering costs nothing.
        yield from self._families([])

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from self._families(self._domains())

    def _families(self, domains: list[ComputeDomain]) -> Iterator[GaugeMetricFamily]:
        counts = Counter(phase_of(domain) for domain in domains)
        by_phase = GaugeMetricFamily(
            "cdo_domains", "ComputeDomains by phase, from this replica's cache.", labels=["phase"]
        )
        for phase in PHASES:
            by_phase.add_metric([phase], counts.get(phase, 0))
        yield by_phase
        yield GaugeMetricFamily(
            "cdo_domains_degraded_longest_seconds",
            "How long the domain Degraded the longest has been Degraded (0: none is).",
            value=longest_degraded_s(domains, now=self._now()),
        )
