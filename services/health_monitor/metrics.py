"""The health monitor's own instruments, registered in the service's registry.

Labels are low-cardinality: signal families, severities, fields and results; never a node,
GPU or XID number.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from shared.metrics import Metrics

_READ_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


class HealthMetrics:
    """Counters and gauges of one node's monitor."""

    def __init__(self, metrics: Metrics) -> None:
        r = metrics.registry
        self.errors = metrics.errors
        self.signals = Counter(
            "cdo_health_signals",
            "Signals classified, by family (xid, fabric, nvlink ...) and severity; XIDs at every "
            "event, state signals when they appear.",
            ["signal", "severity"],
            registry=r,
        )
        self.fault_events = Counter(
            "cdo_health_fault_events",
            "NodeFault events, by result: published, or suppressed by the rate limit.",
            ["result"],
            registry=r,
        )
        self.recoveries = Counter(
            "cdo_health_recoveries",
            "Fault episodes that ended with the node healthy again (NodeRecovered).",
            registry=r,
        )
        self.episodes = Counter(
            "cdo_health_fault_episodes",
            "Fault episodes begun: a warning or fatal fault after a healthy stretch.",
            registry=r,
        )
        self.node_writes = Counter(
            "cdo_health_node_writes",
            "Writes of the Node, by field (taints, condition, labels) and result (ok, conflict, "
            "error).",
            ["field", "result"],
            registry=r,
        )
        self.readings = Counter(
            "cdo_health_readings", "Polled readings of the node's GPUs.", registry=r
        )
        self.reading_seconds = Histogram(
            "cdo_health_reading_seconds",
            "Time one polled reading of every GPU took.",
            buckets=_READ_BUCKETS,
            registry=r,
        )
        self.nvml_available = Gauge(
            "cdo_health_nvml_available",
            "1 while NVML can be read on the node, 0 while it cannot.",
            registry=r,
        )
        self.active_faults = Gauge(
            "cdo_health_active_faults",
            "Warning and fatal faults active now, by severity.",
            ["severity"],
            registry=r,
        )
        self.breaker_withheld = Gauge(
            "cdo_health_breaker_withheld",
            "1 while the circuit breaker holds this node's NoExecute taint back (NoSchedule "
            "instead), 0 otherwise.",
            registry=r,
        )
        self.breaker_decisions = Counter(
            "cdo_health_breaker_decisions",
            "Claims for the NoExecute taint the circuit breaker decided, by result (granted, "
            "withheld).",
            ["result"],
            registry=r,
        )
        self.reaction = Gauge(
            "cdo_health_taint",
            "The fault taint the node should carry: 0 none, 1 NoSchedule, 2 NoExecute.",
            registry=r,
        )
