"""The live lines: one compact line of the whole state, changing as the story goes."""

from __future__ import annotations

from sim.demo.observe import ClusterView, DomainView, PodCounts
from sim.demo.progress import domain_phrase, progress_line, seconds, stamp, trace_id_of


def test_a_placing_domain_reads_as_one_line() -> None:
    view = ClusterView(
        pods=PodCounts(total=18, gated=0, placed=18, running=7),
        nodes=36,
        imex_ready=36,
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
