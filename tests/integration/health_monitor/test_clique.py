"""The clique labels follow the fabric: only a completed registration in one clique is labelled."""

from __future__ import annotations

import pynvml

from shared.crds.names import CLIQUE_LABEL, NVLINK_DOMAIN_LABEL
from sim.nvml import SimulatedNvml
from sim.topology import Cluster
from tests.integration.health_monitor.harness import Harness, MonitorFactory, TaintHistory
from tests.support.wait import wait_for


async def labels(h: Harness) -> dict[str, str]:
    node = await h.node()
    return {
        key: value
        for key, value in node.metadata.labels.items()
        if key in (CLIQUE_LABEL, NVLINK_DOMAIN_LABEL)
    }


async def reason(h: Harness) -> str:
    condition = await h.condition()
    return condition.reason if condition is not None else ""


async def test_the_label_waits_for_the_fabric_to_complete(
    start_monitor: MonitorFactory, cluster: Cluster
) -> None:
    sim = SimulatedNvml(cluster.nodes[0])
    sim.set_fabric(state=pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS)
    async with start_monitor(sim=sim) as h:
        faults = await wait_for(lambda: h.some_faults(4), what="4 faults")
        assert {(f.signal, f.severity, f.code) for f in faults} == {
            ("fabric", "warning", pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS)
        }
        assert {f.gpus for f in faults} == {(h.gpu_uuid(gpu),) for gpu in range(4)}

        async def warned() -> bool:
            return await reason(h) == "GpuWarning"

        await wait_for(warned, what="condition GpuWarning")
        assert await labels(h) == {}
        assert await h.fault_taint() is None  # registration in progress keeps nobody away

        sim.set_fabric(state=pynvml.NVML_GPU_FABRIC_STATE_COMPLETED)
        expected = {CLIQUE_LABEL: h.clique, NVLINK_DOMAIN_LABEL: h.topology.cluster_uuid}

        async def labelled() -> bool:
            return await labels(h) == expected

        await wait_for(labelled, what="the clique labels")
        await h.settled()


async def test_gpus_in_different_cliques_get_no_label_and_a_warning(
    start_monitor: MonitorFactory,
) -> None:
    async with start_monitor() as h:
        await h.settled()
        async with TaintHistory(h.client, h.name) as history:
            h.sim.set_fabric(3, clique_id=h.topology.clique_id + 1)

            async def unlabelled() -> bool:
                return await labels(h) == {}

            await wait_for(unlabelled, what="the clique labels removed")
            (fault,) = await wait_for(h.faults, what="a NodeFault")
            assert (fault.signal, fault.severity, fault.gpus) == ("clique", "warning", ())
            assert f"{h.topology.cluster_uuid}.{h.topology.clique_id + 1}" in fault.message
            condition = await h.condition()
            assert condition is not None
            assert (condition.status, condition.reason) == ("True", "GpuWarning")

            h.sim.reset_fabric(3)
            await h.settled()
            await wait_for(h.recoveries, what="NodeRecovered", timeout=10)
        assert history.effects == [None]
        node = await h.node()
        assert node.metadata.labels["kubernetes.io/hostname"] == h.name
