"""ComputeDomain v1beta1 <-> v1beta2 through the allocator's conversion webhook, over HTTPS.

The allocator runs as a real process serving ``/convert`` beside its pod webhook; the CRD's
conversion webhook points at it with its CA, as the installation's caBundle does. The API
emulator converts as kube-apiserver does, and the real kubectl reads both versions.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest

from shared.crds import COMPUTE_DOMAINS, COMPUTE_DOMAINS_V1BETA1
from shared.crds.names import NUM_NODES_ANNOTATION
from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from sim.kubeapi import KubeServer
from tests.support.kubectl import kubectl
from tests.support.wait import wait_for

from .conftest import AllocatorFactory
from .harness import NAMESPACE, Allocator, Api, Tls

ROOT = Path(__file__).resolve().parents[3]
POLICY = ROOT / "deploy" / "kustomize" / "base" / "computedomain-num-nodes" / "policy.yaml"
CDO_FIELDS = {
    "failover": {"policy": "Wait", "graceSeconds": 42},
    "gang": {"size": 8, "sliceSize": 4, "nodes": 2},
}


@pytest.fixture
async def converter(start_allocator: AllocatorFactory, api: Api, tls: Tls) -> Allocator:
    """A ready allocator, the CRD's conversion webhook pointing at it."""
    running = start_allocator()
    await running.wait_ready()
    await api.register_conversion(tls, running.webhook_port)
    return running


def v1beta2(name: str, *, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {
        "apiVersion": COMPUTE_DOMAINS.api_version,
        "kind": "ComputeDomain",
        "metadata": metadata,
        "spec": {"channel": {"resourceClaimTemplate": {"name": f"{name}-rct"}}, **CDO_FIELDS},
    }


async def read(client: KubeClient, version: Any, name: str) -> dict[str, Any]:
    body: dict[str, Any] = msgspec.json.decode(await client.get(version, name, namespace=NAMESPACE))
    return body


def without_version(obj: dict[str, Any]) -> dict[str, Any]:
    rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "metadata")}
    metadata = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    return {**rest, "metadata": metadata}


async def conversions(allocator: Allocator, result: str) -> float:
    return await allocator.counter("cdo_conversions_total", result=result)


async def test_a_v1beta2_object_reads_back_as_v1beta1_and_v1beta2_unchanged(
    api: Api, converter: Allocator
) -> None:
    client = api.client
    created = msgspec.json.decode(
        await client.create(
            COMPUTE_DOMAINS,
            v1beta2("d", annotations={NUM_NODES_ANNOTATION: "18"}),
            namespace=NAMESPACE,
        )
    )
    old = await read(client, COMPUTE_DOMAINS_V1BETA1, "d")
    assert old["apiVersion"] == "resource.nvidia.com/v1beta1"
    assert old["spec"]["numNodes"] == 18
    assert NUM_NODES_ANNOTATION not in (old["metadata"].get("annotations") or {})
    assert {k: old["spec"][k] for k in CDO_FIELDS} == CDO_FIELDS
    # Written back as it was read, it changes nothing: no new resourceVersion, same v1beta2.
    put = msgspec.json.decode(
        await client.replace(COMPUTE_DOMAINS_V1BETA1, "d", old, namespace=NAMESPACE)
    )
    assert put["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    new = await read(client, COMPUTE_DOMAINS, "d")
    assert without_version(new) == without_version(created)
    assert await conversions(converter, "converted") >= 3


async def test_a_v1beta1_object_keeps_num_nodes_and_cdos_fields_both_ways(
    api: Api, converter: Allocator
) -> None:
    client = api.client
    for name, num_nodes in (("zero", 0), ("nine", 9), ("none", None)):
        body = {**v1beta2(name), "apiVersion": COMPUTE_DOMAINS_V1BETA1.api_version}
        if num_nodes is not None:
            body["spec"] = {**body["spec"], "numNodes": num_nodes}
        await client.create(COMPUTE_DOMAINS_V1BETA1, body, namespace=NAMESPACE)
        stored = await read(client, COMPUTE_DOMAINS, name)
        annotations = stored["metadata"].get("annotations") or {}
        expected = {} if num_nodes is None else {NUM_NODES_ANNOTATION: str(num_nodes)}
        assert annotations == expected
        assert "numNodes" not in stored["spec"]
        old = await read(client, COMPUTE_DOMAINS_V1BETA1, name)
        assert old["spec"].get("numNodes") == num_nodes
        assert {k: old["spec"][k] for k in CDO_FIELDS} == CDO_FIELDS


async def test_lists_and_watches_at_both_versions(
    api: Api, converter: Allocator, emulator: KubeServer
) -> None:
    client = api.client
    await client.create(
        COMPUTE_DOMAINS, v1beta2("w", annotations={NUM_NODES_ANNOTATION: "4"}), namespace=NAMESPACE
    )
    for version, numbers in ((COMPUTE_DOMAINS_V1BETA1, [4]), (COMPUTE_DOMAINS, [None])):
        listed = msgspec.json.decode(await client.list(version, namespace=NAMESPACE))
        assert [item["apiVersion"] for item in listed["items"]] == [version.api_version]
        assert [item["spec"].get("numNodes") for item in listed["items"]] == numbers

    seen: dict[str, list[tuple[str, Any]]] = {"v1beta1": [], "v1beta2": []}

    async def follow(version: Any, key: str) -> None:
        async for line in client.watch(version, namespace=NAMESPACE, resource_version="0"):
            event = msgspec.json.decode(line)
            if event["type"] == "BOOKMARK":
                continue
            assert event["object"]["apiVersion"] == version.api_version
            seen[key].append((event["type"], event["object"]["spec"].get("numNodes")))
            if len(seen[key]) == 2:
                return

    watchers = [
        asyncio.create_task(follow(COMPUTE_DOMAINS_V1BETA1, "v1beta1")),
        asyncio.create_task(follow(COMPUTE_DOMAINS, "v1beta2")),
    ]
    await wait_for(lambda: all(seen.values()) or None, what="the ADDED events")
    await client.patch(COMPUTE_DOMAINS_V1BETA1, "w", {"spec": {"numNodes": 5}}, namespace=NAMESPACE)
    await asyncio.wait_for(asyncio.gather(*watchers), 20)
    assert seen["v1beta1"] == [("ADDED", 4), ("MODIFIED", 5)]
    assert seen["v1beta2"] == [("ADDED", None), ("MODIFIED", None)]
    stored = await read(client, COMPUTE_DOMAINS, "w")
    assert stored["metadata"]["annotations"] == {NUM_NODES_ANNOTATION: "5"}

    rc, out, err = await kubectl(
        emulator.kubeconfig,
        "get",
        "computedomains.v1beta1.resource.nvidia.com",
        "w",
        "-o",
        "jsonpath={.apiVersion} {.spec.numNodes} {.spec.gang.sliceSize}",
    )
    assert rc == 0, err
    assert out == "resource.nvidia.com/v1beta1 5 4"
    rc, out, err = await kubectl(
        emulator.kubeconfig,
        "get",
        "computedomains.v1beta2.resource.nvidia.com",
        "w",
        "-o",
        "jsonpath={.apiVersion} {.metadata.annotations}",
    )
    assert rc == 0, err
    assert out == f'resource.nvidia.com/v1beta2 {{"{NUM_NODES_ANNOTATION}":"5"}}'


async def test_a_num_nodes_annotation_that_cannot_convert_is_refused_naming_the_field(
    api: Api, converter: Allocator, emulator: KubeServer
) -> None:
    client = api.client
    # Before the policy: NVIDIA's driver (or anyone) stored a value v1beta1 cannot carry.
    await client.create(
        COMPUTE_DOMAINS,
        v1beta2("old", annotations={NUM_NODES_ANNOTATION: "many"}),
        namespace=NAMESPACE,
    )
    field = (
        f'metadata.annotations[{NUM_NODES_ANNOTATION}]: Invalid value: "many": must be a whole '
        "number from 0 to 100000"
    )
    with pytest.raises(KubeApiError) as caught:
        await client.get(COMPUTE_DOMAINS_V1BETA1, "old", namespace=NAMESPACE)
    assert caught.value.code == 500
    assert (
        "conversion webhook for resource.nvidia.com/v1beta2, Kind=ComputeDomain failed: " + field
    ) in caught.value.message
    assert await conversions(converter, "refused") >= 1
    rc, _, err = await kubectl(
        emulator.kubeconfig, "get", "computedomains.v1beta1.resource.nvidia.com", "old"
    )
    assert rc == 1 and err.startswith("Error from server: conversion webhook for ")
    assert field in err

    rc, _, err = await kubectl(emulator.kubeconfig, "apply", "-f", str(POLICY))
    assert rc == 0, err
    with pytest.raises(KubeApiError) as caught:
        await client.create(
            COMPUTE_DOMAINS,
            v1beta2("new", annotations={NUM_NODES_ANNOTATION: "-3"}),
            namespace=NAMESPACE,
        )
    assert caught.value.code == 422
    assert (
        f'metadata.annotations[{NUM_NODES_ANNOTATION}]: Invalid value: "-3": must be a whole '
        "number from 0 to 100000: it is spec.numNodes of resource.nvidia.com/v1beta1"
    ) in caught.value.message
    # A good value passes; an object that already had a bad one can still be written as it is
    # (the domain controller's finalizer and status writes go through).
    await client.create(
        COMPUTE_DOMAINS,
        v1beta2("fine", annotations={NUM_NODES_ANNOTATION: "7"}),
        namespace=NAMESPACE,
    )
    await client.patch(
        COMPUTE_DOMAINS, "old", {"metadata": {"labels": {"team": "a"}}}, namespace=NAMESPACE
    )
    with pytest.raises(KubeApiError) as caught:
        await client.patch(
            COMPUTE_DOMAINS,
            "fine",
            {"metadata": {"annotations": {NUM_NODES_ANNOTATION: "1e3"}}},
            namespace=NAMESPACE,
        )
    assert caught.value.code == 422


async def test_with_the_webhook_down_v1beta1_fails_and_v1beta2_serves(
    api: Api, converter: Allocator, emulator: KubeServer
) -> None:
    client = api.client
    await client.create(COMPUTE_DOMAINS, v1beta2("d"), namespace=NAMESPACE)
    converter.stop()
    with pytest.raises(KubeApiError) as caught:
        await client.get(COMPUTE_DOMAINS_V1BETA1, "d", namespace=NAMESPACE)
    assert caught.value.code == 500
    assert (
        "conversion webhook for resource.nvidia.com/v1beta2, Kind=ComputeDomain failed: Post"
        in (caught.value.message)
    )
    assert "connect: connection refused" in caught.value.message
    assert (await read(client, COMPUTE_DOMAINS, "d"))["metadata"]["name"] == "d"
