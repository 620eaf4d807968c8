"""Kubernetes 1.35 serves no DeviceTaintRule at resource.k8s.io/v1: a fault of one GPU of a node
whose GPUs come from NVIDIA's DRA driver taints the whole node instead of one device."""

from __future__ import annotations

import pytest

from shared.events import NodeFault
from shared.kube.client import KubeClient
from sim.kubeapi import ServerConfig
from tests.integration.health_monitor.harness import MonitorFactory
from tests.integration.health_monitor.test_gpu_faults import publish_gpus
from tests.support.wait import wait_for


@pytest.fixture
def emulator_config() -> ServerConfig:
    return ServerConfig(bookmark_interval_s=0.5, kubernetes_version="1.35")


async def test_without_device_taint_rules_a_fault_of_one_dra_gpu_taints_the_node(
    start_monitor: MonitorFactory, kube_client: KubeClient
) -> None:
    async with start_monitor(5) as h:
        await publish_gpus(kube_client, h.name)
        await h.settled()
        h.sim.raise_xid(2, 79)

        async def tainted() -> bool:
            taint = await h.fault_taint()
            return taint is not None and taint.effect == "NoExecute"

        await wait_for(tainted, what="the node's NoExecute fault taint instead of a rule")
        fault: NodeFault = (await wait_for(lambda: h.some_faults(1), what="NodeFault"))[0]
        assert (fault.gpu_index, fault.code) == (2, 79)
        assert fault.scope != "gpu"
        api = "devicetaintrules.resource.k8s.io/v1"
        served = h.metrics.registry.get_sample_value("cdo_optional_api_served", {"api": api})
        assert served == 0
