"""Domains without multi-node NVLink: when no clique can take the gang's pods and GPU nodes on
no NVLink fabric can, the domain runs without IMEX: its pods go to the scheduler unpinned."""

from __future__ import annotations

import msgspec

from services.clique_allocator.gang import GangSize
from services.clique_allocator.nodes import without_nvlink
from services.clique_allocator.placement import NodeLimits
from services.clique_allocator.plan import plan_domain
from services.clique_allocator.planning.nvlinkless import WITHOUT_NVLINK
from services.clique_allocator.planning.outcome import Pin, Plan
from services.clique_allocator.routing import node_changed
from services.clique_allocator.writes import pin_patch
from shared.crds.placement import PlacementSpec
from shared.kube.keys import ObjectKey
from shared.kube.models import Node

from .builders import CLIQUE_A, domain, node, pod, rack, view

PODS = [pod(f"train-{i}", gpus=8) for i in range(4)]
RECORD = PlacementSpec(gpus_per_pod=8, size=4, multi_node_nvlink=False)


def run(
    *,
    nodes: list[Node],
    without: int,
    placement: PlacementSpec | None = None,
    limits: NodeLimits | None = None,
) -> Plan:
    return plan_domain(
        key="default/train",
        domain=domain(),
        placement=placement,
        pods=PODS,
        gang=GangSize(pods=4, source="ReplicaSet"),
        view=view(nodes, **({"train": placement} if placement is not None else {})),
        nodes_without_nvlink=without,
        limits=(lambda _gpus: limits) if limits is not None else None,
    )


def hgx(name: str, *, gpus: int = 8, **kw: object) -> Node:
    base = node(name, clique=None, gpus=gpus, **kw)  # type: ignore[arg-type]
    labels = {**base.metadata.labels, "cdo.dev/multi-node-nvlink": "false"}
    return msgspec.structs.replace(
        base, metadata=msgspec.structs.replace(base.metadata, labels=labels)
    )


def test_no_clique_and_nodes_without_nvlink_release_every_pod_unpinned() -> None:
    plan = run(nodes=[], without=4)
    assert plan.action == "write" and plan.record == RECORD
    assert plan.pins == tuple(Pin(pod=f"train-{i}", node="") for i in range(4))
    assert [notice.reason for notice in plan.notices] == [WITHOUT_NVLINK]
    assert plan.holds == () and not plan.waiting


def test_a_record_without_nvlink_keeps_releasing_new_pods_even_once_a_clique_exists() -> None:
    plan = run(nodes=rack("a", CLIQUE_A), without=0, placement=RECORD)
    assert plan.action == "keep" and len(plan.pins) == 4 and plan.notices == ()


def test_without_nodes_on_no_nvlink_fabric_a_gang_no_clique_takes_waits() -> None:
    plan = run(nodes=rack("a", CLIQUE_A, count=2), without=0)  # 4-GPU trays, 8-GPU pods
    assert plan.record is None and plan.waiting and plan.pins == ()


def test_pods_no_clique_node_can_hold_go_to_nodes_without_nvlink() -> None:
    plan = run(nodes=rack("a", CLIQUE_A, count=2), without=4)  # 4-GPU trays, 8-GPU pods
    assert plan.record == RECORD and all(pin.node == "" for pin in plan.pins)


def test_a_clique_that_can_take_the_pods_wins_over_nodes_without_nvlink() -> None:
    eight = [node(f"a-n{i}", clique=CLIQUE_A, gpus=8) for i in range(4)]
    plan = run(nodes=eight, without=4)
    assert plan.record is not None and plan.record.multi_node_nvlink
    assert {pin.node for pin in plan.pins} == {f"a-n{i}" for i in range(4)}


def test_pods_whose_constraints_rule_out_every_clique_node_go_to_nodes_without_nvlink() -> None:
    """A mixed cluster: the pods select the pool of servers without NVLink (say by a node
    selector no tray matches), so no clique can take them."""
    eight = [node(f"a-n{i}", clique=CLIQUE_A, gpus=8) for i in range(4)]
    ruled_out = NodeLimits(excluded=frozenset(n.metadata.name for n in eight), why="selector")
    assert run(nodes=eight, without=4, limits=ruled_out).record == RECORD
    assert run(nodes=eight, without=0, limits=ruled_out).record is None  # waits instead


def test_which_nodes_count_as_without_nvlink() -> None:
    assert without_nvlink(hgx("h0"))
    assert not without_nvlink(node("h1", clique=None, gpus=8))  # not looked at yet: no label
    assert not without_nvlink(hgx("h2", ready="False"))
    assert not without_nvlink(hgx("h3", unschedulable=True))
    assert not without_nvlink(
        hgx("h4", taints=[{"key": "cdo.dev/gpu-fault", "value": "x", "effect": "NoSchedule"}])
    )
    assert not without_nvlink(hgx("h5", gpus=0))


def test_a_node_without_nvlink_that_comes_or_goes_changes_capacity() -> None:
    def none(name: str) -> list[ObjectKey]:
        return []

    assert node_changed(None, hgx("h0"), placed_on=none).capacity is True
    assert node_changed(hgx("h0"), None, placed_on=none).capacity is False
    assert node_changed(hgx("h0"), hgx("h0"), placed_on=none).capacity is None


def test_an_unpinned_release_removes_the_gate_and_sets_no_node() -> None:
    assert pin_patch(PODS[0], "") == {
        "metadata": {"uid": PODS[0].metadata.uid},
        "spec": {"schedulingGates": None},
    }
