"""The PodScheduled=False message."""

from __future__ import annotations

from sim.scheduler.message import NO_NODES, unschedulable_message


def test_reasons_are_counted_and_sorted_as_text() -> None:
    message = unschedulable_message(
        total_nodes=36,
        reasons={"node(s) didn't match pod affinity rules": 18, "Insufficient nvidia.com/gpu": 18},
    )
    assert message == (
        "0/36 nodes are available: 18 Insufficient nvidia.com/gpu, "
        "18 node(s) didn't match pod affinity rules."
    )


def test_a_pre_filter_reason_stands_alone() -> None:
    message = unschedulable_message(
        total_nodes=3, reasons={}, pre_filter='resourceclaim "c" not found'
    )
    assert message == '0/3 nodes are available: resourceclaim "c" not found.'


def test_no_nodes() -> None:
    assert unschedulable_message(total_nodes=0, reasons={}) == NO_NODES
