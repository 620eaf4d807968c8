"""The live lines: one compact line of the whole state (a stuck slice included), changing as the
story goes; the phrases of a slice and a rack that the notes and the summary share."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from sim.demo.observe import CliqueView, ClusterView, DomainView, PodCounts, SliceView
from sim.demo.progress import (
    domain_phrase,
    progress_line,
    rack_of,
    rank_range,
    seconds,
    slice_phrase,
    stamp,
    trace_id_of,
)

CLIQUE = "18acb9ea-5edc-5d25-b92e-9a65573d239b.1"
OTHER = "ce39c142-0e56-575d-8cdf-26168a499808.1"
LABELLED = {f"rack-{r}-tray{i:02d}": (CLIQUE, OTHER)[r] for r in (0, 1) for i in range(18)}
"""Every node of the two racks with its clique label, as while nothing lost its fabric."""


def test_a_placing_domain_reads_as_one_line() -> None:
    view = ClusterView(
        pods=PodCounts(total=18, gated=0, placed=18, running=7),
        nodes=36,
        imex_ready=36,
        cliques=LABELLED,
        domain=DomainView(phase="Placed", reason="PodsNotRunning"),
    )
    assert progress_line(view) == (
        "pods 18: gated 0 placed 18 running 7 | IMEX ready 36/36 nodes "
        "| domain Placed (PodsNotRunning)"
    )


def test_a_fault_shows_the_waiting_reason_and_the_tainted_node() -> None:
    view = ClusterView(
        pods=PodCounts(total=18, gated=1, placed=17, running=17, waiting="CliqueFull"),
        nodes=36,
        imex_ready=35,
        cliques=LABELLED,
        tainted={"rack-1-tray05": "NoExecute"},
        domain=DomainView(phase="Degraded", reason="MembersMissing"),
    )
    assert progress_line(view) == (
        "pods 18: gated 1 placed 17 running 17 (waiting: CliqueFull) | IMEX ready 35/36 nodes "
        "| domain Degraded (MembersMissing) | gpu-fault taint on rack-1-tray05 (NoExecute)"
    )


def test_before_the_domain_exists() -> None:
    assert domain_phrase(ClusterView()) == "domain -"
    assert progress_line(ClusterView()).startswith("pods 0: gated 0 placed 0 running 0 |")


def test_a_reason_only_shows_for_gated_pods() -> None:
    view = ClusterView(pods=PodCounts(total=1, gated=0, placed=1, waiting="CliqueFull"))
    assert "waiting" not in progress_line(view)


def test_a_domain_in_several_cliques_shows_the_pods_running_in_each() -> None:
    cliques = (
        CliqueView(clique="a.1", channel=0, pods=18, running_pods=18),
        CliqueView(clique="b.1", channel=0, pods=18, running_pods=5),
    )
    view = ClusterView(domain=DomainView(phase="Placed", reason="PodsNotRunning", cliques=cliques))
    assert domain_phrase(view) == (
        "domain Placed (PodsNotRunning) in 2 cliques, pods running 18/18 + 5/18"
    )
    one = ClusterView(domain=DomainView(phase="Ready", clique="a.1", cliques=cliques[:1]))
    assert domain_phrase(one) == "domain Ready"


def test_pods_being_deleted_show_as_terminating() -> None:
    view = ClusterView(pods=PodCounts(terminating=8), domain=DomainView(phase="Deleting"))
    assert progress_line(view).startswith(
        "pods 0: gated 0 placed 0 running 0 terminating 8 | IMEX ready 0/0 nodes | domain Deleting"
    )
    assert "terminating" not in progress_line(ClusterView())


def test_a_slice_reads_as_clique_channel_ranks_and_nodes() -> None:
    nodes = tuple(f"rack-2-tray{i:02d}" for i in range(18))
    piece = SliceView(index=1, clique=CLIQUE, channel=4, first_rank=18, size=18, nodes=nodes)
    assert slice_phrase(piece) == f"clique {CLIQUE}, channel 4, ranks 18-35, 18 nodes"
    lone = SliceView(index=2, clique=CLIQUE, channel=0, first_rank=36, size=1, nodes=nodes[:1])
    assert slice_phrase(lone) == f"clique {CLIQUE}, channel 0, ranks 36, 1 node"
    assert rank_range(SliceView(index=0, clique=CLIQUE, channel=0, first_rank=0, size=0)) == "-"


def test_times() -> None:
    assert stamp(1.234) == "t+1.2s"
    assert stamp(61) == "t+61.0s"
    assert seconds(5.04) == "5.0 s"
    assert seconds(None) == "-"


def test_trace_ids_come_from_valid_traceparents_only() -> None:
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    assert trace_id_of(f"00-{trace}-00f067aa0ba902b7-01") == trace
    assert trace_id_of(f"00-{trace.upper()}-00f067aa0ba902b7-01") == trace
    assert trace_id_of(None) is None
    assert trace_id_of("") is None
    assert trace_id_of("00-" + "0" * 32 + "-00f067aa0ba902b7-01") is None
    assert trace_id_of("00-nothex" + "x" * 24 + "-00f067aa0ba902b7-01") is None
    assert trace_id_of("garbage") is None


def test_a_stuck_slice_shows_until_it_moves() -> None:
    since = datetime(2025, 1, 1, tzinfo=UTC)
    stuck = SliceView(index=0, clique=CLIQUE, channel=0, first_rank=0, size=18, waiting_since=since)
    rack_0 = {node: clique for node, clique in LABELLED.items() if node.startswith("rack-0")}
    view = ClusterView(
        nodes=36, imex_ready=36, cliques=rack_0, domain=DomainView(phase="Ready"),
        slices=(stuck,),
    )  # fmt: skip
    # The rack that lost its fabric is out of its clique; the domain's slice waits to move.
    assert progress_line(view).endswith(
        "| IMEX ready 36/36 nodes | clique label on 18/36 nodes | domain Ready | slice 0 stuck"
    )
    assert "clique label" not in progress_line(replace(view, cliques=LABELLED))
    two = ClusterView(slices=(stuck, replace(stuck, index=3)))
    assert progress_line(two).endswith("| slices 0, 3 stuck")
    moved = replace(stuck, waiting_since=None, moved_from=CLIQUE)
    assert "stuck" not in progress_line(ClusterView(slices=(moved,)))


def test_a_rack_is_named_by_its_nodes() -> None:
    assert rack_of([f"rack-1-tray{i:02d}" for i in range(18)]) == "rack-1"
    assert rack_of(["rack-0-tray00", "rack-1-tray00"]) == ""
    assert rack_of(["gpu-node-a"]) == ""
    assert rack_of([]) == ""
