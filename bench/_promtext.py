"""Figures read from a service's Prometheus text (its ``/metrics``), as a scraper computes them:
a counter's sum over its series, and a histogram's quantile the way PromQL's
``histogram_quantile`` interpolates it within a bucket.
"""

from __future__ import annotations

import math
import urllib.request
from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families

SCRAPE_TIMEOUT_S = 10.0


def scrape(url: str) -> str:
    """The Prometheus text at ``url``."""
    with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as response:
        return str(response.read().decode())


def counter_sum(text: str, name: str) -> float:
    """The sum of every series of counter ``name`` (its ``_total`` samples)."""
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == name
        for sample in family.samples
        if sample.name == f"{name}_total"
    )


def gauge_value(text: str, name: str, labels: Mapping[str, str] | None = None) -> float | None:
    """The value of gauge ``name``'s first series with ``labels`` (any series when none are
    given); None when there is no such series."""
    wanted = labels or {}
    for family in text_string_to_metric_families(text):
        if family.name != name:
            continue
        for sample in family.samples:
            if all(sample.labels.get(key) == value for key, value in wanted.items()):
                return float(sample.value)
    return None


def histogram_buckets(text: str, name: str) -> list[tuple[float, float]]:
    """Histogram ``name``'s cumulative buckets, ``(upper bound, count)`` in order, summed over
    its series."""
    counts: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != name:
            continue
        for sample in family.samples:
            if sample.name == f"{name}_bucket":
                bound = float(sample.labels["le"])
                counts[bound] = counts.get(bound, 0.0) + sample.value
    return sorted(counts.items())


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """The ``q`` quantile of cumulative ``buckets`` as PromQL's ``histogram_quantile`` gives it:
    linear within the bucket it falls in (from 0 for the first); the highest finite bound when
    it falls in ``+Inf``; NaN with no observations."""
    if not buckets or buckets[-1][1] == 0:
        return math.nan
    rank = q * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (
                count - lower_count
            )
        lower_bound, lower_count = bound, count
    return lower_bound
