"""Prometheus instruments of one service, in a registry of its own.

Each service (and each simulated per-node service hosted in one process) owns a Metrics object,
so two services in one process never mix their counters. Label values are low-cardinality:
event types, drop reasons, controller names; never object names.

Here are the instruments more than one service uses (the bus, reconcile loops, work queues,
informers, handled errors); a service's own instruments live in its ``metrics`` module and
register in the same registry.
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

# The *_created series double every counter for little use; scrapers do not need them.
disable_created_metrics()  # type: ignore[no-untyped-call]

# Buckets in seconds, from sub-millisecond message handling to multi-second reconciles.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class Metrics:
    """The instruments every cdo service shares, and the registry its own ones join."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.messages_published = Counter(
            "cdo_bus_messages_published",
            "Events published on the bus, by CloudEvent type.",
            ["type"],
            registry=r,
        )
        self.publish_errors = Counter(
            "cdo_bus_publish_errors",
            "Publishes that failed, by CloudEvent type.",
            ["type"],
            registry=r,
        )
        self.messages_received = Counter(
            "cdo_bus_messages_received",
            "Events received and handed to a handler, by CloudEvent type.",
            ["type"],
            registry=r,
        )
        self.messages_dropped = Counter(
            "cdo_bus_messages_dropped",
            "Incoming messages dropped, by reason (malformed, unknown_type, missing_header, "
            "handler_error ...).",
            ["reason"],
            registry=r,
        )
        self.handle_seconds = Histogram(
            "cdo_bus_handle_seconds",
            "Time a handler took for one event, by CloudEvent type.",
            ["type"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.reconciles = Counter(
            "cdo_reconciles",
            "Reconciles run, by controller and result (ok, requeue, error, terminal).",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_seconds = Histogram(
            "cdo_reconcile_seconds",
            "Time one reconcile took, by controller.",
            ["controller"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "cdo_errors",
            "Errors a service handled without stopping, by component.",
            ["component"],
            registry=r,
        )
        # Work queues (shared/kube/workqueue.py); the label is the queue's name, unique per service.
        # The gauges are read from the queue when scraped, so they cost nothing between scrapes.
        self.workqueue_depth = Gauge(
            "cdo_workqueue_depth",
            "Keys ready and waiting for a worker, by queue.",
            ["queue"],
            registry=r,
        )
        self.workqueue_adds = Counter(
            "cdo_workqueue_adds",
            "Adds that scheduled work (not coalesced into a key already waiting), by queue.",
            ["queue"],
            registry=r,
        )
        self.workqueue_retries = Counter(
            "cdo_workqueue_retries",
            "Rate-limited re-adds after a failed attempt, by queue.",
            ["queue"],
            registry=r,
        )
        self.workqueue_queue_seconds = Histogram(
            "cdo_workqueue_queue_seconds",
            "Time a key waited, once ready, before a worker took it, by queue.",
            ["queue"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.workqueue_work_seconds = Histogram(
            "cdo_workqueue_work_seconds",
            "Time from a worker taking a key to marking it done, by queue.",
            ["queue"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.workqueue_unfinished_work_seconds = Gauge(
            "cdo_workqueue_unfinished_work_seconds",
            "Sum of the time keys now being processed have been running, by queue; growth "
            "without completions means stuck workers.",
            ["queue"],
            registry=r,
        )
        self.workqueue_longest_running_seconds = Gauge(
            "cdo_workqueue_longest_running_seconds",
            "How long the longest-running key now being processed has been running, by queue.",
            ["queue"],
            registry=r,
        )
        # Informers (shared/kube/informer.py); the label is the resource's plural.
        self.informer_events = Counter(
            "cdo_informer_events",
            "Watch events applied to an informer's cache, by resource and type.",
            ["resource", "type"],
            registry=r,
        )
        self.informer_lists = Counter(
            "cdo_informer_lists",
            "Full LISTs an informer made, by resource and reason (start, expired, error).",
            ["resource", "reason"],
            registry=r,
        )
        self.informer_handler_errors = Counter(
            "cdo_informer_handler_errors",
            "Event handlers that raised (the informer keeps running), by resource.",
            ["resource"],
            registry=r,
        )

    def exposition(self) -> bytes:
        """The registry in Prometheus text format."""
        return bytes(generate_latest(self.registry))
