"""The seed workload on the simulated 2-rack cluster, applied unchanged with kubectl, placed by
the clique allocator: each copy in one clique, a copy that cannot fit waits with a reason and
lands when room appears, and scaling keeps the domain in its clique."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from shared.crds import ComputeDomain
from shared.crds.names import PLACED_CONDITION
from shared.kube.models import Pod
from tests.integration.clique_allocator.harness import check_no_double_booking, gated
from tests.integration.clique_allocator.system import EXAMPLES, System, running_system
from tests.support.wait import wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")

SEED = ("-f", str(EXAMPLES / "training-domain-1.yaml"), "-f", str(EXAMPLES / "llm-training.yaml"))
SELECTOR = "app=llm-training"
DOMAIN = "training-domain-1"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[System]:
    async with running_system() as running:
        yield running


async def apply_seed(system: System, namespace: str) -> None:
    if namespace != "default":
        await system.create_namespace(namespace)
    await system.kubectl("apply", "-n", namespace, *SEED)


async def scale(system: System, namespace: str, replicas: int) -> None:
    # The emulator serves no scale subresource, so not `kubectl scale`.
    body = f'{{"spec":{{"replicas":{replicas}}}}}'
    await system.kubectl("patch", "deployment/llm-training", "-n", namespace, "-p", body)


def cliques(system: System, pods: list[Pod]) -> set[str]:
    return {system.clique_of(pod.spec.node_name) for pod in pods}


async def test_the_seed_workload_runs_in_one_clique_and_a_second_copy_in_the_other_rack(
    system: System,
) -> None:
    await apply_seed(system, "default")
    first = await system.wait_running("default", SELECTOR, 18)
    assert len({pod.spec.node_name for pod in first}) == 18  # 4 GPUs each: a whole tray
    assert len(cliques(system, first)) == 1
    assert not any(gated(pod) for pod in first)
    placement = await system.placement("default", DOMAIN)
    assert placement is not None
    assert {p.metadata.name for p in first} == set(placement.spec.pod_names)
    assert cliques(system, first) == set(placement.spec.cliques)

    async def reported() -> ComputeDomain | None:
        found = await system.api.domain(DOMAIN)
        placed = found.status.condition("Placed") if found is not None else None
        return found if placed is not None and placed.status == "True" else None

    # The domain controller reports what the allocator recorded.
    status = (await wait_for(reported, timeout=30, what="domain Placed")).status
    assert (status.clique, status.channel) == (
        placement.spec.slices[0].clique,
        placement.spec.slices[0].channel,
    )

    await apply_seed(system, "team-b")
    second = await system.wait_running("team-b", SELECTOR, 18)
    assert len(cliques(system, second)) == 1
    assert cliques(system, first) | cliques(system, second) == set(system.racks.values())
    check_no_double_booking(await system.placements())

    listed = await system.kubectl("get", "pods", "-n", "team-b", "-o", "wide")
    assert "SchedulingGated" not in listed
    await system.delete_everything_in("default")
    await system.delete_everything_in("team-b")


async def test_a_copy_that_cannot_fit_waits_with_a_reason_and_lands_when_room_appears(
    system: System,
) -> None:
    for namespace in ("ns-a", "ns-b"):
        await apply_seed(system, namespace)
    a = await system.wait_running("ns-a", SELECTOR, 18)
    await system.wait_running("ns-b", SELECTOR, 18)
    await apply_seed(system, "ns-c")

    async def waiting() -> list[Pod] | None:
        pods = await system.pods("ns-c", SELECTOR)
        held = [
            pod
            for pod in pods
            if gated(pod)
            and (c := pod.condition(PLACED_CONDITION)) is not None
            and (c.status, c.reason) == ("False", "InsufficientCapacity")
        ]
        return held if len(held) == 18 else None

    held = await wait_for(waiting, timeout=60, interval=0.1, what="ns-c held with a reason")
    condition = held[0].condition(PLACED_CONDITION)
    assert condition is not None
    assert "no clique has 18 nodes with 4 free GPUs" in condition.message
    assert await system.placement("ns-c", DOMAIN) is None
    described = await system.kubectl("describe", "computedomain", DOMAIN, "-n", "ns-c")
    assert "InsufficientCapacity" in described

    await system.delete_everything_in("ns-a")
    c = await system.wait_running("ns-c", SELECTOR, 18)
    assert cliques(system, c) == cliques(system, a)
    check_no_double_booking(await system.placements())
    await system.delete_everything_in("ns-b")
    await system.delete_everything_in("ns-c")


async def test_scaling_18_to_9_to_18_stays_in_the_clique(system: System) -> None:
    await apply_seed(system, "elastic")
    full = await system.wait_running("elastic", SELECTOR, 18)
    clique = cliques(system, full)
    # Another copy holds the other rack, so the domain could not regrow anywhere else.
    await apply_seed(system, "neighbour")
    await system.wait_running("neighbour", SELECTOR, 18)

    await scale(system, "elastic", 9)
    half = await system.wait_running("elastic", SELECTOR, 9)
    assert cliques(system, half) == clique

    async def shrunk() -> bool:
        placement = await system.placement("elastic", DOMAIN)
        return (
            placement is not None
            and placement.spec.reserved_pods * placement.spec.gpus_per_pod == 36
        )

    await wait_for(shrunk, timeout=30, interval=0.1, what="reservation released to 9 pods")
    await scale(system, "elastic", 18)
    again = await system.wait_running("elastic", SELECTOR, 18)
    assert cliques(system, again) == clique
    placement = await system.placement("elastic", DOMAIN)
    assert placement is not None and placement.spec.size == 18
    check_no_double_booking(await system.placements())
    await system.delete_everything_in("elastic")
    await system.delete_everything_in("neighbour")
