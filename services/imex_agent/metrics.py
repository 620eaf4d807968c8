"""The agent's own instruments, registered in its service's registry.

- ``cdo_imex_daemon_starts_total{reason}``: daemon starts (initial, exited, config, node_map,
  roster);
- ``cdo_imex_daemon_adoptions_total{result}``: daemon records found at start: ``adopted`` (the
  daemon an earlier agent left running, taken over) or ``stale`` (it names no such daemon);
- ``cdo_imex_daemon_reloads_total``: SIGUSR1 sent to apply a changed hosts mapping;
- ``cdo_imex_ctl_calls_total{query,result}``: nvidia-imex-ctl calls (q, N) by ok / error;
- ``cdo_dra_requests_total{operation,result}``: claims prepared / unprepared, by ok / refused /
  imex_not_ready / error;
- ``cdo_dra_prepare_seconds``: time to prepare one claim (histogram);
- ``cdo_imex_ready``: 1 while the node's IMEX daemon is READY (or the node is on no NVLink
  fabric, so it needs none), 0 otherwise; read when scraped.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from shared.metrics import Metrics

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


class AgentMetrics:
    def __init__(self, metrics: Metrics) -> None:
        registry = metrics.registry
        self.errors = metrics.errors
        self.daemon_starts = Counter(
            "cdo_imex_daemon_starts",
            "IMEX daemon starts by the agent, by reason (initial, exited, config, node_map, "
            "roster).",
            ["reason"],
            registry=registry,
        )
        self.daemon_adoptions = Counter(
            "cdo_imex_daemon_adoptions",
            "Daemon records found at start, by result (adopted: the running daemon taken over; "
            "stale: the record names no such daemon).",
            ["result"],
            registry=registry,
        )
        self.daemon_reloads = Counter(
            "cdo_imex_daemon_reloads",
            "SIGUSR1 sent to the IMEX daemon to apply a changed hosts mapping.",
            registry=registry,
        )
        self.ctl_calls = Counter(
            "cdo_imex_ctl_calls",
            "nvidia-imex-ctl calls, by query (q, N) and result (ok, error).",
            ["query", "result"],
            registry=registry,
        )
        self.dra_requests = Counter(
            "cdo_dra_requests",
            "Claims handled by the DRA plugin, by operation (prepare, unprepare) and result "
            "(ok, refused, error).",
            ["operation", "result"],
            registry=registry,
        )
        self.prepare_seconds = Histogram(
            "cdo_dra_prepare_seconds",
            "Time to prepare one claim, API reads and files included.",
            buckets=_BUCKETS,
            registry=registry,
        )
        self.imex_ready = Gauge(
            "cdo_imex_ready",
            "1 while the node's IMEX daemon is READY (or the node is on no NVLink fabric and "
            "needs none), 0 otherwise.",
            registry=registry,
        )
