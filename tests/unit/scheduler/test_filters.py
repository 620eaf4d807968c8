"""The node-local filters, one table each."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from shared.kube.models import Taint, Toleration
from shared.scheduling.taints import toleration_matches
from sim.scheduler.facts import NodeUsage, node_facts
from sim.scheduler.filters import (
    NODE_AFFINITY,
    TOO_MANY_PODS,
    UNSCHEDULABLE,
    filter_node_affinity,
    filter_resources,
    filter_taints,
    filter_unschedulable,
    node_filter_reasons,
)
from tests.unit.scheduler.builders import facts, make_node, make_pod


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerates"),
    [
        ({"key": "k", "value": "v", "effect": "NoSchedule"}, ("k", "v", "NoSchedule"), True),
        ({"key": "k", "value": "w", "effect": "NoSchedule"}, ("k", "v", "NoSchedule"), False),
        ({"key": "k", "operator": "Exists"}, ("k", "v", "NoExecute"), True),
        ({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, ("k", "", "NoExecute"), False),
        ({"operator": "Exists"}, ("anything", "v", "NoSchedule"), True),
        ({"key": "other", "operator": "Exists"}, ("k", "", "NoSchedule"), False),
        ({"key": "k"}, ("k", "", "NoSchedule"), True),  # Equal with empty values
        ({"key": "k", "operator": "Bogus"}, ("k", "", "NoSchedule"), False),
    ],
)
def test_toleration_matches(
    toleration: dict[str, Any], taint: tuple[str, str, str], tolerates: bool
) -> None:
    key, value, effect = taint
    assert (
        toleration_matches(
            msgspec.convert(toleration, Toleration), Taint(key=key, value=value, effect=effect)
        )
        is tolerates
    )


FAULT = {"key": "cdo.dev/gpu-fault", "value": "xid", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("taints", "tolerations", "reasons"),
    [
        ([], [], ()),
        ([FAULT], [], ("node(s) had untolerated taint {cdo.dev/gpu-fault: xid}",)),
        (
            [{**FAULT, "effect": "NoExecute"}],
            [],
            ("node(s) had untolerated taint {cdo.dev/gpu-fault: xid}",),
        ),
        ([{**FAULT, "effect": "PreferNoSchedule"}], [], ()),
        ([FAULT], [{"key": "cdo.dev/gpu-fault", "operator": "Exists"}], ()),
    ],
)
def test_taints(
    taints: list[dict[str, str]], tolerations: list[dict[str, Any]], reasons: tuple[str, ...]
) -> None:
    node = node_facts(make_node("n1", taints=taints))
    assert filter_taints(facts(make_pod("p", tolerations=tolerations)), node) == reasons


@pytest.mark.parametrize(
    ("ready", "taint"),
    [
        ("False", "node.kubernetes.io/not-ready"),
        ("Unknown", "node.kubernetes.io/unreachable"),
        (None, "node.kubernetes.io/not-ready"),
    ],
)
def test_a_node_that_is_not_ready_counts_as_tainted(ready: str | None, taint: str) -> None:
    node = node_facts(make_node("n1", ready=ready))
    assert not node.ready
    assert filter_taints(facts(make_pod("p")), node) == (
        f"node(s) had untolerated taint {{{taint}: }}",
    )
    tolerant = make_pod("p", tolerations=[{"key": taint, "operator": "Exists"}])
    assert filter_taints(facts(tolerant), node) == ()


def test_unschedulable_node() -> None:
    node = node_facts(make_node("n1", unschedulable=True))
    assert filter_unschedulable(facts(make_pod("p")), node) == (UNSCHEDULABLE,)
    tolerant = make_pod(
        "p", tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]
    )
    assert filter_unschedulable(facts(tolerant), node) == ()
    assert filter_unschedulable(facts(make_pod("p")), node_facts(make_node("n2"))) == ()


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


@pytest.mark.parametrize(
    ("selector", "affinity", "fits"),
    [
        ({}, None, True),
        ({"rack": "r1"}, None, True),
        ({"rack": "r2"}, None, False),
        ({"rack": "r1", "missing": "x"}, None, False),
        (
            {},
            required({"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}),
            True,
        ),
        (
            {},
            required(
                {"matchExpressions": [{"key": "rack", "operator": "NotIn", "values": ["r1"]}]}
            ),
            False,
        ),
        (
            {},
            required(
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
            ),
            True,
        ),
        (
            {},
            required(
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
            ),
            False,
        ),
        # both must hold
        (
            {"rack": "r2"},
            required({"matchExpressions": [{"key": "rack", "operator": "Exists"}]}),
            False,
        ),
    ],
)
def test_node_selector_and_affinity(
    selector: dict[str, str], affinity: dict[str, Any] | None, fits: bool
) -> None:
    node = node_facts(make_node("n1", labels={"rack": "r1"}))
    pod = facts(make_pod("p", node_selector=selector, affinity=affinity))
    assert filter_node_affinity(pod, node) == (() if fits else (NODE_AFFINITY,))


@pytest.mark.parametrize(
    ("pod_kwargs", "used", "reasons"),
    [
        ({"gpus": 4}, {}, ()),
        ({"gpus": 4}, {"nvidia.com/gpu": 1000}, ("Insufficient nvidia.com/gpu",)),
        ({"gpus": 3}, {"nvidia.com/gpu": 1000}, ()),
        ({"cpu": "8"}, {}, ()),
        ({"cpu": "8001m"}, {}, ("Insufficient cpu",)),
        ({"cpu": "2", "memory": "31Gi"}, {"memory": 2 * 2**30 * 1000}, ("Insufficient memory",)),
        (
            {"cpu": "9", "gpus": 5},
            {},
            ("Insufficient cpu", "Insufficient nvidia.com/gpu"),
        ),
    ],
)
def test_resources(
    pod_kwargs: dict[str, Any], used: dict[str, int], reasons: tuple[str, ...]
) -> None:
    node = node_facts(make_node("n1", gpus=4, cpu="8", memory="32Gi"))
    usage = NodeUsage(requested=used, pods=1)
    got = filter_resources(facts(make_pod("p", **pod_kwargs)), node, usage)
    assert sorted(got) == sorted(reasons)


def test_a_node_without_gpus_has_none_to_give() -> None:
    node = node_facts(make_node("cpu-only", gpus=0))
    assert filter_resources(facts(make_pod("p", gpus=1)), node, NodeUsage()) == (
        "Insufficient nvidia.com/gpu",
    )


def test_pod_count_limit() -> None:
    node = node_facts(make_node("n1", pods="2"))
    pod = facts(make_pod("p"))
    assert filter_resources(pod, node, NodeUsage(pods=1)) == ()
    assert filter_resources(pod, node, NodeUsage(pods=2)) == (TOO_MANY_PODS,)


def test_filters_stop_at_the_first_that_fails() -> None:
    node = node_facts(make_node("n1", unschedulable=True, taints=[FAULT], gpus=0))
    assert node_filter_reasons(facts(make_pod("p", gpus=1)), node, NodeUsage()) == (UNSCHEDULABLE,)
