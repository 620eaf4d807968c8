"""The closing table (the seed act, the fabric act, the multi-clique act's slices, the IMEX
restarts, the whole run) and the --keep instructions."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from sim.demo.observe import SliceView
from sim.demo.summary import FailoverFigures, SpanFigures, Summary, keep_lines, summary_lines

CLIQUE = "18acb9ea-5edc-5d25-b92e-9a65573d239b.1"
OTHER = "ce39c142-0e56-575d-8cdf-26168a499808.1"


def rack(number: int) -> tuple[str, ...]:
    return tuple(f"rack-{number}-tray{i:02d}" for i in range(18))


def table(summary: Summary) -> dict[str, str]:
    rows = summary_lines(summary)
    return {line[:18].strip(): line[18:].strip() for line in rows}


def test_a_recovered_story() -> None:
    rows = table(
        Summary(
            time_to_ready_s=4.96,
            clique=CLIQUE,
            channel=0,
            members=18,
            faulted_node="rack-1-tray09",
            degraded_reason="MembersMissing",
            fault_to_degraded_s=0.25,
            fault_to_ready_s=10.2,
            replacement_node="rack-1-tray09",
            recovered=True,
            events=Counter({"node.imex": 112, "domain.membership": 24, "node.fault": 1}),
            trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
            trace_exported=True,
            domain_trace_id="0af7651916cd43dd8448eb211c80319c",
        )
    )
    assert rows["time to Ready"].startswith("5.0 s")
    assert rows["clique"] == CLIQUE
    assert rows["channel"] == "0"
    assert rows["members"] == "18 nodes"
    assert rows["fault"] == "XID 74 on rack-1-tray09; Degraded (MembersMissing) after 0.2 s"
    assert rows["fault to recovered"] == (
        "recovered in 10.2 s: Ready again, replacement pod on rack-1-tray09"
    )
    assert rows["events seen"] == "137: node.imex 112, domain.membership 24, node.fault 1"
    assert rows["trace id"] == "4bf92f3577b34da6a3ce929d0e0e4736 (root span demo)"
    assert rows["domain trace id"] == "0af7651916cd43dd8448eb211c80319c"
    assert rows["multi-clique Ready"] == "-"
    assert "slice 0" not in rows


def test_the_multi_clique_act_has_its_time_to_ready_and_a_row_per_slice() -> None:
    slices = (
        SliceView(index=0, clique=CLIQUE, channel=0, first_rank=0, size=18, nodes=rack(1)),
        SliceView(index=1, clique=OTHER, channel=2, first_rank=18, size=18, nodes=rack(2)),
    )
    summary = Summary(
        time_to_ready_s=1.3,
        spanning=SpanFigures(
            domain="training-domain-2", time_to_ready_s=2.21, pods=36, slices=slices
        ),
    )
    rows = table(summary)
    assert rows["multi-clique Ready"] == (
        "2.2 s (kubectl apply -> Ready, 36 pods running in 2 slices)"
    )
    assert rows["slice 0"] == f"clique {CLIQUE}, channel 0, ranks 0-17, 18 nodes"
    assert rows["slice 1"] == f"clique {OTHER}, channel 2, ranks 18-35, 18 nodes"
    assert rows["time to Ready"].startswith("1.3 s")  # the seed act's rows stay
    lines = summary_lines(summary)
    labels = [line[:18].strip() for line in lines]
    assert labels.index("fault to recovered") < labels.index("multi-clique Ready")
    assert labels.index("slice 1") < labels.index("events seen")
    assert all(line[18:20] == "  " for line in lines)  # the labels stay aligned


def test_an_unfinished_story_says_so() -> None:
    rows = table(Summary(trace_id="4bf92f3577b34da6a3ce929d0e0e4736"))
    assert rows["time to Ready"].startswith("-")
    assert rows["channel"] == "-"
    assert rows["fault to recovered"] == "not recovered"
    assert rows["events seen"] == "0: none"
    assert "not exported" in rows["trace id"]
    assert "domain trace id" not in rows


def test_keep_prints_how_to_reach_the_cluster() -> None:
    lines = keep_lines(
        kubeconfig="/s/kubeconfig",
        nats_url="nats://127.0.0.1:4222",
        state_dir=Path("/s"),
        tools=Path("/repo/.venv/bin"),
    )
    assert lines[0] == (
        "export PATH=/repo/.venv/bin:$PATH KUBECONFIG=/s/kubeconfig CDO_NATS_URL=nats://127.0.0.1:4222"
    )
    assert "kubectl get computedomains" in lines
    assert "cdo status" in lines
    assert "cdo events --follow" in lines
    assert lines[-1].startswith("cdo sim down --state-dir /s")


FAILOVER = FailoverFigures(
    rack="rack-1",
    nodes=18,
    lost_clique=CLIQUE,
    grace_s=5,
    new_clique=OTHER,
    new_rack="rack-0",
    channel=0,
    stuck_s=1.1,
    moved_s=6.2,
    ready_s=7.94,
    restored_s=3.05,
)


def test_the_fabric_act_and_the_imex_counts_have_their_rows() -> None:
    summary = Summary(
        nodes=36,
        imex_low=35,
        failover=FAILOVER,
        imex_restarts=dict.fromkeys(rack(0) + rack(1), 0),
    )
    rows = table(summary)
    assert rows["IMEX ready"] == "35/36 nodes at the lowest, from the XID to Ready again"
    assert rows["fabric lost"] == f"rack-1: 18 nodes, clique {CLIQUE}"
    assert rows["failover"] == (
        f"moved to clique {OTHER} (rack-0), channel 0, after the 5 s grace; Ready there 7.9 s "
        "after the fabric loss (2.9 s past the grace)"
    )
    assert rows["fabric restored"] == (
        "rack-1 back in its clique, IMEX ready, 3.0 s after the fabric returned"
    )
    assert rows["IMEX restarts"] == "0 on 36 nodes during the story (the node host's counts)"
    labels = [line[:18].strip() for line in summary_lines(summary)]
    assert (
        labels.index("IMEX ready")
        < labels.index("fabric lost")
        < labels.index("failover")
        < labels.index("multi-clique Ready")
        < labels.index("IMEX restarts")
        < labels.index("events seen")
    )


def test_restarts_name_their_nodes_and_an_unfinished_story_has_none() -> None:
    rows = table(Summary(nodes=36, imex_restarts={"rack-1-tray03": 1, "rack-0-tray00": 0}))
    assert rows["IMEX restarts"].startswith("1 (rack-1-tray03 1) on 2 nodes")
    bare = table(Summary())
    assert bare["IMEX restarts"] == "-"
    assert bare["IMEX ready"] == "-"
    assert bare["failover"] == "-"
    assert "fabric lost" not in bare
