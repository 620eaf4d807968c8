"""The status of a domain from its facts: tables of situations and what the status says."""

from __future__ import annotations

import msgspec
import pytest

from services.domain_controller.facts import DomainFacts, NodeFacts, PodFacts
from services.domain_controller.status import compute_status
from services.domain_controller.status_messages import listed
from shared.crds.computedomain import ComputeDomainClique, ComputeDomainStatus, DomainCondition
from shared.crds.placement import PlacementSpec, PodRef, SliceMember
from shared.events import DomainMember, DomainSlice

from .builders import (
    CLIQUE,
    CLIQUE_B,
    EARLIER,
    NODES_OK,
    NOW,
    PODS_RUNNING,
    TWO_NODES,
    TWO_SLICES,
    TWO_SLICES_NODES,
    TWO_SLICES_PODS,
    facts,
    legacy_placement,
    node,
    placement,
    pod,
    slice_of,
    sliced,
    two_slice_facts,
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


# The two-slice domain of builders.TWO_SLICES: slice 0 on a1, a2 in CLIQUE, slice 1 on b1, b2
# in CLIQUE_B; status.nodes lists a1, a2, b1, b2.
SLICES_TABLE = [
    pytest.param(
        two_slice_facts(),
        Expected(
            ready="True/AllMembersReady",
            placed="True/Placed",
            degraded="False/Healthy",
            phase="Ready",
            nodes="Ready,Ready,Ready,Ready",
        ),
        id="two slices in two cliques, every pod running",
    ),
    pytest.param(
        two_slice_facts(
            nodes={
                **TWO_SLICES_NODES,
                "b1": node("b1", faults=("cdo.dev/gpu-fault=xid-79:NoExecute",)),
            }
        ),
        Expected(
            ready="False/NodeFault",
            placed="True/Placed",
            degraded="True/NodeFault",
            phase="Degraded",
            nodes="Ready,Ready,NotReady,Ready",
        ),
        id="a fault in slice 1 leaves slice 0's nodes Ready",
    ),
    pytest.param(
        two_slice_facts(pods=(*TWO_SLICES_PODS[:5], pod("p5", "b2", "Pending"))),
        Expected(
            ready="False/PodsNotRunning",
            placed="True/Placed",
            degraded="False/Healthy",
            phase="Placed",
            nodes="Ready,Ready,Ready,NotReady",
        ),
        id="a pod of slice 1 still pending",
    ),
    pytest.param(
        two_slice_facts(
            placement=sliced(
                TWO_SLICES.slices[0],
                slice_of(
                    [("b1", ("p3", "p4"))],
                    index=1,
                    clique=CLIQUE_B,
                    channel=2,
                    first_rank=3,
                    size=3,
                ),
            ),
            pods=TWO_SLICES_PODS[:5],
        ),
        Expected(
            ready="False/WaitingForPlacement",
            placed="True/Placed",
            degraded="True/MembersMissing",
            phase="Degraded",
            nodes="Ready,Ready,Ready",
        ),
        id="slice 1 lost a member to a fault and waits for room",
    ),
    pytest.param(
        two_slice_facts(
            nodes={**TWO_SLICES_NODES, "a2": node("a2", imex="False", imex_reason="Starting")},
            pods=TWO_SLICES_PODS[:5],
        ),
        Expected(
            ready="False/ImexNotReady",
            placed="True/Placed",
            degraded="True/ImexNotReady",
            phase="Degraded",
            nodes="Ready,NotReady,Ready,NotReady",
        ),
        id="IMEX down in slice 0 while a pod of slice 1 is gone",
    ),
]


@pytest.mark.parametrize(("situation", "expected"), SLICES_TABLE)
def test_status_table_of_a_domain_in_two_slices(situation: DomainFacts, expected: Expected) -> None:
    assert summary(situation) == expected


def test_a_two_slice_domain_ready_in_full() -> None:
    assessment = compute_status(two_slice_facts(), previous=EMPTY, now=NOW)
    status = assessment.status
    assert (status.status, status.clique, status.channel) == ("Ready", None, None)
    assert [(n.name, n.clique_id, n.index, n.status) for n in status.nodes] == [
        ("a1", CLIQUE, 0, "Ready"),
        ("a2", CLIQUE, 1, "Ready"),
        ("b1", CLIQUE_B, 0, "Ready"),
        ("b2", CLIQUE_B, 1, "Ready"),
    ]
    assert status.cliques == (
        ComputeDomainClique(
            clique=CLIQUE, channel=7, slices=(0,), nodes=2, ready_nodes=2, pods=3, running_pods=3
        ),
        ComputeDomainClique(
            clique=CLIQUE_B, channel=2, slices=(1,), nodes=2, ready_nodes=2, pods=3, running_pods=3
        ),
    )
    messages = {c.type: c.message for c in status.conditions}
    assert messages["Placed"] == (
        f"6 pods on 4 nodes in 2 slices across 2 cliques: {CLIQUE} channel 7, {CLIQUE_B} channel 2"
    )
    assert messages["Ready"] == (
        "6 pods running on 4 nodes in 2 slices across 2 cliques, IMEX ready on each"
    )
    assert [m.clique for m in assessment.members] == [CLIQUE, CLIQUE, CLIQUE_B, CLIQUE_B]
    assert assessment.slices == (
        DomainSlice(
            index=0,
            clique=CLIQUE,
            channel=7,
            first_rank=0,
            size=3,
            pods=3,
            running=3,
            nodes=("a1", "a2"),
        ),
        DomainSlice(
            index=1,
            clique=CLIQUE_B,
            channel=2,
            first_rank=3,
            size=3,
            pods=3,
            running=3,
            nodes=("b1", "b2"),
        ),
    )
    assert assessment.size == 6


def test_a_fault_in_one_slice_changes_only_its_nodes_and_clique() -> None:
    healthy = compute_status(two_slice_facts(), previous=EMPTY, now=NOW).status
    faulty = compute_status(
        two_slice_facts(
            nodes={**TWO_SLICES_NODES, "b1": node("b1", faults=("cdo.dev/gpu-fault=x:NoExecute",))}
        ),
        previous=EMPTY,
        now=NOW,
    ).status
    assert faulty.nodes[:2] == healthy.nodes[:2]
    assert [n.status for n in faulty.nodes[2:]] == ["NotReady", "Ready"]
    assert faulty.cliques[0] == healthy.cliques[0]
    assert (faulty.cliques[1].ready_nodes, faulty.cliques[1].running_pods) == (1, 3)
    degraded = faulty.condition("Degraded")
    assert degraded is not None
    assert degraded.message == "node b1 has fault taint cdo.dev/gpu-fault=x:NoExecute"


def test_members_missing_names_the_slice_short_of_room() -> None:
    short = sliced(
        TWO_SLICES.slices[0],
        slice_of([("b1", ("p3", "p4"))], index=1, clique=CLIQUE_B, channel=2, first_rank=3, size=3),
    )
    status = compute_status(
        two_slice_facts(placement=short, pods=TWO_SLICES_PODS[:5]), previous=EMPTY, now=NOW
    ).status
    degraded = status.condition("Degraded")
    assert degraded is not None and degraded.reason == "MembersMissing"
    assert degraded.message == (
        f"room reserved for 5 of 6 pods: slice 1 in clique {CLIQUE_B} holds room for 2 of its "
        "3 pods"
    )
    ready = status.condition("Ready")
    assert ready is not None and ready.message == "5 of 6 pods placed"


def test_members_missing_counts_pods_no_slice_covers() -> None:
    grown = sliced(*TWO_SLICES.slices, size=8)
    degraded = compute_status(
        two_slice_facts(placement=grown), previous=EMPTY, now=NOW
    ).status.condition("Degraded")
    assert degraded is not None
    assert degraded.message == "room reserved for 6 of 8 pods: 2 pods in no slice yet"


def test_members_missing_of_one_slice_keeps_its_wording() -> None:
    degraded = compute_status(
        facts(placement=placement(("n1", ("p1", "p2")), ("n2", ("p3",)), size=4)),
        previous=EMPTY,
        now=NOW,
    ).status.condition("Degraded")
    assert degraded is not None
    assert degraded.message == (
        f"room reserved for 3 of 4 pods; the rest wait for room in clique {CLIQUE}"
    )


def test_slices_in_one_clique_keep_clique_and_channel_and_share_a_node_once() -> None:
    spec = sliced(
        slice_of([("n1", ("p1",)), ("n2", ("p2",))], index=0),
        slice_of([("n2", ("p3",))], index=1, first_rank=2, first_slot=1),
    )
    pods = (pod("p1", "n1"), pod("p2", "n2"), pod("p3", "n2", "Pending"))
    assessment = compute_status(facts(placement=spec, pods=pods), previous=EMPTY, now=NOW)
    status = assessment.status
    assert (status.clique, status.channel) == (CLIQUE, 7)
    assert [(n.name, n.index, n.status) for n in status.nodes] == [
        ("n1", 0, "Ready"),
        ("n2", 1, "NotReady"),
    ]
    assert status.cliques == (
        ComputeDomainClique(
            clique=CLIQUE, channel=7, slices=(0, 1), nodes=2, ready_nodes=1, pods=3, running_pods=2
        ),
    )
    placed = status.condition("Placed")
    assert placed is not None
    assert placed.message == f"3 pods on 2 nodes in 2 slices of clique {CLIQUE}, channel 7"
    assert [(m.node, m.pods, m.gpus) for m in assessment.members] == [("n1", 1, 2), ("n2", 2, 4)]
    assert [(s.index, s.pods, s.running, s.nodes) for s in assessment.slices] == [
        (0, 2, 2, ("n1", "n2")),
        (1, 1, 0, ("n2",)),
    ]


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"pods": (pod("p1", "n1"), pod("p2", "n1", "Pending"), pod("p3", "n2"))},
        {"nodes": {**NODES_OK, "n2": node("n2", faults=("cdo.dev/gpu-fault=x:NoExecute",))}},
        {"deleting": True},
    ],
    ids=["ready", "pod pending", "fault", "deleting"],
)
def test_a_placement_of_the_first_release_gives_the_same_status(
    changes: dict[str, object],
) -> None:
    members = (("n1", ("p1", "p2")), ("n2", ("p3",)))
    legacy = compute_status(
        facts(placement=legacy_placement(*members), **changes), previous=EMPTY, now=NOW
    )
    current = compute_status(
        facts(placement=placement(*members), **changes), previous=EMPTY, now=NOW
    )
    assert legacy == current
    assert (legacy.status.clique, legacy.status.channel) == (CLIQUE, 7)
    assert [(n.name, n.index) for n in legacy.status.nodes] == [("n1", 0), ("n2", 1)]


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
        DomainMember(
            node="n1", index=0, address="10.0.0.2", pods=2, gpus=4, status="Ready", clique=CLIQUE
        ),
        DomainMember(
            node="n2", index=1, address="10.0.0.2", pods=1, gpus=2, status="Ready", clique=CLIQUE
        ),
    )
    assert status.cliques == (
        ComputeDomainClique(
            clique=CLIQUE, channel=7, slices=(0,), nodes=2, ready_nodes=2, pods=3, running_pods=3
        ),
    )
    assert (assessment.size, assessment.reason, assessment.deletion) == (3, "AllMembersReady", None)


def test_members_follow_slot_order_not_list_order() -> None:
    spec = placement(("n1", ("p1",)), ("n2", ("p3",)))
    (piece,) = spec.slices
    reordered = msgspec.structs.replace(
        spec, slices=(msgspec.structs.replace(piece, members=tuple(reversed(piece.members))),)
    )
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


def test_a_placement_without_slices_is_placed_but_holds_nothing() -> None:
    status = compute_status(
        facts(placement=sliced(size=0), pods=(), nodes={}), previous=EMPTY, now=NOW
    ).status
    assert (status.nodes, status.cliques, status.clique, status.channel) == ((), (), None, None)
    reasons = {c.type: (c.status, c.reason, c.message) for c in status.conditions}
    assert reasons["Placed"] == ("True", "Placed", "the allocator's record holds no slice yet")
    assert reasons["Ready"] == ("False", "WaitingForPlacement", "0 of 0 pods placed")
    assert reasons["Degraded"][:2] == ("False", "Healthy")


def test_a_stuck_slice_is_named_in_degraded_and_a_move_in_placed() -> None:
    stuck = msgspec.structs.replace(TWO_SLICES.slices[1], waiting_since=EARLIER)
    moved = msgspec.structs.replace(
        TWO_SLICES.slices[0], moved_from="0000-lost.1", moved_at=EARLIER
    )
    spec = msgspec.structs.replace(TWO_SLICES, slices=(moved, stuck))
    nodes = {**TWO_SLICES_NODES, "b1": node("b1", kubelet_ready="False")}

    status = compute_status(two_slice_facts(placement=spec, nodes=nodes), previous=EMPTY, now=NOW)

    degraded = status.status.condition("Degraded")
    placed = status.status.condition("Placed")
    assert degraded is not None and placed is not None
    assert degraded.status == "True"
    assert f"slice 1 cannot be made whole in clique {CLIQUE_B} since" in degraded.message
    assert "slice 0 failed over from clique 0000-lost.1 at" in placed.message


def test_a_member_that_left_its_slices_clique_degrades_the_domain() -> None:
    nodes = {**TWO_SLICES_NODES, "b1": node("b1", clique="")}

    status = compute_status(two_slice_facts(nodes=nodes), previous=EMPTY, now=NOW)

    degraded = status.status.condition("Degraded")
    assert degraded is not None and degraded.status == "True"
    assert degraded.reason == "NodeOutOfClique"
    assert degraded.message.startswith(f"node b1 is out of clique {CLIQUE_B} (no clique label)")
    entries = {entry.name: entry.status for entry in status.status.nodes}
    assert entries["b1"] == "NotReady" and entries["a1"] == "Ready"


WITHOUT_NVLINK = PlacementSpec(gpus_per_pod=8, size=3, multi_node_nvlink=False)
NO_IMEX = {name: node(name, imex="False", imex_reason="NoClique") for name in ("h1", "h2")}


@pytest.mark.parametrize(
    ("pods", "nodes", "expected"),
    [
        pytest.param(
            (pod("p1", "h1"), pod("p2", "h1"), pod("p3", "h2")),
            NO_IMEX,
            Expected(
                ready="True/AllMembersReady",
                placed="True/PlacedWithoutNvlink",
                degraded="False/Healthy",
                phase="Ready",
                nodes="Ready,Ready",
            ),
            id="all running: Ready, IMEX does not count",
        ),
        pytest.param(
            (pod("p1", "h1"), pod("p2", "h1", phase="Pending"), pod("p3", "")),
            NO_IMEX,
            Expected(
                ready="False/PodsNotRunning",
                placed="True/PlacedWithoutNvlink",
                degraded="False/Healthy",
                phase="Placed",
                nodes="NotReady",
            ),
            id="one pending, one unscheduled",
        ),
        pytest.param(
            (pod("p1", "h1"), pod("p2", "h1"), pod("p3", "h2")),
            {**NO_IMEX, "h2": node("h2", kubelet_ready="False", imex="False")},
            Expected(
                ready="False/NodeNotReady",
                placed="True/PlacedWithoutNvlink",
                degraded="True/NodeNotReady",
                phase="Degraded",
                nodes="Ready,NotReady",
            ),
            id="a node not Ready",
        ),
    ],
)
def test_a_domain_without_nvlink(
    pods: tuple[PodFacts, ...], nodes: dict[str, NodeFacts], expected: Expected
) -> None:
    assert summary(facts(placement=WITHOUT_NVLINK, pods=pods, nodes=nodes)) == expected


def test_a_domain_without_nvlink_lists_its_nodes_as_nvidia_does() -> None:
    pods = (pod("p1", "h1"), pod("p2", "h1"), pod("p3", "h2"))
    status = compute_status(
        facts(placement=WITHOUT_NVLINK, pods=pods, nodes=NO_IMEX), previous=EMPTY, now=NOW
    ).status
    assert [(n.name, n.clique_id, n.index) for n in status.nodes] == [
        ("h1", "", -1),
        ("h2", "", -1),
    ]
    assert status.cliques == () and status.clique is None and status.channel is None
    placed = status.condition("Placed")
    assert placed is not None and "runs without IMEX" in placed.message


def test_gang_units_in_one_clique_name_no_one_channel_and_each_slice_its_unit() -> None:
    units = msgspec.structs.replace(
        TWO_SLICES,
        slices=(
            msgspec.structs.replace(TWO_SLICES.slices[0], unit="serve-0"),
            msgspec.structs.replace(
                TWO_SLICES.slices[1], unit="serve-1", clique=CLIQUE, first_rank=0
            ),
        ),
    )
    assessment = compute_status(two_slice_facts(placement=units), previous=EMPTY, now=NOW)
    assert (assessment.status.clique, assessment.status.channel) == (CLIQUE, None)
    assert [(s.unit, s.channel, s.first_rank) for s in assessment.slices] == [
        ("serve-0", 7, 0),
        ("serve-1", 2, 0),
    ]


@pytest.mark.parametrize(
    ("per_gpu_faults", "expected"),
    [
        (None, None),  # no DRA GPU among the domain's pods: nothing to say
        (True, "True/DeviceTaintRules"),
        (False, "False/DeviceTaintRuleNotServed"),
    ],
)
def test_per_gpu_faults_says_what_a_fault_of_one_dra_gpu_takes(
    per_gpu_faults: bool | None, expected: str | None
) -> None:
    status = compute_status(facts(per_gpu_faults=per_gpu_faults), previous=EMPTY, now=NOW).status
    condition = status.condition("PerGpuFaults")
    found = None if condition is None else f"{condition.status}/{condition.reason}"
    assert found == expected
    ready = status.condition("Ready")
    assert ready is not None and ready.status == "True"  # it changes what a fault takes, not Ready
    if per_gpu_faults is False:
        assert condition is not None
        assert "devicetaintrules.resource.k8s.io/v1" in condition.message
        assert "whole node" in condition.message


# -- pods that ask only for the channel ---------------------------------------------------------


def channel_only(
    *seats: tuple[str, int, tuple[str, ...]], gpus: PlacementSpec | None = None, wanted: int = -1
) -> PlacementSpec:
    """``gpus`` (none: a domain of channel-only pods, in clique CLIQUE on channel 7) with pods
    that ask for no GPU seated on (node, slot); ``wanted``: the record's channelOnly (default:
    the pods seated)."""
    base = gpus or PlacementSpec(gpus_per_pod=0, size=0, slices=(slice_of([], channel=7, size=0),))
    piece = base.slices[0]
    members = list(piece.members)
    for node_name, slot, names in seats:
        extra = tuple(PodRef(name=name, uid=f"u-{name}") for name in names)
        found = next((i for i, m in enumerate(members) if m.node == node_name), None)
        if found is None:
            members.append(SliceMember(node=node_name, slot=slot, channel_only_pods=extra))
        else:
            members[found] = msgspec.structs.replace(members[found], channel_only_pods=extra)
    count = sum(len(names) for _, _, names in seats) if wanted < 0 else wanted
    return msgspec.structs.replace(
        base,
        channel_only=count,
        slices=(msgspec.structs.replace(piece, members=tuple(members)), *base.slices[1:]),
    )


SMOKE = channel_only(("n1", 3, ("smoke",)))


def test_a_domain_of_one_channel_only_pod_is_ready_while_it_runs_with_its_node_listed() -> None:
    # NVIDIA's channel-injection check: one pod, no GPU, Ready with its node in status.nodes.
    running = facts(placement=SMOKE, pods=(pod("smoke", "n1"),), nodes={"n1": node("n1")})
    assessment = compute_status(running, previous=EMPTY, now=NOW)
    status = assessment.status
    assert (status.status, status.clique, status.channel) == ("Ready", CLIQUE, 7)
    assert [(n.name, n.index, n.clique_id, n.status) for n in status.nodes] == [
        ("n1", 3, CLIQUE, "Ready")
    ]
    ready = status.condition("Ready")
    assert ready is not None and ready.message.startswith("1 pods running on 1 nodes")
    assert assessment.size == 1
    assert [m.pods for m in assessment.members] == [1]
    (clique,) = status.cliques
    assert (clique.pods, clique.running_pods, clique.nodes) == (1, 1, 1)

    pending = facts(
        placement=SMOKE, pods=(pod("smoke", "n1", "Pending"),), nodes={"n1": node("n1")}
    )
    assert summary(pending).ready == "False/PodsNotRunning"
    assert summary(pending).nodes == "NotReady"


def test_once_the_channel_only_pod_is_gone_the_domain_is_not_ready_and_lists_no_node() -> None:
    # The allocator keeps the slice (clique and channel) and drops the pod's seat.
    gone = facts(placement=channel_only(), pods=(), nodes={"n1": node("n1")})
    status = compute_status(gone, previous=EMPTY, now=NOW).status
    assert (status.status, status.nodes) == ("NotReady", ())
    ready = status.condition("Ready")
    assert ready is not None
    assert (ready.reason, ready.message) == ("WaitingForPlacement", "0 of 0 pods placed")


def test_a_channel_only_pod_beside_gpu_pods_counts_in_the_gang() -> None:
    # p1, p2 on n1 and p3 on n2 take GPUs; the coordinator takes n1's channel with them.
    mixed = channel_only(("n1", 0, ("coordinator",)), gpus=TWO_NODES)
    running = (*PODS_RUNNING, pod("coordinator", "n1"))
    status = compute_status(facts(placement=mixed, pods=running), previous=EMPTY, now=NOW)
    assert status.status.status == "Ready"
    assert [n.name for n in status.status.nodes] == ["n1", "n2"]
    (clique,) = status.status.cliques
    assert (clique.pods, clique.running_pods) == (4, 4)

    waiting = facts(placement=mixed, pods=(*PODS_RUNNING, pod("coordinator", "n1", "Pending")))
    assert summary(waiting).ready == "False/PodsNotRunning"
    unseated = channel_only(gpus=TWO_NODES, wanted=1)
    ready = compute_status(
        facts(placement=unseated, pods=PODS_RUNNING), previous=EMPTY, now=NOW
    ).status.condition("Ready")
    assert ready is not None
    assert (ready.reason, ready.message) == ("WaitingForPlacement", "3 of 4 pods placed")


def test_a_node_with_only_channel_only_pods_is_a_member_with_its_slot() -> None:
    mixed = channel_only(("n3", 5, ("coordinator",)), gpus=TWO_NODES)
    running = (*PODS_RUNNING, pod("coordinator", "n3"))
    nodes = {**NODES_OK, "n3": node("n3")}
    status = compute_status(
        facts(placement=mixed, pods=running, nodes=nodes), previous=EMPTY, now=NOW
    ).status
    assert [(n.name, n.index, n.status) for n in status.nodes] == [
        ("n1", 0, "Ready"),
        ("n2", 1, "Ready"),
        ("n3", 5, "Ready"),
    ]
    degraded = status.condition("Degraded")
    assert degraded is not None and degraded.reason == "Healthy"
