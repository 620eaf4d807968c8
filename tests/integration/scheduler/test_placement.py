"""The scheduler against the API emulator: where pods go, when they wait, and why."""

from __future__ import annotations

from shared.kube.client import KubeClient
from shared.kube.resources import NODES, PODS
from sim.scheduler import Scheduler
from tests.integration.scheduler.cluster import (
    NAMESPACE,
    create_node,
    create_pod,
    get_pod,
    node,
    pod,
    wait_bound,
    wait_unschedulable,
)
from tests.support.wait import wait_for

FAULT = {"key": "cdo.dev/gpu-fault", "value": "xid-79", "effect": "NoSchedule"}


async def test_node_selector_and_required_node_affinity(
    kube_client: KubeClient, scheduler: Scheduler
) -> None:
    for name, rack in (("n1", "r1"), ("n2", "r2"), ("n3", "r3")):
        await create_node(kube_client, node(name, labels={"rack": rack}))
    await create_pod(kube_client, pod("by-selector", node_selector={"rack": "r2"}))
    await create_pod(
        kube_client,
        pod(
            "by-affinity",
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "rack", "operator": "NotIn", "values": ["r1", "r2"]}
                                ]
                            }
                        ]
                    }
                }
            },
        ),
    )
    assert await wait_bound(kube_client, "by-selector") == "n2"
    assert await wait_bound(kube_client, "by-affinity") == "n3"
    bound = await get_pod(kube_client, "by-selector")
    scheduled = bound.condition("PodScheduled")
    assert scheduled is not None
    assert scheduled.status == "True"


async def test_taints_keep_pods_away_unless_tolerated(
    kube_client: KubeClient, scheduler: Scheduler
) -> None:
    await create_node(kube_client, node("faulty", taints=[FAULT]))
    await create_node(kube_client, node("down", ready=False))
    await create_pod(kube_client, pod("intolerant"))
    message = await wait_unschedulable(kube_client, "intolerant")
    assert message == (
        "0/2 nodes are available: "
        "1 node(s) had untolerated taint {cdo.dev/gpu-fault: xid-79}, "
        "1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }."
    )
    await create_pod(
        kube_client,
        pod("tolerant", tolerations=[{"key": "cdo.dev/gpu-fault", "operator": "Exists"}]),
    )
    assert await wait_bound(kube_client, "tolerant") == "faulty"


async def test_gpus_are_not_overcommitted_and_freed_gpus_are_used(
    kube_client: KubeClient, scheduler: Scheduler
) -> None:
    await create_node(kube_client, node("n1", gpus=4))
    await create_pod(kube_client, pod("first", gpus=3))
    await create_pod(kube_client, pod("second", gpus=3))
    assert await wait_bound(kube_client, "first") == "n1"
    message = await wait_unschedulable(kube_client, "second")
    assert message == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    await kube_client.delete(PODS, "first", namespace=NAMESPACE)
    assert await wait_bound(kube_client, "second") == "n1"


async def test_an_unschedulable_pod_is_retried_when_a_node_appears(
    kube_client: KubeClient, scheduler: Scheduler
) -> None:
    await create_node(kube_client, node("small", gpus=1))
    await create_pod(kube_client, pod("big", gpus=4))
    await wait_unschedulable(kube_client, "big", contains="Insufficient nvidia.com/gpu")
    await create_node(kube_client, node("large", gpus=4))
    assert await wait_bound(kube_client, "big") == "large"


async def test_a_cordoned_node_is_skipped_until_uncordoned(
    kube_client: KubeClient, scheduler: Scheduler
) -> None:
    await create_node(kube_client, node("n1", unschedulable=True))
    await create_pod(kube_client, pod("p"))
    await wait_unschedulable(kube_client, "p", contains="1 node(s) were unschedulable")
    await kube_client.patch(NODES, "n1", {"spec": {"unschedulable": None}})
    assert await wait_bound(kube_client, "p") == "n1"


async def test_gated_pods_wait_until_their_last_gate_is_removed(
    kube_client: KubeClient, scheduler: Scheduler
) -> None:
    await create_node(kube_client, node("n1"))
    await create_pod(kube_client, pod("gated", gates=["cdo.dev/placement", "other/gate"]))
    # a pod created after the gated one is bound: the scheduler has seen both by then
    await create_pod(kube_client, pod("witness"))
    await wait_bound(kube_client, "witness")
    gated = await get_pod(kube_client, "gated")
    assert gated.spec.node_name == ""
    condition = gated.condition("PodScheduled")
    assert condition is not None
    assert condition.reason == "SchedulingGated"

    await kube_client.patch(
        PODS, "gated", {"spec": {"schedulingGates": [{"name": "other/gate"}]}}, namespace=NAMESPACE
    )
    await create_pod(kube_client, pod("witness-2"))
    await wait_bound(kube_client, "witness-2")
    assert (await get_pod(kube_client, "gated")).spec.node_name == ""

    await kube_client.patch(PODS, "gated", {"spec": {"schedulingGates": None}}, namespace=NAMESPACE)
    assert await wait_bound(kube_client, "gated") == "n1"


async def test_pod_anti_affinity_per_host(kube_client: KubeClient, scheduler: Scheduler) -> None:
    for name in ("n1", "n2"):
        await create_node(kube_client, node(name))
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": "spread"}},
                }
            ]
        }
    }
    for i in range(3):
        await create_pod(kube_client, pod(f"s{i}", labels={"app": "spread"}, affinity=anti))
    nodes = set()
    for i in range(3):

        async def placed(name: str = f"s{i}") -> str | None:
            got = await get_pod(kube_client, name)
            if got.spec.node_name:
                return got.spec.node_name
            condition = got.condition("PodScheduled")
            return "-" if condition is not None and condition.reason == "Unschedulable" else None

        nodes.add(await wait_for(placed, what=f"pod s{i} placed or refused"))
    assert nodes == {"n1", "n2", "-"}


async def test_scheduler_name_selects_the_pods_it_schedules(
    kube_client: KubeClient, scheduler: Scheduler
) -> None:
    await create_node(kube_client, node("n1"))
    other = pod("other")
    other["spec"]["schedulerName"] = "someone-else"
    await create_pod(kube_client, other)
    await create_pod(kube_client, pod("mine"))
    await wait_bound(kube_client, "mine")
    assert (await get_pod(kube_client, "other")).spec.node_name == ""
