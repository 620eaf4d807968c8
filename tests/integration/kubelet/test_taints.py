"""NoExecute taints on a running node: the kubelet evicts the pods that do not tolerate them."""

from __future__ import annotations

from functools import partial

from shared.kube.client import KubeClient
from sim.kubelet.models import Pod
from sim.topology import Cluster
from tests.integration.kubelet.conftest import KubeletFactory
from tests.integration.kubelet.helpers import (
    RecordingDriver,
    create_allocated_claim,
    get_pod,
    run_pod,
    taint_node,
)
from tests.support.wait import wait_for

MAINTENANCE = "example.test/maintenance"


async def _running(client: KubeClient, name: str) -> Pod | None:
    pod = await get_pod(client, name)
    return pod if pod is not None and pod.status.phase == "Running" else None


async def test_no_execute_taint_evicts_pods_that_do_not_tolerate_it(
    kube_client: KubeClient, cluster: Cluster, driver: RecordingDriver, kubelet_on: KubeletFactory
) -> None:
    node = cluster.nodes[0].name
    async with kubelet_on(0) as kubelet:
        claim = await create_allocated_claim(kube_client, "intolerant-channel", node=node)
        await run_pod(kube_client, "intolerant", node=node, claim="intolerant-channel")
        await run_pod(
            kube_client,
            "tolerant",
            node=node,
            tolerations=[{"key": MAINTENANCE, "operator": "Exists", "effect": "NoExecute"}],
        )
        await run_pod(
            kube_client,
            "patient",
            node=node,
            tolerations=[
                {
                    "key": MAINTENANCE,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 1,
                }
            ],
        )
        for name in ("intolerant", "tolerant", "patient"):
            await wait_for(partial(_running, kube_client, name), what=f"{name} Running")

        await taint_node(kube_client, node, [{"key": MAINTENANCE, "effect": "NoExecute"}])

        async def gone(name: str) -> bool:
            return await get_pod(kube_client, name) is None

        await wait_for(lambda: gone("intolerant"), what="intolerant pod evicted")
        assert claim.metadata.uid in driver.unprepared
        assert claim.metadata.uid not in kubelet.prepared_claims
        # tolerationSeconds is respected: the patient pod goes about a second later ...
        patient = await get_pod(kube_client, "patient")
        assert patient is not None and patient.metadata.deletion_timestamp is None
        await wait_for(lambda: gone("patient"), timeout=10, what="patient pod evicted")
        # ... and a pod that tolerates the taint without a time limit stays.
        tolerant = await _running(kube_client, "tolerant")
        assert tolerant is not None and tolerant.metadata.deletion_timestamp is None
