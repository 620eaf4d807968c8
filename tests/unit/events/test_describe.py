"""One-line summaries of membership events: one clique, several, none yet."""

from __future__ import annotations

from shared.events import DomainMember, DomainMembershipChanged, DomainSlice
from shared.events.describe import describe

A = "2f1c8a52-7d6b-4cf1-9e0a-56c3c9e0b1a4.1"
B = "2f1c8a52-7d6b-4cf1-9e0a-56c3c9e0b1a4.2"


def test_a_domain_in_one_clique_names_its_clique_and_channel() -> None:
    event = DomainMembershipChanged(
        namespace="default",
        name="train",
        phase="Ready",
        clique=A,
        channel=3,
        members=(
            DomainMember(node="n1", index=0, status="Ready", clique=A),
            DomainMember(node="n2", index=1, clique=A),
        ),
        slices=(DomainSlice(index=0, clique=A, channel=3, size=2),),
        reason="AllMembersReady",
    )
    assert describe(event) == (
        f"domain default/train Ready clique={A} channel=3 members=2 ready=1 (AllMembersReady)"
    )


def test_a_domain_in_several_cliques_describes_its_slices() -> None:
    event = DomainMembershipChanged(
        namespace="default",
        name="big",
        phase="Degraded",
        members=(
            DomainMember(node="a1", index=0, status="Ready", clique=A),
            DomainMember(node="b1", index=0, clique=B),
        ),
        slices=(
            DomainSlice(index=0, clique=A, channel=0, size=18),
            DomainSlice(index=1, clique=B, channel=4, first_rank=18, size=18),
            DomainSlice(index=2, clique=A, channel=0, first_rank=36, size=18),
        ),
        reason="NodeFault",
    )
    assert describe(event) == (
        f"domain default/big Degraded slices=3 cliques={A}:ch0,{B}:ch4 members=2 ready=1 "
        "(NodeFault)"
    )


def test_a_domain_not_placed_yet_says_where_nothing() -> None:
    event = DomainMembershipChanged(namespace="ml", name="wait", phase="Pending")
    assert describe(event) == "domain ml/wait Pending members=0 ready=0"
