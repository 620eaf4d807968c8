"""From Node objects to the engine's cliques: who takes part, health, slots."""

from __future__ import annotations

from typing import Any

import pytest

from services.clique_allocator.nodes import NodeFacts, build_cliques, node_facts
from services.clique_allocator.placement import Clique
from services.clique_allocator.placement import Node as EngineNode
from shared.kube.models import Node

from .builders import CLIQUE_A, CLIQUE_B, node


def verdict(item: Node) -> tuple[bool, bool, tuple[str, ...]] | None:
    facts = node_facts(item)
    return None if facts is None else (facts.healthy, facts.schedulable, facts.problems)


FAULT = {"key": "cdo.dev/gpu-fault", "value": "xid-79", "effect": "NoExecute"}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param({}, (True, True, ()), id="healthy"),
        pytest.param({"clique": None}, None, id="no clique label: fabric trouble, left out"),
        pytest.param({"gpus": 0}, None, id="no GPUs: left out"),
        pytest.param({"ready": "False"}, (False, True, ("NotReady",)), id="NotReady"),
        pytest.param({"ready": "Unknown"}, (False, True, ("NotReady",)), id="unknown Ready"),
        pytest.param({"taints": [FAULT]}, (False, True, ("cdo.dev/gpu-fault=xid-79",)),
                     id="fault taint"),
        pytest.param({"taints": [{"key": "node.kubernetes.io/unreachable",
                                  "effect": "NoExecute"}]},
                     (False, True, ("node.kubernetes.io/unreachable",)), id="lifecycle taint"),
        pytest.param({"taints": [{"key": "node.kubernetes.io/memory-pressure",
                                  "effect": "PreferNoSchedule"}]},
                     (True, True, ()), id="a soft lifecycle taint does not count"),
        pytest.param({"taints": [{"key": "example.com/team", "effect": "NoSchedule"}]},
                     (True, True, ()), id="user taints are not the allocator's business"),
        pytest.param({"unschedulable": True}, (True, False, ("Cordoned",)), id="cordoned"),
        pytest.param({"taints": [{"key": "node.kubernetes.io/unschedulable",
                                  "effect": "NoSchedule"}]},
                     (True, False, ("Cordoned",)), id="cordon taint"),
        pytest.param({"conditions": [{"type": "cdo.dev/GpuHealthy", "status": "False"}]},
                     (False, True, ("GpuUnhealthy",)), id="GPU health condition"),
        pytest.param({"ready": "False", "unschedulable": True},
                     (False, False, ("NotReady", "Cordoned")), id="both"),
    ],
)  # fmt: skip
def test_node_facts(fields: dict[str, Any], expected: object) -> None:
    assert verdict(node("n", **fields)) == expected


def test_slot_comes_from_the_imex_agent_when_written_for_this_clique() -> None:
    mine = {"cdo.dev/imex-slot": "7", "cdo.dev/imex-clique": CLIQUE_A}
    stale = {"cdo.dev/imex-slot": "7", "cdo.dev/imex-clique": CLIQUE_B}
    assert _slot(node("a", annotations=mine)) == 7
    assert _slot(node("a", annotations=stale)) is None
    assert _slot(node("a", annotations={"cdo.dev/imex-slot": "x"})) is None
    assert _slot(node("a", annotations={"cdo.dev/imex-slot": "-1"})) is None
    assert _slot(node("a", annotations={"cdo.dev/imex-slot": "3"})) == 3


def _slot(item: Node) -> int | None:
    facts = node_facts(item)
    assert facts is not None
    return facts.slot


def test_cliques_group_by_the_whole_label_and_fall_back_to_name_order() -> None:
    facts = [
        NodeFacts(name="b-n01", clique=CLIQUE_B, gpus=4),
        NodeFacts(name="a-n01", clique=CLIQUE_A, gpus=4, slot=5),
        NodeFacts(name="a-n00", clique=CLIQUE_A, gpus=4, slot=9, healthy=False),
        NodeFacts(name="b-n00", clique=CLIQUE_B, gpus=4, schedulable=False),
    ]
    assert build_cliques(facts) == (
        Clique(
            id=CLIQUE_A,
            nodes=(
                EngineNode(name="a-n00", slot=9, gpus=4, healthy=False),
                EngineNode(name="a-n01", slot=5, gpus=4),
            ),
        ),
        Clique(
            id=CLIQUE_B,
            nodes=(
                EngineNode(name="b-n00", slot=0, gpus=4, schedulable=False),
                EngineNode(name="b-n01", slot=1, gpus=4),
            ),
        ),
    )


def test_same_clique_id_in_two_racks_is_two_cliques() -> None:
    racks = [node("x", clique="aaaa.1"), node("y", clique="bbbb.1")]
    facts = [found for item in racks if (found := node_facts(item)) is not None]
    assert [clique.id for clique in build_cliques(facts)] == ["aaaa.1", "bbbb.1"]
