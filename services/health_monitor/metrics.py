"""The health monitor's own instruments, registered in the service's registry.

Labels are low-cardinality: signal families, severities, fields and results; never a node,
GPU or XID number. Each instrument's help text is in the table below; :class:`HealthMetrics`
names the instruments and their labels.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from shared.metrics import Metrics

_READ_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)

# name -> help text, for /metrics and docs/health-monitor.md ("Metrics").
HELP = {
    "cdo_health_signals": "Signals classified, by family (xid, fabric, nvlink ...) and severity; "
    "XIDs at every event, state signals when they appear.",
    "cdo_health_fault_events": "NodeFault events, by result: published, or suppressed by the rate "
    "limit.",
    "cdo_health_recoveries": "Fault episodes that ended with the node healthy again "
    "(NodeRecovered).",
    "cdo_health_fault_episodes": "Fault episodes begun: a warning or fatal fault after a healthy "
    "stretch.",
    "cdo_health_node_writes": "Writes of the Node, by field (taints, condition, labels) and result "
    "(ok, conflict, error).",
    "cdo_health_readings": "Polled readings of the node's GPUs.",
    "cdo_health_reading_seconds": "Time one polled reading of every GPU took.",
    "cdo_health_nvml_available": "1 while NVML can be read on the node, 0 while it cannot.",
    "cdo_health_active_faults": "Warning and fatal faults active now, by severity.",
    "cdo_health_breaker_withheld": "1 while the circuit breaker holds this node's NoExecute taint "
    "back (NoSchedule instead), 0 otherwise.",
    "cdo_health_breaker_decisions": "Claims for the NoExecute taint the circuit breaker decided, "
    "by result (granted, withheld).",
    "cdo_health_taint": "The fault taint the node should carry: 0 none, 1 NoSchedule, 2 NoExecute.",
    "cdo_health_gpu_actions": "Actions on single GPUs' faults, by kind (eviction, rule_created, "
    "rule_updated, rule_deleted) and result (ok, refused, error).",
}


class HealthMetrics:
    """Counters and gauges of one node's monitor."""

    def __init__(self, metrics: Metrics) -> None:
        self._registry = metrics.registry
        self.errors = metrics.errors
        self.signals = self._counter("cdo_health_signals", "signal", "severity")
        self.fault_events = self._counter("cdo_health_fault_events", "result")
        self.recoveries = self._counter("cdo_health_recoveries")
        self.episodes = self._counter("cdo_health_fault_episodes")
        self.node_writes = self._counter("cdo_health_node_writes", "field", "result")
        self.readings = self._counter("cdo_health_readings")
        self.reading_seconds = Histogram(
            "cdo_health_reading_seconds",
            HELP["cdo_health_reading_seconds"],
            buckets=_READ_BUCKETS,
            registry=self._registry,
        )
        self.nvml_available = self._gauge("cdo_health_nvml_available")
        self.active_faults = self._gauge("cdo_health_active_faults", "severity")
        self.breaker_withheld = self._gauge("cdo_health_breaker_withheld")
        self.breaker_decisions = self._counter("cdo_health_breaker_decisions", "result")
        self.reaction = self._gauge("cdo_health_taint")
        self.gpu_actions = self._counter("cdo_health_gpu_actions", "kind", "result")

    def _counter(self, name: str, *labels: str) -> Counter:
        return Counter(name, HELP[name], labels, registry=self._registry)

    def _gauge(self, name: str, *labels: str) -> Gauge:
        return Gauge(name, HELP[name], labels, registry=self._registry)
