"""The allocator's own instruments, registered in the service's registry.

Labels are low-cardinality: webhook names, results and reasons; never a domain or node name.
The instruments every controller has (reconciles, work queues, informers) are shared/metrics.py's.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from shared.metrics import LATENCY_BUCKETS, Metrics


class AllocatorMetrics:
    """Admissions, conversions, placement decisions and waiting gangs of one allocator
    replica."""

    def __init__(self, metrics: Metrics) -> None:
        r = metrics.registry
        self.admissions = Counter(
            "cdo_admissions",
            "Admission reviews answered, by webhook and result (gated, passed, undecided: let "
            "through ungated because the caches or the API could not tell, error).",
            ["webhook", "result"],
            registry=r,
        )
        self.admission_seconds = Histogram(
            "cdo_admission_seconds",
            "Time to answer one pod AdmissionReview (decode, caches or API, answer).",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.conversions = Counter(
            "cdo_conversions",
            "ComputeDomain ConversionReviews answered, by result (converted, refused, error).",
            ["result"],
            registry=r,
        )
        self.placement_decisions = Counter(
            "cdo_placement_decisions",
            "Placement decisions: a record written (Recorded) or a gang left waiting (its reason).",
            ["result"],
            registry=r,
        )
        self.placement_decision_seconds = Histogram(
            "cdo_placement_decision_seconds",
            "Time one placement decision took, view rebuild included.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.breaker_rulings = Counter(
            "cdo_breaker_rulings",
            "Answers of the circuit breaker's arbiter to the health monitors' records, by "
            "result (granted, refused, offered: room for a node held back).",
            ["result"],
            registry=r,
        )
        self.waiting_gangs = Gauge(
            "cdo_waiting_gangs",
            "Domains with pods the allocator cannot place now.",
            registry=r,
        )
