"""From API objects to what the demo shows: pod counts, IMEX readiness, taints, the domain (in
one clique or several) and its Placement's slices."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from shared.crds import ComputeDomain, Placement
from shared.kube.models import Node, Pod
from sim.demo.observe import (
    TRACE_CONTEXT_ANNOTATION,
    CliqueView,
    ClusterView,
    SliceView,
    cluster_view,
    pod_counts,
    slice_views,
)

CLIQUE = "0f3c2a4e-0000-0000-0000-000000000001.1"
OTHER = "7d1b9c20-0000-0000-0000-000000000002.1"


def pod(
    name: str,
    *,
    phase: str = "Pending",
    node: str = "",
    gated: bool = False,
    waiting: str = "",
    deleting: bool = False,
) -> Pod:
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if deleting:
        metadata["deletionTimestamp"] = "2025-01-31T12:00:00Z"
    conditions = (
        [{"type": "cdo.dev/Placed", "status": "False", "reason": waiting, "message": "full"}]
        if waiting
        else []
    )
    return msgspec.convert(
        {
            "metadata": metadata,
            "spec": {
                "nodeName": node,
                "schedulingGates": [{"name": "cdo.dev/placement"}] if gated else [],
            },
            "status": {"phase": phase, "conditions": conditions},
        },
        Pod,
    )


def node(name: str, *, imex: bool = True, taint: str = "") -> Node:
    return msgspec.convert(
        {
            "metadata": {"name": name, "labels": {"nvidia.com/gpu.clique": CLIQUE}},
            "spec": {"taints": [{"key": "cdo.dev/gpu-fault", "effect": taint}] if taint else []},
            "status": {
                "conditions": [{"type": "cdo.dev/ImexReady", "status": "True" if imex else "False"}]
            },
        },
        Node,
    )


def domain(
    *,
    ready: bool,
    degraded: str = "",
    annotations: dict[str, str] | None = None,
    spans: bool = False,
) -> ComputeDomain:
    stamp = "2025-01-31T12:00:00Z"

    def condition(kind: str, status: bool, reason: str) -> dict[str, Any]:
        return {
            "type": kind,
            "status": "True" if status else "False",
            "reason": reason,
            "message": "",
            "lastTransitionTime": stamp,
        }

    one_clique: dict[str, Any] = {
        "clique": CLIQUE,
        "channel": 3,
        "cliques": [{"clique": CLIQUE, "channel": 3, "slices": [0], "nodes": 1}],
    }
    two_cliques: dict[str, Any] = {
        "cliques": [
            {"clique": CLIQUE, "channel": 3, "slices": [0], "nodes": 1, "pods": 2},
            {"clique": OTHER, "channel": 0, "slices": [1], "nodes": 1, "pods": 2, "runningPods": 1},
        ]
    }
    return msgspec.convert(
        {
            "metadata": {"name": "training-domain-1", "annotations": annotations or {}},
            "spec": {"channel": {"resourceClaimTemplate": {"name": "training-domain-1-rct"}}},
            "status": {
                "status": "Ready" if ready else "NotReady",
                **(two_cliques if spans else one_clique),
                "nodes": [{"name": "n1", "index": 0, "status": "Ready"}],
                "conditions": [
                    condition("Placed", True, "Placed"),
                    condition("Degraded", bool(degraded), degraded or "Healthy"),
                    condition("Ready", ready, "AllMembersReady" if ready else "PodsNotRunning"),
                ],
            },
        },
        ComputeDomain,
    )


def test_pods_are_counted_gated_placed_and_running_and_finished_ones_left_out() -> None:
    counts = pod_counts(
        [
            pod("a", gated=True),
            pod("b", gated=True, waiting="CliqueFull"),
            pod("c", node="n1"),
            pod("d", node="n2", phase="Running"),
            pod("e", node="n3", phase="Running", deleting=True),
            pod("f", node="n4", phase="Failed"),
        ]
    )
    assert (counts.total, counts.gated, counts.placed, counts.running) == (4, 2, 2, 1)
    assert counts.waiting == "CliqueFull"


def test_the_view_has_imex_readiness_taints_cliques_and_running_pods_by_node() -> None:
    view = cluster_view(
        [pod("a", node="n1", phase="Running"), pod("b", gated=True)],
        [node("n1"), node("n2", imex=False, taint="NoExecute")],
        domain(ready=False, degraded="NodeFault"),
    )
    assert (view.nodes, view.imex_ready) == (2, 1)
    assert view.tainted == {"n2": "NoExecute"}
    assert view.cliques == {"n1": CLIQUE, "n2": CLIQUE}
    assert view.pod_nodes == {"a": "n1"}
    assert view.domain is not None
    assert (view.domain.phase, view.domain.reason) == ("Degraded", "NodeFault")
    assert (view.domain.clique, view.domain.channel, view.domain.members) == (CLIQUE, 3, ("n1",))


def test_ready_with_needs_the_domain_ready_and_exactly_that_many_pods_running() -> None:
    running = [pod("a", node="n1", phase="Running")]
    assert cluster_view(running, [node("n1")], domain(ready=True)).ready_with(1)
    assert not cluster_view(running, [node("n1")], domain(ready=True)).ready_with(2)
    assert not cluster_view(running, [node("n1")], domain(ready=False)).ready_with(1)
    assert not ClusterView().ready_with(0)


def test_the_domain_trace_context_annotation_is_read_when_present() -> None:
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    view = cluster_view(
        [], [], domain(ready=True, annotations={TRACE_CONTEXT_ANNOTATION: traceparent})
    )
    assert view.domain is not None and view.domain.trace_context == traceparent
    plain = cluster_view([], [], domain(ready=True))
    assert plain.domain is not None and plain.domain.trace_context is None


def placement(*slices: dict[str, Any]) -> Placement:
    return msgspec.convert(
        {
            "metadata": {"name": "training-domain-2", "namespace": "default"},
            "spec": {"gpusPerPod": 4, "size": 4, "slices": list(slices)},
        },
        Placement,
    )


def piece(index: int, clique: str, first: int, nodes: list[tuple[str, int, int]]) -> dict[str, Any]:
    """A slice; ``nodes``: (name, slot, pods pinned there) in any order."""
    members = [
        {
            "node": name,
            "slot": slot,
            "gpus": 4,
            "pods": [{"name": f"{name}-p{i}", "rank": first + i} for i in range(pods)],
        }
        for name, slot, pods in nodes
    ]
    size = sum(pods for _, _, pods in nodes)
    return {
        "index": index,
        "clique": clique,
        "channel": index,
        "firstRank": first,
        "size": size,
        "members": members,
    }


def test_a_domain_in_several_cliques_has_no_single_clique_and_lists_each() -> None:
    view = cluster_view([], [], domain(ready=False, spans=True))
    assert view.domain is not None
    assert (view.domain.clique, view.domain.channel) == (None, None)
    assert view.domain.cliques == (
        CliqueView(clique=CLIQUE, channel=3, nodes=1, pods=2),
        CliqueView(clique=OTHER, channel=0, nodes=1, pods=2, running_pods=1),
    )
    single = cluster_view([], [], domain(ready=True)).domain
    assert single is not None and single.clique == CLIQUE
    assert [c.clique for c in single.cliques] == [CLIQUE]


def test_slices_are_read_by_index_with_their_nodes_in_slot_order() -> None:
    record = placement(
        piece(1, OTHER, 2, [("b2", 5, 1), ("b1", 1, 1)]),
        piece(0, CLIQUE, 0, [("a1", 0, 2)]),
    )
    assert slice_views(record) == (
        SliceView(index=0, clique=CLIQUE, channel=0, first_rank=0, size=2, nodes=("a1",), pods=2),
        SliceView(
            index=1, clique=OTHER, channel=1, first_rank=2, size=2, nodes=("b1", "b2"), pods=2
        ),
    )
    assert slice_views(record)[1].last_rank == 3


def test_a_first_release_placement_reads_as_one_slice() -> None:
    legacy = msgspec.convert(
        {
            "metadata": {"name": "old", "namespace": "default"},
            "spec": {
                "gpusPerPod": 4,
                "size": 2,
                "clique": CLIQUE,
                "channel": 7,
                "members": [{"node": "n1", "slot": 0, "gpus": 8, "pods": ["x", "y"]}],
            },
        },
        Placement,
    )
    (only,) = slice_views(legacy)
    assert (only.clique, only.channel, only.first_rank, only.size, only.pods) == (
        CLIQUE,
        7,
        0,
        2,
        2,
    )


def test_the_view_carries_the_placement_when_there_is_one() -> None:
    record = placement(piece(0, CLIQUE, 0, [("n1", 0, 1)]))
    view = cluster_view([], [node("n1")], domain(ready=True), record)
    assert view.has_placement and [s.index for s in view.slices] == [0]
    bare = cluster_view([], [node("n1")], domain(ready=True))
    assert not bare.has_placement and bare.slices == ()


def test_terminating_pods_are_counted_apart_and_keep_a_workload_from_being_gone() -> None:
    counts = pod_counts(
        [
            pod("a", node="n1", phase="Running", deleting=True),
            pod("b", node="n2", phase="Succeeded", deleting=True),
        ]
    )
    assert (counts.total, counts.terminating) == (0, 1)
    assert not ClusterView(pods=counts).gone()
    assert ClusterView().gone()
    assert not cluster_view([], [], domain(ready=True)).gone()
    record = placement(piece(0, CLIQUE, 0, [("n1", 0, 1)]))
    assert not cluster_view([], [], None, record).gone()


def test_a_slices_failover_marks_are_read() -> None:
    stuck = {**piece(0, CLIQUE, 0, [("a1", 0, 2)]), "waitingSince": "2025-01-01T00:00:05Z"}
    moved = {**piece(1, OTHER, 2, [("b1", 0, 2)]), "movedFrom": CLIQUE}
    first, second = slice_views(placement(stuck, moved))
    assert first.waiting_since == datetime(2025, 1, 1, 0, 0, 5, tzinfo=UTC)
    assert first.moved_from == ""
    assert (second.waiting_since, second.moved_from) == (None, CLIQUE)
