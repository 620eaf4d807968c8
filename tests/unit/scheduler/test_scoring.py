"""Least-allocated scoring and its tie-break."""

from __future__ import annotations

from sim.scheduler.algorithm import Placement, schedule_pod
from sim.scheduler.cel import SelectorCache
from sim.scheduler.facts import NodeUsage, node_facts
from sim.scheduler.scoring import least_allocated
from tests.unit.scheduler.builders import cluster, facts, make_node, make_pod


def test_an_empty_node_scores_higher_than_a_busy_one() -> None:
    node = node_facts(make_node("n1", gpus=4, cpu="8", memory="32Gi"))
    pod = facts(make_pod("p", gpus=1, cpu="1", memory="1Gi"))
    empty = least_allocated(pod, node, NodeUsage())
    busy = least_allocated(
        pod, node, NodeUsage(requested={"nvidia.com/gpu": 2000}, nonzero_cpu=4000, pods=2)
    )
    assert 0 <= busy < empty <= 100


def test_gpus_count_only_on_nodes_that_have_them() -> None:
    pod = facts(make_pod("p", cpu="4", memory="16Gi"))
    with_gpus = node_facts(make_node("g", gpus=4, cpu="8", memory="32Gi"))
    without = node_facts(make_node("c", gpus=0, cpu="8", memory="32Gi"))
    # CPU and memory half used on both; the GPU node adds an idle GPU share
    assert least_allocated(pod, without, NodeUsage()) == 50.0
    assert least_allocated(pod, with_gpus, NodeUsage()) == (50 + 50 + 100) / 3


def test_pods_that_request_nothing_still_spread() -> None:
    state = cluster([make_node("n1"), make_node("n2")], [make_pod("busy", node_name="n1")])
    decision = schedule_pod(facts(make_pod("p")), state, cache=SelectorCache())
    assert isinstance(decision, Placement)
    assert decision.node == "n2"


def test_ties_go_to_the_first_node_name() -> None:
    state = cluster([make_node(name) for name in ("n3", "n1", "n2")])
    decision = schedule_pod(facts(make_pod("p", gpus=1)), state, cache=SelectorCache())
    assert isinstance(decision, Placement)
    assert decision.node == "n1"
