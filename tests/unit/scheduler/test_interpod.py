"""Required inter-pod affinity and anti-affinity, counted once per cycle."""

from __future__ import annotations

from typing import Any

from sim.scheduler.facts import NodeFacts
from sim.scheduler.interpod import (
    AFFINITY,
    ANTI_AFFINITY,
    EXISTING_ANTI_AFFINITY,
    filter_interpod,
    interpod_state,
)
from sim.scheduler.state import ClusterState
from tests.unit.scheduler.builders import (
    CLIQUE,
    cluster,
    facts,
    make_namespace,
    make_node,
    make_pod,
    pod_affinity,
)

NODES = [
    make_node("a1", labels={CLIQUE: "A"}),
    make_node("a2", labels={CLIQUE: "A"}),
    make_node("b1", labels={CLIQUE: "B"}),
    make_node("plain"),  # no clique label
]
GROUP = {"app": "train"}


def feasible(state: ClusterState, pod_name: str = "new", **kwargs: Any) -> list[str]:
    pod = facts(make_pod(pod_name, **kwargs))
    counts = interpod_state(pod, state)
    return [
        name
        for name in state.node_names()
        if not filter_interpod(pod, node_facts_of(state, name), counts)
    ]


def node_facts_of(state: ClusterState, name: str) -> NodeFacts:
    node = state.node(name)
    assert node is not None
    return node


def test_the_first_pod_of_a_group_goes_anywhere_with_the_topology_label() -> None:
    state = cluster(NODES)
    affinity = pod_affinity(key=CLIQUE, labels=GROUP)
    assert feasible(state, labels=GROUP, affinity=affinity) == ["a1", "a2", "b1"]


def test_later_pods_follow_the_group_into_its_clique() -> None:
    state = cluster(NODES, [make_pod("first", labels=GROUP, node_name="b1")])
    affinity = pod_affinity(key=CLIQUE, labels=GROUP)
    assert feasible(state, labels=GROUP, affinity=affinity) == ["b1"]


def test_a_pod_that_does_not_match_its_own_terms_needs_an_existing_match() -> None:
    state = cluster(NODES)
    affinity = pod_affinity(key=CLIQUE, labels=GROUP)
    assert feasible(state, labels={"app": "other"}, affinity=affinity) == []
    pod = facts(make_pod("new", labels={"app": "other"}, affinity=affinity))
    assert filter_interpod(pod, node_facts_of(state, "a1"), interpod_state(pod, state)) == (
        AFFINITY,
    )


def test_pods_in_other_namespaces_do_not_count_unless_named() -> None:
    state = cluster(NODES, [make_pod("first", namespace="team", labels=GROUP, node_name="b1")])
    own_namespace = pod_affinity(key=CLIQUE, labels=GROUP)
    assert feasible(state, labels={}, affinity=own_namespace) == []
    named = pod_affinity(key=CLIQUE, labels=GROUP, namespaces=["team"])
    assert feasible(state, labels={}, affinity=named) == ["b1"]


def test_namespace_selector() -> None:
    state = cluster(NODES, [make_pod("first", namespace="team", labels=GROUP, node_name="a2")])
    state.set_namespace(make_namespace("team", {"tenant": "blue"}))
    blue = pod_affinity(
        key=CLIQUE, labels=GROUP, namespaceSelector={"matchLabels": {"tenant": "blue"}}
    )
    red = pod_affinity(
        key=CLIQUE, labels=GROUP, namespaceSelector={"matchLabels": {"tenant": "red"}}
    )
    every = pod_affinity(key=CLIQUE, labels=GROUP, namespaceSelector={})
    assert feasible(state, affinity=blue) == ["a1", "a2"]
    assert feasible(state, affinity=red) == []
    assert feasible(state, affinity=every) == ["a1", "a2"]


def test_match_expressions_without_match_labels() -> None:
    state = cluster(NODES, [make_pod("first", labels=GROUP, node_name="a1")])
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": CLIQUE,
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "app", "operator": "In", "values": ["train", "x"]}
                        ]
                    },
                }
            ]
        }
    }
    assert feasible(state, affinity=affinity) == ["a1", "a2"]


def test_anti_affinity_keeps_pods_apart_per_topology_value() -> None:
    state = cluster(NODES, [make_pod("first", labels=GROUP, node_name="a1")])
    anti = pod_affinity(key=CLIQUE, labels=GROUP, anti=True)
    # "plain" has no clique label, so anti-affinity cannot reject it
    assert feasible(state, labels=GROUP, affinity=anti) == ["b1", "plain"]
    pod = facts(make_pod("new", affinity=anti))
    assert filter_interpod(pod, node_facts_of(state, "a2"), interpod_state(pod, state)) == (
        ANTI_AFFINITY,
    )


def test_anti_affinity_per_host() -> None:
    state = cluster(NODES, [make_pod("first", labels=GROUP, node_name="a1")])
    anti = pod_affinity(key="kubernetes.io/hostname", labels=GROUP, anti=True)
    assert feasible(state, affinity=anti) == ["a2", "b1", "plain"]


def test_an_existing_pods_anti_affinity_rejects_the_incoming_pod() -> None:
    loner = make_pod(
        "loner",
        labels={"app": "loner"},
        node_name="a1",
        affinity=pod_affinity(key=CLIQUE, labels=GROUP, anti=True),
    )
    state = cluster(NODES, [loner])
    assert feasible(state, labels=GROUP) == ["b1", "plain"]
    pod = facts(make_pod("new", labels=GROUP))
    assert filter_interpod(pod, node_facts_of(state, "a2"), interpod_state(pod, state)) == (
        EXISTING_ANTI_AFFINITY,
    )
    # a pod the loner's term does not select is not affected
    assert feasible(state, labels={"app": "other"}) == ["a1", "a2", "b1", "plain"]


def test_a_pod_does_not_count_against_itself() -> None:
    me = make_pod(
        "me",
        labels=GROUP,
        node_name="a1",
        affinity=pod_affinity(key=CLIQUE, labels=GROUP, anti=True),
    )
    state = cluster(NODES, [me])
    assert "a1" in feasible(
        state, "me", labels=GROUP, affinity=pod_affinity(key=CLIQUE, labels=GROUP, anti=True)
    )


def test_a_term_without_a_label_selector_selects_nothing() -> None:
    state = cluster(NODES, [make_pod("first", labels=GROUP, node_name="a1")])
    affinity = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": CLIQUE}]
        }
    }
    assert feasible(state, affinity=affinity) == ["a1", "a2", "b1", "plain"]
