"""A ComputeDomain on GPU nodes without multi-node NVLink, on the whole system: the domain runs
without IMEX, as NVIDIA's driver runs it there. Its pods are placed by the scheduler and run,
no IMEX channel is injected, and the status says so (cliqueID "", index -1)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from shared.crds.names import CLIQUE_LABEL, MULTI_NODE_NVLINK_LABEL
from shared.kube.models import Pod
from tests.e2e.whole_system import SYSTEM_STEP_S, WholeSystem, gated, live, running_whole_system
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

TOPOLOGY = Path(__file__).with_name("no-nvlink.yaml")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system() -> AsyncIterator[WholeSystem]:
    async with running_whole_system(topology=TOPOLOGY) as running:
        yield running


async def test_the_nodes_are_labelled_as_having_no_multi_node_nvlink(system: WholeSystem) -> None:
    async def labelled() -> bool:
        nodes = await system.nodes()
        return bool(nodes) and all(
            node.metadata.labels.get(MULTI_NODE_NVLINK_LABEL) == "false"
            and CLIQUE_LABEL not in node.metadata.labels
            for node in nodes
        )

    await wait_for(labelled, timeout=60, interval=0.3, what="multi-node-nvlink=false on every node")


async def test_a_domain_runs_without_imex_and_its_status_says_so(system: WholeSystem) -> None:
    namespace = "hgx"
    await system.create_namespace(namespace)
    await system.create_workload(namespace, "job", replicas=4, gpus=8)

    async def running() -> list[Pod] | None:
        found = live(await system.pods(namespace, "app=job"))
        settled = len(found) == 4 and all(
            pod.status.phase == "Running" and not gated(pod) for pod in found
        )
        return found if settled else None

    pods = await wait_for(running, timeout=SYSTEM_STEP_S, interval=0.3, what="4 pods running")
    assert len({pod.spec.node_name for pod in pods}) == 4  # 8 GPUs each: one pod per node

    domain = await system.wait_domain_ready(namespace, "job", nodes=4)
    status = domain.status
    placed = status.condition("Placed")
    assert placed is not None and placed.reason == "PlacedWithoutNvlink"
    assert "without IMEX" in placed.message
    assert {node.name for node in status.nodes} == {pod.spec.node_name for pod in pods}
    assert {(node.clique_id, node.index) for node in status.nodes} == {("", -1)}
    assert status.clique is None and status.channel is None and status.cliques == ()

    placement = await system.placement(namespace, "job")
    assert placement is not None
    assert placement.spec.multi_node_nvlink is False and placement.spec.slices == ()
    assert all(not pod.spec.node_selector for pod in pods)  # the scheduler chose the nodes
    # Nothing is injected: no channel device on any node.
    assert all(not channels for channels in (await system.all_channel_devices()).values())

    await system.clean_up(namespace)
    assert await system.leftovers() == []
