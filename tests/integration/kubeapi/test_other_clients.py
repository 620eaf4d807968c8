"""The official synchronous client and kubernetes-asyncio's dynamic client."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kubernetes import watch as _sync_watch
from kubernetes.client import exceptions as _sync_exceptions
from kubernetes_asyncio import client
from kubernetes_asyncio.dynamic import DynamicClient

from sim.kubeapi import KubeServer, ServerThread
from tests.support.wait import wait_for, wait_for_sync

from .crds import WIDGET_CRD, widget

# The synchronous client is only partly typed: drive it through Any.
sync_watch: Any = _sync_watch
SyncApiException: Any = _sync_exceptions.ApiException


def _sync_api(kubeconfig: Path) -> Any:
    config: Any = kubernetes.config
    return config.new_client_from_config(config_file=str(kubeconfig))


def test_sync_client_crud_watch_conflict_and_gone(kube_thread: ServerThread) -> None:
    api = _sync_api(kube_thread.kubeconfig)
    core: Any = kubernetes.client.CoreV1Api(api)
    body = kubernetes.client.V1ConfigMap(
        metadata=kubernetes.client.V1ObjectMeta(name="s"), data={"a": "1"}
    )
    created = core.create_namespaced_config_map("default", body)
    assert created.metadata.uid
    listed = core.list_namespaced_config_map("default")
    assert [c.metadata.name for c in listed.items] == ["s"]

    # 409 on a stale write.
    fresh = core.read_namespaced_config_map("s", "default")
    fresh.data = {"a": "2"}
    core.replace_namespaced_config_map("s", "default", fresh)
    with pytest.raises(SyncApiException) as exc:
        core.replace_namespaced_config_map("s", "default", fresh)
    assert exc.value.status == 409 and json.loads(exc.value.body)["reason"] == "Conflict"

    # list + watch from the list's RV, resumed after the stream is dropped.
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    seen: list[tuple[str, str]] = []
    w = sync_watch.Watch()

    def consume() -> None:
        # Without timeout_seconds the client watches forever, reconnecting from the last RV.
        for event in w.stream(core.list_namespaced_config_map, "default", resource_version=rv):
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 2:
                w.stop()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    core.create_namespaced_config_map(
        "default", kubernetes.client.V1ConfigMap(metadata=kubernetes.client.V1ObjectMeta(name="t"))
    )
    wait_for_sync(lambda: seen, what="first event")
    kube_thread.faults.drop_watches()
    core.delete_namespaced_config_map("t", "default")
    thread.join(15)
    assert seen == [("ADDED", "t"), ("DELETED", "t")]

    # 410 after compaction.
    old_rv = created.metadata.resource_version
    kube_thread.compact()
    with pytest.raises(SyncApiException) as gone:
        for _ in sync_watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version=old_rv, timeout_seconds=2
        ):
            pass
    assert gone.value.status == 410
    core.delete_namespaced_config_map("s", "default")
    api.close()


async def test_dynamic_client(
    api_client: client.ApiClient, kube: KubeServer, tmp_path: Path
) -> None:
    dyn = await DynamicClient(api_client, cache_file=str(tmp_path / "discovery.json"))
    crds = await dyn.resources.get(
        api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition"
    )
    await dyn.create(crds, body=WIDGET_CRD)
    # The new group needs fresh discovery, as on a real cluster.
    await dyn.resources.invalidate_cache()
    widgets = await dyn.resources.get(api_version="example.com/v1", kind="Widget")
    created = await dyn.create(widgets, body=widget("w", size=2), namespace="default")
    assert created.spec.maxSize == 10
    got = await dyn.get(widgets, name="w", namespace="default")
    assert got.metadata.uid == created.metadata.uid
    patched = await dyn.patch(
        widgets,
        body={"spec": {"size": 3}},
        name="w",
        namespace="default",
        content_type="application/merge-patch+json",
    )
    assert patched.spec.size == 3 and patched.metadata.generation == 2
    missing = await dyn.get(widgets, name="absent", namespace="default")
    assert missing.code == 404 and missing.reason == "NotFound"  # kubernetes-asyncio returns 404s
    configmaps = await dyn.resources.get(api_version="v1", kind="ConfigMap")
    await dyn.create(
        configmaps,
        body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
        namespace="default",
    )
    listed = await dyn.get(configmaps, namespace="default")
    assert [i.metadata.name for i in listed.items] == ["c"]
    await dyn.delete(widgets, name="w", namespace="default")
    gone = await dyn.get(widgets, name="w", namespace="default")
    assert gone.code == 404


async def test_dynamic_client_watch_resume_conflict_and_gone(
    api_client: client.ApiClient, kube: KubeServer, tmp_path: Path
) -> None:
    from kubernetes_asyncio import watch
    from kubernetes_asyncio.client.rest import ApiException
    from kubernetes_asyncio.dynamic.exceptions import ConflictError

    dyn = await DynamicClient(api_client, cache_file=str(tmp_path / "discovery.json"))
    configmaps = await dyn.resources.get(api_version="v1", kind="ConfigMap")
    first = await dyn.create(
        configmaps, body={"metadata": {"name": "a"}, "data": {"v": "1"}}, namespace="default"
    )
    listed = await dyn.get(configmaps, namespace="default")
    seen: list[tuple[str, str]] = []
    watcher = watch.Watch()

    async def consume() -> None:
        async for event in dyn.watch(
            configmaps,
            namespace="default",
            resource_version=listed.metadata.resourceVersion,
            watcher=watcher,
        ):
            seen.append((event["type"], event["object"].metadata.name))
            if len(seen) == 2:
                watcher.stop()
                break

    task = asyncio.create_task(consume())
    await dyn.create(configmaps, body={"metadata": {"name": "b"}}, namespace="default")
    await wait_for(lambda: seen, what="first dynamic watch event")
    kube.faults.drop_watches()
    await dyn.delete(configmaps, name="b", namespace="default")
    await asyncio.wait_for(task, 10)
    await watcher.close()
    assert seen == [("ADDED", "b"), ("DELETED", "b")]

    stale = first.to_dict()
    await dyn.patch(
        configmaps,
        body={"data": {"v": "2"}},
        name="a",
        namespace="default",
        content_type="application/merge-patch+json",
    )
    try:
        result = await dyn.replace(configmaps, body=stale, namespace="default")
    except ConflictError as conflict:
        body = json.loads(conflict.body or b"")
    else:
        # kubernetes-asyncio 36 hands some error Statuses back instead of raising.
        body = result.to_dict()
    assert body["code"] == 409 and body["reason"] == "Conflict"

    kube.compact()
    gone_watcher = watch.Watch()
    with pytest.raises(ApiException) as gone:
        async for _ in dyn.watch(
            configmaps,
            namespace="default",
            resource_version=first.metadata.resourceVersion,
            timeout=2,
            watcher=gone_watcher,
        ):
            pass
    await gone_watcher.close()
    assert gone.value.status == 410
