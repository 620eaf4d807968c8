"""The demo's closing table and the ``--keep`` instructions: pure functions of what was measured.

:class:`Summary` holds every figure of the story: the seed act (time to Ready, its clique and
channel, the fault and the recovery, the fewest IMEX-ready nodes meanwhile), the rack's fabric
loss and the domain's failover (:class:`FailoverFigures`), the act in which one domain spans
both racks (:class:`SpanFigures`: time to Ready and its slices), the IMEX daemon restarts the
node host counted, and the events and trace of the whole run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from sim.demo.observe import SliceView
from sim.demo.progress import seconds, slice_phrase
from sim.demo.restarts import restarts_phrase
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
class FailoverFigures:
    """What the fabric act measured: one rack's fabric lost, the domain moved to another."""

    rack: str
    """The rack (or, without a common rack name, the clique) whose fabric was lost."""
    nodes: int
    lost_clique: str
    grace_s: int
    """The domain's ``spec.failover.graceSeconds`` during the act."""
    new_clique: str
    new_rack: str
    channel: int
    """The domain's IMEX channel in its new clique."""
    stuck_s: float
    """From the fabric loss until the allocator marked the slice stuck."""
    moved_s: float
    """From the fabric loss until the slice was placed in the new clique."""
    ready_s: float
    """From the fabric loss until the domain was Ready in the new clique, every pod running."""
    restored_s: float | None = None
    """From the fabric coming back until the rack's nodes were in their clique and IMEX-ready."""


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
    nodes: int = 0
    imex_low: int | None = None
    """The fewest IMEX-ready nodes seen from the XID until the domain was Ready again."""
    failover: FailoverFigures | None = None
    imex_restarts: dict[str, int] | None = None
    """IMEX daemon restarts per node during the story, counted by the node host."""


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


def failover_rows(figures: FailoverFigures | None) -> list[tuple[str, str]]:
    """The fabric act's rows: what was lost, where the domain went, the fabric's return."""
    if figures is None:
        return [("failover", "-")]
    past = figures.ready_s - figures.grace_s
    rows = [
        ("fabric lost", f"{figures.rack}: {figures.nodes} nodes, clique {figures.lost_clique}"),
        (
            "failover",
            f"moved to clique {figures.new_clique}"
            + (f" ({figures.new_rack})" if figures.new_rack else "")
            + f", channel {figures.channel}, after the {figures.grace_s} s grace; Ready there "
            f"{seconds(figures.ready_s)} after the fabric loss ({seconds(past)} past the grace)",
        ),
    ]
    if figures.restored_s is not None:
        rows.append(
            (
                "fabric restored",
                f"{figures.rack} back in its clique, IMEX ready, "
                f"{seconds(figures.restored_s)} after the fabric returned",
            )
        )
    return rows


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
            f"XID 74 on {summary.faulted_node or '-'}; Degraded ({summary.degraded_reason or '-'}) "
            f"after {seconds(summary.fault_to_degraded_s)}",
        ),
        ("fault to recovered", recovery),
        (
            "IMEX ready",
            "-"
            if summary.imex_low is None
            else f"{summary.imex_low}/{summary.nodes} nodes at the lowest, from the XID to "
            "Ready again",
        ),
        *failover_rows(summary.failover),
        *span_rows(summary.spanning),
        (
            "IMEX restarts",
            "-"
            if summary.imex_restarts is None
            else f"{restarts_phrase(summary.imex_restarts)} during the story (the node host's "
            "counts)",
        ),
        ("events seen", f"{sum(summary.events.values())}: {counts_line(summary.events)}"),
        ("trace id", trace),
    ]
    if summary.domain_trace_id is not None:
        rows.append(("domain trace id", summary.domain_trace_id))
    width = max(len(label) for label, _ in rows)
    return [f"{label:<{width}}  {value}" for label, value in rows]


def keep_lines(
    *, kubeconfig: str, nats_url: str, state_dir: Path, tools: Path, nats_token_file: str = ""
) -> list[str]:
    """How to reach the cluster the demo left running; ``tools``: where kubectl and cdo are;
    ``nats_token_file``: the reader's token, with NATS identities."""
    token = f" CDO_NATS_TOKEN_FILE={nats_token_file}" if nats_token_file else ""
    return [
        f"export PATH={tools}:$PATH KUBECONFIG={kubeconfig} CDO_NATS_URL={nats_url}{token}",
        "kubectl get computedomains",
        "cdo status",
        "cdo events --follow",
        f"cdo sim down --state-dir {state_dir}     # stops everything",
    ]
