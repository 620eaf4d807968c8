"""The allocator on Kubernetes 1.35, which serves no DeviceTaintRule at resource.k8s.io/v1:
ready, places gangs, says what it does without the API, and uses the API once it is served."""

from __future__ import annotations

import pytest

from sim.kubeapi import KubeServer, ServerConfig
from sim.kubeapi.kinds import register_builtins
from sim.kubeapi.releases import Release
from sim.kubeapi.storage.resources import Registry
from tests.support.wait import wait_for

from .conftest import AllocatorFactory
from .harness import Api, Tls
from .test_placement import all_pinned

RULES = ("resource.k8s.io", "v1", "devicetaintrules")
API = "devicetaintrules.resource.k8s.io/v1"


@pytest.fixture
def emulator_config() -> ServerConfig:
    return ServerConfig(bookmark_interval_s=0.5, kubernetes_version="1.35")


def serve_rules_as_137(emulator: KubeServer) -> None:
    """The server starts serving DeviceTaintRule at resource.k8s.io/v1, as 1.37 does."""
    newest = Registry()
    register_builtins(newest, Release.of("1.37"))
    served = newest.get(*RULES)
    assert served is not None
    emulator.api.registry.add(served)


async def test_ready_and_placing_on_1_35_then_using_device_taint_rules_once_served(
    emulator: KubeServer, start_allocator: AllocatorFactory, api: Api, tls: Tls
) -> None:
    assert emulator.api.registry.get(*RULES) is None
    allocator = start_allocator(CDO_CLIQUE_ALLOCATOR_INFORMER_OPTIONAL_API_RECHECK_S="0.3")
    await allocator.wait_ready()
    await api.register_webhook(tls, allocator.webhook_port)
    assert await allocator.counter("cdo_optional_api_served", api=API) == 0
    said = [
        r
        for r in allocator.process.log_records()
        if r.get("message") == "optional API not served; doing without it"
    ]
    assert len(said) == 1 and said[0]["api"] == API and "whole node" in said[0]["without"]

    await api.create_rack(0)
    await api.create_domain("train")
    uid = await api.create_replicaset("train-rs", replicas=4)
    names = await api.create_gated_pods("train", 4, template="train-rct", owner=("train-rs", uid))
    await wait_for(lambda: all_pinned(api, names), timeout=15, what="a gang placed")

    serve_rules_as_137(emulator)

    async def using_it() -> bool:
        return await allocator.counter("cdo_optional_api_served", api=API) == 1

    await wait_for(using_it, timeout=10, what="the API used without a restart")
    assert allocator.process.returncode is None
    assert await allocator.counter("cdo_informer_lists_total", resource="devicetaintrules") >= 1
