"""The demo's closing table and the ``--keep`` instructions: pure functions of what was measured.

:class:`Summary` holds every figure of the story: the seed act (time to Ready, its clique and
channel, the fault and the recovery), the act in which one domain spans both racks
(:class:`SpanFigures`: time to Ready and its slices), and the events and trace of the whole run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from sim.demo.observe import SliceView
from sim.demo.progress import seconds, slice_phrase
from sim.demo.tally import counts_line


@dataclass(frozen=True)
class SpanFigures:
    """What the multi-clique act measured: one domain larger than a clique, cut into slices."""

    domain: str
    time_to_ready_s: float
    """From ``kubectl apply`` to the domain Ready with every pod running."""
    pods: int
    slices: tuple[SliceView, ...] = ()


@dataclass(frozen=True)
class Summary:
    time_to_ready_s: float | None = None
    """From ``kubectl apply`` to the domain Ready with every pod running."""
    clique: str | None = None
    channel: int | None = None
    members: int = 0
    faulted_node: str | None = None
    degraded_reason: str | None = None
    fault_to_degraded_s: float | None = None
    fault_to_ready_s: float | None = None
    """From the injected XID to the domain Ready again, every pod running."""
    replacement_node: str | None = None
    recovered: bool = False
    events: Counter[str] = field(default_factory=Counter)
    trace_id: str | None = None
    trace_exported: bool = False
    domain_trace_id: str | None = None
    spanning: SpanFigures | None = None


def span_rows(figures: SpanFigures | None) -> list[tuple[str, str]]:
    """The multi-clique act's rows: its time to Ready, then one row per slice."""
    if figures is None:
        return [("multi-clique Ready", "-")]
    slices = len(figures.slices)
    ready = (
        f"{seconds(figures.time_to_ready_s)} (kubectl apply -> Ready, {figures.pods} pods "
        f"running in {slices} slice{'' if slices == 1 else 's'})"
    )
    return [("multi-clique Ready", ready)] + [
        (f"slice {piece.index}", slice_phrase(piece)) for piece in figures.slices
    ]


def summary_lines(summary: Summary) -> list[str]:
    """``label  value`` rows, labels aligned."""
    recovery = (
        f"recovered in {seconds(summary.fault_to_ready_s)}: Ready again, replacement pod on "
        f"{summary.replacement_node}"
        if summary.recovered
        else "not recovered"
    )
    if summary.trace_id is None:
        trace = "-"
    elif summary.trace_exported:
        trace = f"{summary.trace_id} (root span demo)"
    else:
        trace = f"{summary.trace_id} (not exported: OTEL_EXPORTER_OTLP_ENDPOINT is not set)"
    rows = [
        (
            "time to Ready",
            f"{seconds(summary.time_to_ready_s)} (kubectl apply -> Ready, all pods running)",
        ),
        ("clique", summary.clique or "-"),
        ("channel", "-" if summary.channel is None else str(summary.channel)),
        ("members", f"{summary.members} nodes"),
        (
            "fault",
            f"XID 79 on {summary.faulted_node or '-'}; Degraded ({summary.degraded_reason or '-'}) "
            f"after {seconds(summary.fault_to_degraded_s)}",
        ),
        ("fault to recovered", recovery),
        *span_rows(summary.spanning),
        ("events seen", f"{sum(summary.events.values())}: {counts_line(summary.events)}"),
        ("trace id", trace),
    ]
    if summary.domain_trace_id is not None:
        rows.append(("domain trace id", summary.domain_trace_id))
    width = max(len(label) for label, _ in rows)
    return [f"{label:<{width}}  {value}" for label, value in rows]


def keep_lines(*, kubeconfig: str, nats_url: str, state_dir: Path, tools: Path) -> list[str]:
    """How to reach the cluster the demo left running; ``tools``: where kubectl and cdo are."""
    return [
        f"export PATH={tools}:$PATH KUBECONFIG={kubeconfig} CDO_NATS_URL={nats_url}",
        "kubectl get computedomains",
        "cdo status",
        "cdo events --follow",
        f"cdo sim down --state-dir {state_dir}     # stops everything",
    ]
