"""The closing table and the --keep instructions."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from sim.demo.summary import Summary, keep_lines, summary_lines

CLIQUE = "18acb9ea-5edc-5d25-b92e-9a65573d239b.1"


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
    assert rows["fault"] == "XID 79 on rack-1-tray09; Degraded (MembersMissing) after 0.2 s"
    assert rows["fault to recovered"] == (
        "recovered in 10.2 s: Ready again, replacement pod on rack-1-tray09"
    )
    assert rows["events seen"] == "137: node.imex 112, domain.membership 24, node.fault 1"
    assert rows["trace id"] == "4bf92f3577b34da6a3ce929d0e0e4736 (root span demo)"
    assert rows["domain trace id"] == "0af7651916cd43dd8448eb211c80319c"


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
