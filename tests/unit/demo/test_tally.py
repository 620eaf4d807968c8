"""Events counted by type; faults, recoveries and the demo domain's phase changes shown; a group of
nodes (a rack losing its fabric) shows its first fault and recovery only."""

from __future__ import annotations

from collections import Counter

from shared.events.catalog import (
    CliqueCapacity,
    DomainMembershipChanged,
    NodeFault,
    NodeRecovered,
)
from sim.demo.tally import Tally, counts_line, short_type


def membership(phase: str, *, name: str = "training-domain-1") -> DomainMembershipChanged:
    return DomainMembershipChanged(namespace="default", name=name, phase=phase, reason="r")


def test_every_event_is_counted_and_only_phase_changes_of_the_demo_domain_are_shown() -> None:
    tally = Tally(namespace="default", domain="training-domain-1")
    shown = [
        tally.record(event)
        for event in (
            membership("Pending"),
            membership("Placed"),
            membership("Placed"),
            membership("Ready", name="another"),
            CliqueCapacity(clique="c.1"),
            membership("Ready"),
        )
    ]
    assert [line is not None for line in shown] == [True, True, False, False, False, True]
    assert shown[0] is not None and shown[0].startswith("event domain.membership")
    assert "training-domain-1 Ready" in (shown[5] or "")
    assert tally.phase == "Ready"
    assert tally.counts == Counter({"domain.membership": 5, "clique.capacity": 1})
    assert tally.total == 6


def test_faults_and_recoveries_are_shown_outside_a_group() -> None:
    tally = Tally(namespace="default", domain="training-domain-1")
    fault = NodeFault(node="rack-1-tray05", signal="xid", code=79, severity="fatal")
    recovered = NodeRecovered(node="rack-1-tray05", signals=("xid",))
    assert "rack-1-tray05" in (tally.record(fault) or "")
    assert "rack-1-tray05" in (tally.record(recovered) or "")
    assert short_type(fault) == "node.fault"


def test_counts_read_most_frequent_first() -> None:
    assert counts_line(Counter({"node.imex": 3, "node.fault": 1, "domain.membership": 3})) == (
        "domain.membership 3, node.imex 3, node.fault 1"
    )
    assert counts_line(Counter()) == "none"


def test_following_the_next_domain_shows_its_phase_changes_and_no_longer_the_first_ones() -> None:
    tally = Tally(namespace="default", domain="training-domain-1")
    assert tally.record(membership("Ready")) is not None
    tally.follow(namespace="default", domain="training-domain-2")
    assert tally.record(membership("Deleted")) is None
    assert "training-domain-2 Ready" in (
        tally.record(membership("Ready", name="training-domain-2")) or ""
    )
    assert tally.phase == "Ready"
    assert tally.counts == Counter({"domain.membership": 3})


def test_a_group_shows_its_first_fault_and_recovery_and_counts_the_rest() -> None:
    tally = Tally(namespace="default", domain="training-domain-1")
    rack = [f"rack-1-tray{i:02d}" for i in range(3)]
    tally.group(rack, "rack-1")
    faults = [
        NodeFault(node=node, signal="fabric", code=1, severity="warning", message=f"GPU {gpu}")
        for node in rack
        for gpu in range(4)
    ]
    shown = [tally.record(fault) for fault in faults]
    assert shown[0] is not None and shown[0].endswith(
        "(and the like from rack-1: counted, not shown)"
    )
    assert shown[1:] == [None] * 11
    recovered = [tally.record(NodeRecovered(node=node, signals=("fabric",))) for node in rack]
    assert recovered[0] is not None and recovered[1:] == [None, None]
    assert (tally.in_group("rack-1", "node.fault"), tally.in_group("rack-1", "node.recovered")) == (
        12,
        3,
    )
    assert tally.counts == Counter({"node.fault": 12, "node.recovered": 3})  # all still counted
    # Other nodes are shown as before.
    assert tally.record(NodeFault(node="rack-0-tray00", signal="xid", severity="fatal")) is not None
    assert tally.in_group("rack-0", "node.fault") == 0
