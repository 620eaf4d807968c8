"""Prometheus instruments of one service, in a registry of its own.

Each service (and each simulated per-node service hosted in one process) owns a Metrics object,
so two services in one process never mix their counters. Label values are low-cardinality:
event types, drop reasons, controller names; never object names.

Here are the instruments more than one service uses (the bus, reconcile loops, work queues,
leader election, informers, handled errors); a service's own instruments live in its ``metrics``
module and register in the same registry. Reconcile loops, work queues and leader election are
named and labelled as controller-runtime and client-go name theirs (``controller_runtime_*``,
``workqueue_*``, ``leader_election_master_status``), so dashboards and alerts written for Go
controllers work unchanged; everything else is ``cdo_*``.
"""

from __future__ import annotations

import platform

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from shared.version import version

# The *_created series double every counter for little use; scrapers do not need them.
disable_created_metrics()  # type: ignore[no-untyped-call]

# Buckets in seconds, from sub-millisecond message handling to multi-second reconciles.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
# client-go's work queue buckets: 10 ns to 1000 s, by factors of 10.
WORKQUEUE_BUCKETS = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1, 10, 100, 1000)
# controller-runtime's reconcile time buckets: 5 ms to 60 s.
RECONCILE_BUCKETS = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5),
    *(0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5),
    *(6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60),
)


class Metrics:
    """The instruments every cdo service shares, and the registry its own ones join.

    With ``service``, the registry also describes the process: ``cdo_build_info`` and the
    standard process, platform and garbage-collector collectors (``process_*``,
    ``python_info``, ``python_gc_*``), as every service's registry has them.
    """

    def __init__(
        self, registry: CollectorRegistry | None = None, *, service: str | None = None
    ) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        if service is not None:
            _describe_process(r, service=service)
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
        self.publish_acks = Counter(
            "cdo_bus_publish_acks",
            "Answers to published events, by result: stored, duplicate (the stream had it "
            "already), no_stream (no stream captures the subject), rejected, malformed.",
            ["result"],
            registry=r,
        )
        self.publish_retries = Counter(
            "cdo_bus_publish_retries",
            "Events sent again because the stream's ack did not arrive in time.",
            registry=r,
        )
        self.bus_connected = Gauge(
            "cdo_bus_connected",
            "1 while connected to NATS (the event feed is up), else 0.",
            registry=r,
        )
        self.outbox_events = Gauge(
            "cdo_bus_outbox_events",
            "Published events awaiting the stream's ack.",
            registry=r,
        )
        self.outbox_dropped = Counter(
            "cdo_bus_outbox_dropped",
            "Events dropped unacknowledged because the outbox was full.",
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
        # Reconcile loops (shared/kube/reconcile.py), named and labelled as controller-runtime
        # names them, so dashboards made for Go controllers work; the label is the loop's name.
        self.reconciles = Counter(
            "controller_runtime_reconcile_total",
            "Reconciles run, by controller and result (success, requeue_after, error; a "
            "terminal error counts as error).",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Reconciles that failed (retried with backoff, or terminal), by controller.",
            ["controller"],
            registry=r,
        )
        self.terminal_reconcile_errors = Counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Reconciles that failed for good (not retried), by controller.",
            ["controller"],
            registry=r,
        )
        self.reconcile_seconds = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Time one reconcile took, by controller.",
            ["controller"],
            buckets=RECONCILE_BUCKETS,
            registry=r,
        )
        self.max_concurrent_reconciles = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Workers of the reconcile loop, by controller.",
            ["controller"],
            registry=r,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Workers reconciling a key now, by controller.",
            ["controller"],
            registry=r,
        )
        self.errors = Counter(
            "cdo_errors",
            "Errors a service handled without stopping, by component.",
            ["component"],
            registry=r,
        )
        # Work queues (shared/kube/workqueue.py), named as client-go's work queue metrics; the
        # label ``name`` is the queue's name, unique per service. The gauges are read from the
        # queue when scraped, so they cost nothing between scrapes.
        self.workqueue_depth = Gauge(
            "workqueue_depth",
            "Keys ready and waiting for a worker, by queue.",
            ["name"],
            registry=r,
        )
        self.workqueue_adds = Counter(
            "workqueue_adds_total",
            "Adds that scheduled work (not coalesced into a key already waiting), by queue.",
            ["name"],
            registry=r,
        )
        self.workqueue_retries = Counter(
            "workqueue_retries_total",
            "Rate-limited re-adds after a failed attempt, by queue.",
            ["name"],
            registry=r,
        )
        self.workqueue_queue_seconds = Histogram(
            "workqueue_queue_duration_seconds",
            "Time a key waited, once ready, before a worker took it, by queue.",
            ["name"],
            buckets=WORKQUEUE_BUCKETS,
            registry=r,
        )
        self.workqueue_work_seconds = Histogram(
            "workqueue_work_duration_seconds",
            "Time from a worker taking a key to marking it done, by queue.",
            ["name"],
            buckets=WORKQUEUE_BUCKETS,
            registry=r,
        )
        self.workqueue_unfinished_work_seconds = Gauge(
            "workqueue_unfinished_work_seconds",
            "Sum of the time keys now being processed have been running, by queue; growth "
            "without completions means stuck workers.",
            ["name"],
            registry=r,
        )
        self.workqueue_longest_running_seconds = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How long the longest-running key now being processed has been running, by queue.",
            ["name"],
            registry=r,
        )
        # Leader election (shared/kube/leader.py), named as client-go's; ``name`` is the Lease.
        self.leader = Gauge(
            "leader_election_master_status",
            "1 while this replica holds the Lease, 0 while it stands by, by Lease name.",
            ["name"],
            registry=r,
        )
        # API requests (shared/kube/client.py), named as client-go's rest client metric; a
        # watch counts once, when it opens (its events are the informers' counters below).
        self.api_requests = Counter(
            "rest_client_requests",
            "Requests made to the Kubernetes API server, by method and HTTP status code (0: no "
            "answer).",
            ["method", "code"],
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
        self.informer_objects = Gauge(
            "cdo_informer_objects",
            "Objects held in the informers' caches, by resource (the sum over the service's "
            "informers of that resource): what a service keeps in memory, and for a per-node "
            "service a figure that must not grow with the cluster.",
            ["resource"],
            registry=r,
        )
        self.informer_undecodable = Counter(
            "cdo_informer_undecodable",
            "Objects an informer skipped because they do not decode into its type (each is "
            "logged once), by resource.",
            ["resource"],
            registry=r,
        )
        self.informer_handler_errors = Counter(
            "cdo_informer_handler_errors",
            "Event handlers that raised (the informer keeps running), by resource.",
            ["resource"],
            registry=r,
        )

        # Optional APIs (shared/kube/presence.py); ``api`` is ``<plural>.<group>/<version>``.
        self.optional_api_served = Gauge(
            "cdo_optional_api_served",
            "1 while the API server serves an optional API this service uses, 0 while it does "
            "not (the service does without it, docs/install.md says how), by API.",
            ["api"],
            registry=r,
        )

    def exposition(self) -> bytes:
        """The registry in Prometheus text format."""
        return bytes(generate_latest(self.registry))


def _describe_process(registry: CollectorRegistry, *, service: str) -> None:
    """The build and the process behind a service's metrics.

    ``cdo_build_info`` is 1 with the build in its labels (the Prometheus convention for build
    facts, as ``go_build_info`` and ``kubernetes_build_info`` are); the collectors are
    prometheus_client's own, shared by every registry of the process (a process hosting several
    services, as the simulator does, reports itself in each).
    """
    info = Gauge(
        "cdo_build_info",
        "1, with the build of this service in its labels.",
        ["service", "version", "python_version", "python_implementation"],
        registry=registry,
    )
    info.labels(
        service, version(), platform.python_version(), platform.python_implementation()
    ).set(1)
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(collector)
