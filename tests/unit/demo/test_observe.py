"""From API objects to what the demo shows: pod counts, IMEX readiness, taints, the domain."""

from __future__ import annotations

from typing import Any

import msgspec

from shared.crds import ComputeDomain
from shared.kube.models import Node, Pod
from sim.demo.observe import TRACE_CONTEXT_ANNOTATION, ClusterView, cluster_view, pod_counts

CLIQUE = "0f3c2a4e-0000-0000-0000-000000000001.1"


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
    *, ready: bool, degraded: str = "", annotations: dict[str, str] | None = None
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

    return msgspec.convert(
        {
            "metadata": {"name": "training-domain-1", "annotations": annotations or {}},
            "spec": {"channel": {"resourceClaimTemplate": {"name": "training-domain-1-rct"}}},
            "status": {
                "status": "Ready" if ready else "NotReady",
                "clique": CLIQUE,
                "channel": 3,
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
