"""The allocator on a server without DeviceTaintRule (every release before 1.37): ready, places
gangs, says what it does without the API, and uses the API once an upgrade serves it."""

from __future__ import annotations

from typing import Any

from sim.kubeapi import KubeServer
from tests.support.wait import wait_for

from .conftest import AllocatorFactory
from .harness import Api, Tls
from .test_placement import all_pinned

RULES = ("resource.k8s.io", "v1", "devicetaintrules")
API = "devicetaintrules.resource.k8s.io/v1"


def stop_serving(emulator: KubeServer) -> Any:
    kept = emulator.api.registry.get(*RULES)
    emulator.api.registry.remove(*RULES)
    return kept


async def test_ready_and_placing_without_device_taint_rules_then_using_them_after_an_upgrade(
    emulator: KubeServer, start_allocator: AllocatorFactory, api: Api, tls: Tls
) -> None:
    kept = stop_serving(emulator)
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

    emulator.api.registry.add(kept)  # the cluster is upgraded to a release that serves it

    async def using_it() -> bool:
        return await allocator.counter("cdo_optional_api_served", api=API) == 1

    await wait_for(using_it, timeout=10, what="the API used without a restart")
    assert allocator.process.returncode is None
    assert await allocator.counter("cdo_informer_lists_total", resource="devicetaintrules") >= 1
