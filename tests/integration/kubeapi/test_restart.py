"""An emulator restarted over its data directory is the same API server, as kube-apiserver is over
etcd: the objects, uids and resourceVersions as they were, the counter going on from there, CRDs
served, tokens and the kubeconfig's CA still good; its watch history gone, so a watch from before
is 410 and an informer lists again and follows on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from shared.kube.client import KubeClient
from shared.kube.errors import KubeApiError
from shared.kube.informer import Informer, InformerSettings
from shared.kube.meta import KubeObject
from shared.kube.resources import CONFIG_MAPS, Resource
from sim.kubeapi import ServerConfig
from sim.kubeapi.hosting.child_process import ApiProcess, serve_in_process_of_its_own
from sim.kubeapi.storage.journal import FILE
from tests.support.wait import wait_for

from .crds import WIDGET_CRD

WIDGETS = Resource(
    group="example.com", version="v1", plural="widgets", kind="Widget", namespaced=True
)
CRDS = Resource(
    group="apiextensions.k8s.io",
    version="v1",
    plural="customresourcedefinitions",
    kind="CustomResourceDefinition",
    namespaced=False,
)
SERVICE_ACCOUNTS = Resource(
    group="", version="v1", plural="serviceaccounts", kind="ServiceAccount", namespaced=True
)


class ConfigMap(KubeObject, frozen=True, kw_only=True):
    data: dict[str, str] = msgspec.field(default_factory=dict)


class Items(msgspec.Struct):
    items: list[KubeObject]


def config_map(name: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"v": value},
    }


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[ApiProcess]:
    config = ServerConfig(enforce_auth=True, data_dir=str(tmp_path / "data"))
    async with serve_in_process_of_its_own(
        config=config, host="127.0.0.1", port=0, kubeconfig=tmp_path / "kubeconfig"
    ) as running:
        yield running


async def test_a_restarted_server_keeps_every_object_and_goes_on_counting(
    api: ApiProcess, tmp_path: Path
) -> None:
    client = await KubeClient.connect(kubeconfig=api.kubeconfig)
    try:
        await client.create(CRDS, WIDGET_CRD)
        await wait_for(lambda: _served(client), what="the CRD served")
        widget = {"apiVersion": "example.com/v1", "kind": "Widget",
                  "metadata": {"name": "w"}, "spec": {"size": 3}}  # fmt: skip
        await client.create(WIDGETS, widget, namespace="default")
        for name in ("kept", "changed", "gone"):
            await client.create(CONFIG_MAPS, config_map(name, "1"), namespace="default")
        list_rv = _list_rv(await client.list(CONFIG_MAPS, namespace="default"))
        await client.patch(CONFIG_MAPS, "changed", {"data": {"v": "2"}}, namespace="default")
        await client.delete(CONFIG_MAPS, "gone", namespace="default")
        await client.create(SERVICE_ACCOUNTS, {"metadata": {"name": "robot"}}, namespace="default")
        token = await _token(client, "robot")
        before = await _objects(client)
        url = api.url

        await api.restart()

        assert api.url == url, "the same port"
        assert (tmp_path / "data" / FILE).exists()
        # The same client, with the kubeconfig's CA and the admin token from before.
        assert await _objects(client) == before
        raw = await client.get(WIDGETS, "w", namespace="default")
        assert msgspec.json.decode(raw)["spec"]["size"] == 3
        created = await client.create(CONFIG_MAPS, config_map("after", "1"), namespace="default")
        assert int(_rv(created)) > int(list_rv)
        # A token issued before the restart is still accepted.
        assert await _whoami(client, token) == "system:serviceaccount:default:robot"
        # Watch history went with the process: a watch from before is 410.
        lines = [
            msgspec.json.decode(line)
            async for line in client.watch(
                CONFIG_MAPS, namespace="default", resource_version=list_rv, timeout_s=5
            )
        ]
        assert [(line["type"], line["object"]["code"]) for line in lines] == [("ERROR", 410)]
    finally:
        await client.close()


async def test_an_informer_relists_through_a_restart_and_misses_nothing(
    api: ApiProcess,
) -> None:
    client = await KubeClient.connect(kubeconfig=api.kubeconfig, request_timeout_s=5)
    informer = Informer(
        client,
        CONFIG_MAPS,
        ConfigMap,
        namespace="default",
        settings=InformerSettings(backoff_initial_s=0.05, backoff_max_s=0.5),
    )
    task = asyncio.create_task(informer.run())
    try:
        for index in range(5):
            await client.create(CONFIG_MAPS, config_map(f"cm{index}", "1"), namespace="default")
        await informer.wait_synced()
        await wait_for(lambda: len(informer.cache) == 5, what="five cached")

        await api.restart()
        # Changes after the restart: the informer's watch is 410, it lists and follows on.
        await client.patch(CONFIG_MAPS, "cm0", {"data": {"v": "2"}}, namespace="default")
        await client.delete(CONFIG_MAPS, "cm1", namespace="default")
        await client.create(CONFIG_MAPS, config_map("new", "1"), namespace="default")

        def caught_up() -> bool:
            cm0 = informer.cache.get("default/cm0")
            return (
                sorted(informer.cache.keys())
                == sorted(f"default/{n}" for n in ("cm0", "cm2", "cm3", "cm4", "new"))
                and cm0 is not None
                and cm0.data == {"v": "2"}
            )

        await wait_for(caught_up, timeout=20, what="the informer caught up after the restart")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


async def _served(client: KubeClient) -> bool:
    try:
        await client.list(WIDGETS, namespace="default")
    except KubeApiError:
        return False
    return True


async def _objects(client: KubeClient) -> list[tuple[str, str, str]]:
    raw = await client.list(CONFIG_MAPS, namespace="default")
    items = msgspec.json.decode(raw, type=Items).items
    return sorted((i.metadata.name, i.metadata.uid, i.metadata.resource_version) for i in items)


def _rv(raw: bytes) -> str:
    return msgspec.json.decode(raw, type=KubeObject).metadata.resource_version


def _list_rv(raw: bytes) -> str:
    return str(msgspec.json.decode(raw)["metadata"]["resourceVersion"])


async def _token(client: KubeClient, account: str) -> str:
    raw = await client.create(
        SERVICE_ACCOUNTS,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        namespace="default",
        name=account,
        subresource="token",
    )
    return str(msgspec.json.decode(raw)["status"]["token"])


async def _whoami(client: KubeClient, token: str) -> str:
    raw = await client.request(
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
              "spec": {"token": token}},
    )  # fmt: skip
    return str(msgspec.json.decode(raw)["status"]["user"]["username"])
