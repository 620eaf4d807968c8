"""The status of a domain from its facts: tables of situations and what the status says."""

from __future__ import annotations

import msgspec
import pytest

from services.domain_controller.facts import DomainFacts
from services.domain_controller.status import compute_status, listed
from shared.crds.computedomain import ComputeDomainStatus, DomainCondition
from shared.events import DomainMember

from .builders import (
    CLIQUE,
    EARLIER,
    NODES_OK,
    NOW,
    PODS_RUNNING,
    facts,
    node,
    placement,
    pod,
)

EMPTY = ComputeDomainStatus()


class Expected(msgspec.Struct, frozen=True, kw_only=True):
    ready: str  # "True/Reason"
    placed: str
    degraded: str
    phase: str
    deleting: str = ""
    nodes: str = ""  # member states, e.g. "Ready,NotReady"


def summary(f: DomainFacts) -> Expected:
    assessment = compute_status(f, previous=EMPTY, now=NOW)
    status = assessment.status

    def of(kind: str) -> str:
        condition = status.condition(kind)
        return "" if condition is None else f"{condition.status}/{condition.reason}"

    assert status.status == ("Ready" if of("Ready").startswith("True") else "NotReady")
    return Expected(
        ready=of("Ready"),
        placed=of("Placed"),
        degraded=of("Degraded"),
        phase=assessment.phase,
        deleting=of("Deleting"),
        nodes=",".join(n.status for n in status.nodes),
    )


TABLE = [
    pytest.param(
        facts(placement=None, pods=(), nodes={}),
        Expected(
            ready="False/WaitingForPlacement",
            placed="False/WaitingForPlacement",
            degraded="False/NotPlaced",
            phase="Pending",
        ),
        id="not placed yet",
    ),
    pytest.param(
        facts(),
        Expected(
            ready="True/AllMembersReady",
            placed="True/Placed",
            degraded="False/Healthy",
            phase="Ready",
            nodes="Ready,Ready",
        ),
        id="every pod runs, IMEX ready everywhere",
    ),
    pytest.param(
        facts(pods=(pod("p1", "n1"), pod("p2", "n1", "Pending"), pod("p3", "n2"))),
        Expected(
            ready="False/PodsNotRunning",
            placed="True/Placed",
            degraded="False/Healthy",
            phase="Placed",
            nodes="NotReady,Ready",
        ),
        id="a pod still pending",
    ),
    pytest.param(
        facts(pods=(pod("p1", "n1"), pod("p2", "n2"), pod("p3", "n2"))),
        Expected(
            ready="False/PodsNotRunning",
            placed="True/Placed",
            degraded="False/Healthy",
            phase="Placed",
            nodes="NotReady,Ready",
        ),
        id="a pod runs on another node than placed",
    ),
    pytest.param(
        facts(pods=(pod("p1", "n1"), pod("p3", "n2"))),
        Expected(
            ready="False/PodsNotRunning",
            placed="True/Placed",
            degraded="False/Healthy",
            phase="Placed",
            nodes="NotReady,Ready",
        ),
        id="a placed pod is gone",
    ),
    pytest.param(
        facts(placement=placement(("n1", ("p1", "p2")), ("n2", ("p3",)), size=4)),
        Expected(
            ready="False/WaitingForPlacement",
            placed="True/Placed",
            degraded="True/MembersMissing",
            phase="Degraded",
            nodes="Ready,Ready",
        ),
        id="gang short of room: members lost to a fault wait for replacements",
    ),
    pytest.param(
        facts(
            placement=placement(("n1", ("p1", "p2")), ("n2", ("p3",)), size=4, reserved={"n2": 2})
        ),
        Expected(
            ready="False/WaitingForPlacement",
            placed="True/Placed",
            degraded="False/Healthy",
            phase="Placed",
            nodes="Ready,Ready",
        ),
        id="gang reserved whole, a pod not created yet",
    ),
    pytest.param(
        facts(nodes={**NODES_OK, "n2": node("n2", imex="False", imex_reason="WaitingForPeers")}),
        Expected(
            ready="False/ImexNotReady",
            placed="True/Placed",
            degraded="True/ImexNotReady",
            phase="Degraded",
            nodes="Ready,NotReady",
        ),
        id="IMEX not ready on a member",
    ),
    pytest.param(
        facts(nodes={**NODES_OK, "n1": node("n1", imex="", imex_reason="")}),
        Expected(
            ready="False/ImexNotReady",
            placed="True/Placed",
            degraded="True/ImexNotReady",
            phase="Degraded",
            nodes="NotReady,Ready",
        ),
        id="no IMEX report from a member yet",
    ),
    pytest.param(
        facts(
            nodes={
                "n1": node("n1", imex="False"),
                "n2": node("n2", faults=("cdo.dev/gpu-fault=xid-79:NoExecute",)),
            }
        ),
        Expected(
            ready="False/NodeFault",
            placed="True/Placed",
            degraded="True/NodeFault",
            phase="Degraded",
            nodes="NotReady,NotReady",
        ),
        id="fault taint outranks IMEX not ready",
    ),
    pytest.param(
        facts(nodes={"n1": node("n1")}),
        Expected(
            ready="False/NodeMissing",
            placed="True/Placed",
            degraded="True/NodeMissing",
            phase="Degraded",
            nodes="Ready,NotReady",
        ),
        id="a member node left the cluster",
    ),
    pytest.param(
        facts(nodes={**NODES_OK, "n1": node("n1", kubelet_ready="Unknown")}),
        Expected(
            ready="False/NodeNotReady",
            placed="True/Placed",
            degraded="True/NodeNotReady",
            phase="Degraded",
            nodes="NotReady,Ready",
        ),
        id="a member's kubelet stopped reporting",
    ),
    pytest.param(
        facts(template_conflict="ResourceClaimTemplate t belongs to ComputeDomain other"),
        Expected(
            ready="False/TemplateNameConflict",
            placed="True/Placed",
            degraded="False/Healthy",
            phase="NotReady",
            nodes="Ready,Ready",
        ),
        id="template name taken",
    ),
    pytest.param(
        facts(deleting=True),
        Expected(
            ready="False/Deleting",
            placed="True/Placed",
            degraded="False/Healthy",
            phase="Deleting",
            deleting="True/WaitingForPods",
            nodes="Ready,Ready",
        ),
        id="deleted while its pods run",
    ),
    pytest.param(
        facts(
            deleting=True,
            pods=(
                pod("p1", "n1", "Succeeded"),
                pod("p2", "n1", "Failed"),
                pod("p3", "n2", "Succeeded"),
            ),
        ),
        Expected(
            ready="False/Deleting",
            placed="True/Placed",
            degraded="False/Healthy",
            phase="Deleting",
            deleting="True/WaitingForPlacementRelease",
            nodes="NotReady,NotReady",
        ),
        id="deleted, pods finished, placement still held",
    ),
    pytest.param(
        facts(deleting=True, placement=None, pods=(), nodes={}),
        Expected(
            ready="False/Deleting",
            placed="False/Released",
            degraded="False/NotPlaced",
            phase="Deleting",
            deleting="True/Releasing",
        ),
        id="deleted, everything released",
    ),
]


@pytest.mark.parametrize(("situation", "expected"), TABLE)
def test_status_table(situation: DomainFacts, expected: Expected) -> None:
    assert summary(situation) == expected


def test_ready_status_in_full() -> None:
    assessment = compute_status(facts(), previous=EMPTY, now=NOW)
    status = assessment.status
    assert status.status == "Ready"
    assert (status.clique, status.channel, status.observed_generation) == (CLIQUE, 7, 3)
    assert [(n.name, n.ip_address, n.clique_id, n.index) for n in status.nodes] == [
        ("n1", "10.0.0.2", CLIQUE, 0),
        ("n2", "10.0.0.2", CLIQUE, 1),
    ]
    assert [c.type for c in status.conditions] == ["Ready", "Placed", "Degraded"]
    assert all(
        c.observed_generation == 3 and c.last_transition_time == NOW for c in status.conditions
    )
    placed = status.condition("Placed")
    assert placed is not None
    assert placed.message == f"3 pods on 2 nodes of clique {CLIQUE}, channel 7"
    assert assessment.members == (
        DomainMember(node="n1", index=0, address="10.0.0.2", pods=2, gpus=4, status="Ready"),
        DomainMember(node="n2", index=1, address="10.0.0.2", pods=1, gpus=2, status="Ready"),
    )
    assert (assessment.size, assessment.reason, assessment.deletion) == (3, "AllMembersReady", None)


def test_members_follow_slot_order_not_list_order() -> None:
    spec = placement(("n1", ("p1",)), ("n2", ("p3",)))
    reordered = msgspec.structs.replace(spec, members=tuple(reversed(spec.members)))
    status = compute_status(facts(placement=reordered), previous=EMPTY, now=NOW).status
    assert [n.name for n in status.nodes] == ["n1", "n2"]


def test_transition_time_moves_only_when_the_condition_status_does() -> None:
    previous = ComputeDomainStatus(
        conditions=(
            DomainCondition(
                type="Ready",
                status="False",
                reason="PodsNotRunning",
                message="",
                last_transition_time=EARLIER,
            ),
            DomainCondition(
                type="Placed",
                status="True",
                reason="Placed",
                message="old",
                last_transition_time=EARLIER,
            ),
        )
    )
    status = compute_status(facts(), previous=previous, now=NOW).status
    times = {c.type: c.last_transition_time for c in status.conditions}
    assert times == {"Ready": NOW, "Placed": EARLIER, "Degraded": NOW}


def test_an_unchanged_situation_computes_an_equal_status() -> None:
    first = compute_status(facts(), previous=EMPTY, now=EARLIER).status
    again = compute_status(facts(), previous=first, now=NOW).status
    assert again == first


def test_messages_name_what_is_wrong() -> None:
    degraded = compute_status(
        facts(
            nodes={"n1": node("n1", imex="False", imex_reason="WaitingForPeers"), "n2": node("n2")}
        ),
        previous=EMPTY,
        now=NOW,
    ).status.condition("Degraded")
    assert degraded is not None and degraded.message == "node n1: IMEX not ready (WaitingForPeers)"
    ready = compute_status(
        facts(pods=(pod("p1", "n1", "Pending"),)), previous=EMPTY, now=NOW
    ).status.condition("Ready")
    assert ready is not None and ready.message == "0 of 3 pods running; waiting for p1, p2, p3"
    deleting = compute_status(facts(deleting=True), previous=EMPTY, now=NOW).status.condition(
        "Deleting"
    )
    assert deleting is not None
    assert deleting.message == "3 pods still use the domain's claims: p1, p2, p3"


def test_pods_outside_the_placement_do_not_block_readiness_but_do_block_deletion() -> None:
    extra = (*PODS_RUNNING, pod("p9", "", "Pending"))
    assert summary(facts(pods=extra)).ready == "True/AllMembersReady"
    assert (
        summary(facts(pods=extra, deleting=True, placement=None)).deleting == "True/WaitingForPods"
    )


def test_gang_size_is_reported_before_placement() -> None:
    assessment = compute_status(
        facts(placement=None, pods=(), nodes={}, gang_size=8), previous=EMPTY, now=NOW
    )
    assert (assessment.size, assessment.members, assessment.status.clique) == (8, (), None)


def test_listed_names_are_cut_short() -> None:
    assert listed(["a", "b"]) == "a, b"
    assert listed([f"p{i}" for i in range(8)]) == "p0, p1, p2, p3, p4 and 3 more"
